"""A figure's set of files, written and read as a whole.

A run writes ``figure.{png,pdf,svg}``, its tables, ``data.csv`` and ``summary.json``
(``figure``, ``parameters``, ``provenance``, ``rows``, the printed ``tables`` and ``files``:
the SHA-256 of every other file). :func:`write_set` puts the set together beside its folder
and swaps it in whole, so a run killed mid-save, or two runs saving at once, never leave
files of two runs side by side; :func:`verify_set` checks a set against its digests.
"""

from __future__ import annotations

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
    """Write ``path`` via a temporary file beside it and a rename."""
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
    """A ValueError naming ``folder`` unless a set of files ``names`` may replace it: it
    is absent, empty or a previous set (its summary.json, only files among ``names`` and
    our temporaries), a plain folder (not a link, a mount point, the current folder or one
    above it) in a parent we may write."""
    folder = Path(folder)
    where = f"output folder (artifacts_dir) {folder}"
    if folder.is_symlink():
        raise ValueError(f"{where}: is a symbolic link; give the folder it points to")
    absolute, cwd = folder.resolve(), Path.cwd().resolve()
    if absolute == cwd or absolute in cwd.parents:
        raise ValueError(f"{where}: is the current folder or holds it; a run replaces its "
                         "whole folder: give it one of its own")
    parent = absolute.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{where}: cannot write in {parent}, where the set is put together "
                         "before it takes the folder's place")
    if not folder.exists():
        return
    if not folder.is_dir():
        raise ValueError(f"{where}: exists and is not a folder")
    if os.path.ismount(folder):
        raise ValueError(f"{where}: is a mount point, which cannot be replaced; give a folder "
                         "inside it")
    entries = list(folder.iterdir())
    foreign = sorted(e.name for e in entries if not (
        e.is_file() and (e.name in names or OUR_TEMPORARIES.fullmatch(e.name))))
    if not foreign and entries and not (folder / "summary.json").is_file():
        foreign = ["no summary.json (not a previous run's set)"]
    if foreign:
        raise ValueError(f"{where}: holds {', '.join(foreign[:5])}"
                         f"{', ...' if len(foreign) > 5 else ''}, which are not a figure's "
                         "files; a run replaces its whole folder: give it one of its own")


def write_set(folder: Path, files: dict[str, bytes]) -> None:
    """Make ``folder`` hold exactly ``files`` (name -> bytes), as a whole: written into a
    temporary folder beside it, which takes its place in one rename (Linux's renameat2
    exchanges the two; elsewhere the old folder is moved aside first)."""
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
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
            os.chmod(staging / name, 0o666 & ~_UMASK)
        os.chmod(staging, 0o777 & ~_UMASK)  # mkdtemp makes 0700
        for _ in range(100):  # another run may swap in between: try again
            try:
                os.rename(staging, folder)  # no folder there, or an empty one
                return
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            if _exchange(staging, folder):
                return
            aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{os.getpid()}.",
                                          suffix=".old", dir=folder.parent))
            try:
                os.rename(folder, aside / "set")
            except FileNotFoundError:
                pass
            finally:
                shutil.rmtree(aside, ignore_errors=True)
        raise OSError(f"could not swap {staging} into {folder}: other runs kept writing it")
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # now the old set, or nothing


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (renameat2 RENAME_EXCHANGE); False where unsupported."""
    libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
    if not hasattr(libc, "renameat2"):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOENT):
        return False  # no support here (or the folder just went): fall back
    raise OSError(err, os.strerror(err), str(b))


def verify_set(folder: Path) -> dict:
    """``folder``'s summary.json, once every file it lists has the digest it records; else a
    ValueError naming the first file missing or differing."""
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
    """Write ``rows`` as CSV (:func:`qkov.tables.csv_bytes`) to ``path``, atomically."""
    write_atomic(path, csv_bytes(rows, columns, str(path)))


def summary_bytes(figure_id: str, parameters: Any, rows, wall_time_s: float,
                  files: dict[str, bytes], dtype: str | None = None, tables=()) -> bytes:
    """``summary.json`` of a set; ``parameters``: a FigureParameters (or a plain mapping),
    recorded as given; ``dtype``: what the figure computed in."""
    summary = {
        "figure": figure_id,
        "parameters": plain(dict(getattr(parameters, "given", parameters) or {})),
        "provenance": provenance(wall_time_s, figure_id, parameters, dtype),
        "rows": plain(list(rows)),
        "tables": list(tables),
        "files": {name: digest(data) for name, data in files.items()},
    }
    return (json.dumps(summary, indent=2) + "\n").encode()
