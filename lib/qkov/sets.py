"""A figure's set of files (``summary.json`` with the SHA-256 of every other file), swapped in
whole: a run killed mid-save or two runs saving at once never leave two runs' files mixed."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .provenance import provenance
from .tables import csv_bytes, plain

_UMASK = os.umask(0)
os.umask(_UMASK)
# Besides a previous set's files, a folder a set replaces may hold our temporaries and a
# sweep's executed notebook; anything else is refused, so that a mistyped artifacts_dir
# (".", a home folder, a folder of one's own tables) never loses a file.
OUR_TEMPORARIES = re.compile(r"\..+\.tmp|notebook\.ipynb")


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{Path(path).name}.", suffix=".tmp", dir=Path(path).parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_replaceable(folder: Path, names) -> None:
    """A ValueError unless a set of ``names`` may replace ``folder`` (absent, empty or a
    previous set, a plain folder in a parent we may write)."""
    folder, cwd = Path(folder), Path.cwd().resolve()
    parent = folder.resolve().parent
    while not parent.exists():
        parent = parent.parent
    entries = list(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []
    foreign = sorted(e.name for e in entries if not (
        e.is_file() and (e.name in names or OUR_TEMPORARIES.fullmatch(e.name))))
    if entries and not foreign and not (folder / "summary.json").is_file():
        foreign = ["no summary.json (not a previous run's set)"]
    whole = "a run replaces its whole folder: give it one of its own"
    for wrong, problem in (
            (folder.is_symlink(), "is a symbolic link; give the folder it points to"),
            (folder.resolve() in (cwd, *cwd.parents), f"is the current folder or holds it; {whole}"),
            (not os.access(parent, os.W_OK | os.X_OK),
             f"cannot write in {parent}, where the set is put together before it takes the "
             "folder's place"),
            (folder.exists() and not folder.is_dir(), "exists and is not a folder"),
            (folder.is_dir() and os.path.ismount(folder),
             "is a mount point, which cannot be replaced; give a folder inside it"),
            (foreign, f"holds {', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}, "
                      f"which are not a figure's files; {whole}")):
        if wrong:
            raise ValueError(f"output folder (artifacts_dir) {folder}: {problem}")


def write_set(folder: Path, files: dict[str, bytes]) -> None:
    """``files`` (name -> bytes) put together beside ``folder``, then swapped in by one
    rename (renameat2's exchange; elsewhere the old set is moved aside)."""
    folder = Path(folder)
    check_replaceable(folder, files)
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Remove what runs killed while saving left (.<name>.<pid>.<8 of mkdtemp>.new/.old).
    abandoned = re.compile(rf"\.{re.escape(folder.name)}\.(\d+)\.[a-z0-9_]{{8}}\.(new|old)")
    for entry in folder.parent.iterdir():
        match = abandoned.fullmatch(entry.name)
        if match and entry.is_dir() and not _alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{os.getpid()}.", suffix=".new",
                                    dir=folder.parent))
    aside = staging.with_suffix(".old")
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        os.chmod(staging, 0o777 & ~_UMASK)  # mkdtemp makes 0700
        for _ in range(100):  # another run may swap in between: try again
            if _exchange(staging, folder):
                return
            with contextlib.suppress(FileNotFoundError):  # no renameat2: move the old set aside
                os.rename(folder, aside)
            shutil.rmtree(aside, ignore_errors=True)
            try:
                os.rename(staging, folder)
                return
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
        raise OSError(f"could not swap {staging} into {folder}: other runs kept writing it")
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # now the old set, or nothing


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        pass
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (renameat2 RENAME_EXCHANGE); False where it cannot."""
    libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
    if not hasattr(libc, "renameat2"):
        return False
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0:  # AT_FDCWD
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOENT):  # unsupported here, or no folder yet
        return False
    raise OSError(err, os.strerror(err), str(b))


def verify_set(folder: Path) -> dict:
    """``folder``'s summary, once every file has its digest; else a ValueError naming it."""
    folder, path = Path(folder), Path(folder) / "summary.json"
    try:
        summary = json.loads(path.read_text())
        recorded = summary["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: missing, or not a figure summary with the digests of its "
                         f"set ({exc!r}); regenerate the figure") from exc
    for name, expected in recorded.items():
        try:
            actual = digest((folder / name).read_bytes())
        except OSError:
            actual = "missing"
        if actual != expected:
            raise ValueError(f"{folder / name}: {actual if actual == 'missing' else 'differs from'}"
                             f" the digest in {path} ({expected[:19]}...); the set is not whole:"
                             " regenerate the figure")
    return summary


def write_table(path: Path, rows, columns=None) -> None:
    write_atomic(path, csv_bytes(rows, columns, str(path)))


def summary_bytes(figure_id: str, parameters: Any, rows, wall_time_s: float,
                  files: dict[str, bytes], dtype: str | None = None, tables=()) -> bytes:
    """A set's summary.json; ``parameters``: a FigureParameters (recorded as given) or a dict."""
    summary = {
        "figure": figure_id,
        "parameters": plain(dict(getattr(parameters, "given", parameters) or {})),
        "provenance": provenance(wall_time_s, figure_id, parameters, dtype),
        "rows": plain(list(rows)),
        "tables": list(tables),
        "files": {name: digest(data) for name, data in files.items()},
    }
    return (json.dumps(summary, indent=2) + "\n").encode()
