"""A figure's set of files, written and read as a whole.

A figure's run writes one set of files: ``figure.{png,pdf,svg}``, ``data.csv`` (the plotted
numbers) and ``summary.json`` (``figure``, ``parameters``, ``provenance``, ``rows``, the
``tables`` its notebook printed (:mod:`qkov.tables`) and ``files``: a SHA-256 digest of every
other file of the set). The set is written into a temporary folder beside its target and
swapped in whole (:func:`write_set`), so a run killed mid-save, or two runs saving into one
folder at once, never leave files of two runs side by side; :func:`verify_set` checks a set
against its digests (the book does before showing it). Where a set goes:
:mod:`qkov.artifacts`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from .artifacts import given_parameters
from .provenance import provenance
from .tables import csv_bytes, plain

_UMASK = os.umask(0)
os.umask(_UMASK)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


DIGESTS = "files"  # the key of summary.json that holds the set's digests


# Besides a previous set's files (summary.json among them), a folder a set replaces may hold
# our own temporaries and a sweep's executed notebook; anything else is refused, so that a
# mistyped artifacts_dir (".", a home folder, a folder of one's own tables) never loses a file.
OUR_TEMPORARIES = re.compile(r"\..+\.tmp|notebook\.ipynb")


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_replaceable(folder: Path, names: Collection[str]) -> None:
    """A ValueError naming ``folder`` unless a set of files ``names`` may replace it: it
    does not exist, is empty, or holds a previous set (its summary.json, and only files
    among ``names`` and our temporaries); and it is a plain folder (not a link, a mount
    point, or the current folder or one above it) whose parent we may write, where the set
    is put together."""
    folder = Path(folder)
    where = f"output folder (artifacts_dir) {folder}"
    if folder.is_symlink():
        raise ValueError(f"{where}: is a symbolic link; give the folder it points to")
    absolute = folder.resolve()
    if absolute == Path.cwd().resolve() or absolute in Path.cwd().resolve().parents:
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


def write_set(folder: Path, files: Mapping[str, bytes]) -> None:
    """Make ``folder`` hold exactly ``files`` (name -> bytes), as a whole: they are written
    into a temporary folder beside it, which then takes its place in one rename (where
    Linux's renameat2 can exchange the two; elsewhere the old folder is first moved aside).
    A run killed before the rename leaves the old set; readers never see a mix of two."""
    folder = Path(folder)
    check_replaceable(folder, files)
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(folder)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{os.getpid()}.", suffix=".new",
                                    dir=folder.parent))
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
            os.chmod(staging / name, 0o666 & ~_UMASK)
        os.chmod(staging, 0o777 & ~_UMASK)  # mkdtemp makes 0700
        _swap_in(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # now the old set, or nothing


def _swap_in(staging: Path, folder: Path) -> None:
    """Put ``staging`` at ``folder``; what was at ``folder`` ends at ``staging`` (or gone)."""
    for _ in range(100):  # another run may swap in between: try again
        try:
            os.rename(staging, folder)  # no folder there, or an empty one
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if _exchange(staging, folder):
            return
        aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{os.getpid()}.", suffix=".old",
                                      dir=folder.parent))
        try:
            os.rename(folder, aside / "set")
        except FileNotFoundError:
            pass
        finally:
            shutil.rmtree(aside, ignore_errors=True)
    raise OSError(f"could not swap {staging} into {folder}: other runs kept writing it")


def _remove_abandoned(folder: Path) -> None:
    """Remove the temporary folders beside ``folder`` of runs killed while saving (named
    ``.<name>.<pid>.*.new`` or ``.old``, by a process that no longer exists)."""
    # mkdtemp's random part is 8 letters, digits or _: no dot, so a sibling named
    # "<name>.<digits>" cannot pass for one of these.
    pattern = re.compile(rf"\.{re.escape(folder.name)}\.(\d+)\.[a-z0-9_]{{8}}\.(new|old)")
    for entry in folder.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and entry.is_dir() and not _alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
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
    """``folder``'s summary.json, once every file it lists is there with the digest it
    records; a ValueError naming the folder and the first file that is missing or differs
    (or a summary without digests: written before they were, so regenerate it)."""
    folder = Path(folder)
    path = folder / "summary.json"
    try:
        summary = json.loads(path.read_text())
        recorded = summary[DIGESTS]
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


def write_table(path: Path, rows: Sequence[Mapping[str, Any]],
                columns: Sequence[str] | None = None) -> None:
    """Write ``rows`` as CSV (:func:`csv_bytes`) to ``path``, atomically."""
    write_atomic(path, csv_bytes(rows, columns, str(path)))


def summary_bytes(figure_id: str, parameters: Any, rows: Sequence[Mapping[str, Any]],
                  wall_time_s: float, files: Mapping[str, bytes], dtype: str | None = None,
                  tables: Sequence[Mapping[str, Any]] = (), **provenance_extra: Any) -> bytes:
    """``summary.json`` of a set: ``parameters`` (the figure's
    :class:`~qkov.params.FigureParameters`, or a plain mapping) as given, the provenance,
    the ``rows``, the ``tables`` its notebook printed (:func:`qkov.tables.taken`) and the
    digest of each of the set's other ``files``; ``dtype``: the floating-point type the
    figure computed in."""
    summary = {
        "figure": figure_id,
        "parameters": plain(given_parameters(parameters)),
        "provenance": provenance(wall_time_s, figure_id, parameters, dtype, **provenance_extra),
        "rows": plain(list(rows)),
        "tables": list(tables),
        DIGESTS: {name: digest(data) for name, data in files.items()},
    }
    return (json.dumps(summary, indent=2) + "\n").encode()
