"""Where a figure's outputs go, and how they are written: as a whole set, with provenance.

A figure's run writes one set of files: ``figure.{png,pdf,svg}``, ``data.csv`` (the plotted
numbers) and ``summary.json`` (``figure``, ``parameters``, ``provenance``, ``rows`` and
``files``: a SHA-256 digest of every other file of the set). The set is written into a
temporary folder beside its target and swapped in whole (:func:`write_set`), so a run killed
mid-save, or two runs saving into one folder at once, never leave files of two runs side by
side; :func:`verify_set` checks a set against its digests (the book does before showing it).

Where a set goes (:func:`output_dir`):
- the run's ``artifacts_dir`` parameter, when given;
- else, in the pipeline (``QKOV_PIPELINE=1``: set by the Snakefile's rules and by the test
  session), the figure's *canonical* folder
  ``artifacts/<figure-id>/``, which the book shows - and only at the figure's default
  parameters (:func:`check_canonical`);
- else a run folder of its own, ``artifacts/runs/<figure-id>-<hash of its parameters>/``:
  a reader's run with other parameters never overwrites the book's figure.
``artifacts/`` is ``$QKOV_ARTIFACTS`` when set, else that of the checkout the library runs
from, else (an installed copy, not a checkout) ``./artifacts`` of the current folder.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

ARTIFACTS_ENV = "QKOV_ARTIFACTS"
_UMASK = os.umask(0)
os.umask(_UMASK)


def repo_root() -> Path:
    """The checkout this library was installed from (``pip install -e .``), else the cwd."""
    candidate = Path(__file__).resolve().parents[2]
    if (candidate / "pyproject.toml").is_file() and (candidate / "lib" / "qkov").is_dir():
        return candidate
    return Path.cwd()


PIPELINE_ENV = "QKOV_PIPELINE"  # "1": this run is the pipeline's, into the canonical folder
RUNS = "runs"  # below artifacts/: the run folders of runs that are not the pipeline's


def artifacts_root(checkout: str | os.PathLike | None = None) -> Path:
    """``$QKOV_ARTIFACTS`` if set (the tests point it at a temporary folder), else the
    ``artifacts/`` of ``checkout`` (default: the checkout the library runs from, else the
    current folder: see :func:`repo_root`)."""
    root = os.environ.get(ARTIFACTS_ENV)
    return Path(root) if root else Path(checkout or repo_root()) / "artifacts"


def default_dir(figure_id: str, checkout: str | os.PathLike | None = None) -> Path:
    """``figure_id``'s canonical folder, ``artifacts/<figure-id>`` (see
    :func:`artifacts_root`), which the pipeline writes and the book shows; not created."""
    return artifacts_root(checkout) / figure_id


def pipeline_run() -> bool:
    """Whether this process runs for the pipeline (``$QKOV_PIPELINE`` is "1")."""
    return os.environ.get(PIPELINE_ENV) == "1"


def parameters_hash(parameters: Any) -> str:
    """12 hex digits naming a run's parameters (those that decide its results: not
    OUTPUT_ONLY), the same for the same values however they were written."""
    checked = ({name: getattr(parameters, name) for name in parameters.names()}
               if hasattr(parameters, "names") else _given(parameters))  # [1] is [1.0]
    text = json.dumps(_plain({k: v for k, v in checked.items() if k not in OUTPUT_ONLY}),
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def run_dir(figure_id: str, parameters: Any) -> Path:
    """The run folder of a run that is not the pipeline's: ``artifacts/runs/<id>-<hash>``."""
    return artifacts_root() / RUNS / f"{figure_id}-{parameters_hash(parameters)}"


def check_canonical(figure_id: str, parameters: Any) -> None:
    """A ValueError naming the parameters, unless they are the figure's defaults (apart from
    OUTPUT_ONLY and INPUT_PATHS): only those results may be the canonical set the book shows
    as the figure."""
    if not hasattr(parameters, "defaults"):
        return  # a plain mapping: no defaults to hold it to
    custom = not_canonical(parameters.given, parameters.defaults())
    if custom:
        raise ValueError(
            f"{figure_id}: the canonical folder {default_dir(figure_id)} holds the figure at "
            f"its default parameters, and this run sets {', '.join(custom)}; give the run an "
            "artifacts_dir, or run it outside the pipeline (it then writes a run folder "
            f"below {artifacts_root() / RUNS})")


def output_dir(figure_id: str, parameters: Any) -> Path:
    """Where a run of ``figure_id`` with ``parameters`` (its ``artifacts_dir`` among them)
    writes its set: see the module's docstring. Not created."""
    given = getattr(parameters, "artifacts_dir", None)
    if given is not None:
        return Path(given)  # relative to the current folder, as any command-line path
    if pipeline_run():
        check_canonical(figure_id, parameters)
        return default_dir(figure_id)
    return run_dir(figure_id, parameters)


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


def _git(*args: str, cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd or repo_root(), capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def running_checkout() -> Path | None:
    """The git checkout whose library is running (an editable install), or None: a
    non-editable install runs a copy, and the repository it was started from says nothing
    about that copy."""
    root = repo_root()
    return root if Path(__file__).resolve().is_relative_to(root / "lib") else None


def git_commit(root: Path | None = None) -> str | None:
    """The commit the repository (at ``root``, default this one) is at; None outside git."""
    return _git("rev-parse", "HEAD", cwd=root)


LIBRARY_INPUTS = ("lib", "pyproject.toml")  # what every figure's code is made of
# Parameters that change where results go or how a run is shown, not the results.
OUTPUT_ONLY = ("artifacts_dir", "progress", "workers", "allow_long")
# Parameters that say where a run reads its inputs (a dataset, another figure's summary):
# they differ from machine to machine, so a canonical set may set them.
# (Not theory-rescaling's fig2_summary: a canonical set reads paper-fig2's canonical one.)
INPUT_PATHS = ("hatexplain_dir", "agreement_tsv", "squad_train", "squad_dev", "glove_path")


def _given(parameters: Any) -> dict[str, Any]:
    """A run's parameters as given: a FigureParameters' ``given``, or a plain mapping."""
    return dict(parameters.given if hasattr(parameters, "given") else parameters or {})


def differing(given: Mapping[str, Any], defaults: Mapping[str, Any],
              ignore: Sequence[str] = OUTPUT_ONLY) -> list[str]:
    """The names whose values in ``given`` and ``defaults`` differ (one missing counts),
    ``ignore`` aside."""
    return sorted(k for k in {*given, *defaults}
                  if k not in ignore and _plain(given.get(k)) != _plain(defaults.get(k)))


def not_canonical(given: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """The parameters that keep a run with ``given`` from being the figure's canonical set:
    those that differ from its ``defaults``, aside from OUTPUT_ONLY and INPUT_PATHS."""
    return differing(given, defaults, (*OUTPUT_ONLY, *INPUT_PATHS))


def custom_parameters(parameters: Any) -> list[str] | None:
    """The names of the parameters other than the figure's defaults, OUTPUT_ONLY aside;
    None when ``parameters`` is not a FigureParameters (its defaults are unknown)."""
    if not (hasattr(parameters, "given") and hasattr(parameters, "defaults")):
        return None
    return differing(parameters.given, parameters.defaults())


def _code_cells(notebook_json: str) -> list[str]:
    """The code cells' sources of a notebook: what it runs (its outputs are the build's)."""
    cells = json.loads(notebook_json).get("cells", [])
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in cells if c.get("cell_type") == "code"]


def input_changes(figure_id: str, parameters: Any, root: Path | None) -> dict[str, Any]:
    """How a figure's inputs differ from the commit: the library (``lib/``,
    ``pyproject.toml``), the code cells of ``notebooks/<figure_id>.ipynb`` (not its
    outputs: a build that re-runs the notebook rewrites those, and that is no change to the
    code; a notebook the commit lacks is a change) and the parameters (a
    :class:`~qkov.params.FigureParameters`: which differ from the notebook's defaults,
    OUTPUT_ONLY aside). ``root``: the git checkout that runs (with a commit), or None; then
    the code's changes cannot be told and are ``None``."""
    custom = custom_parameters(parameters)
    if root is None:
        return {"library_changed": None, "notebook_changed": None, "custom_parameters": custom}
    library = _git("status", "--porcelain", "--untracked-files=all", "--", *LIBRARY_INPUTS)
    notebook = root / "notebooks" / f"{figure_id}.ipynb"
    committed = _git("show", f"HEAD:notebooks/{figure_id}.ipynb")
    notebook_changed = None
    if notebook.is_file():
        try:
            notebook_changed = (committed is None
                                or _code_cells(committed) != _code_cells(notebook.read_text()))
        except (ValueError, KeyError):
            notebook_changed = True
    return {"library_changed": None if library is None else bool(library),
            "notebook_changed": notebook_changed,
            "custom_parameters": custom}


def numerics(dtype: str) -> dict[str, Any]:
    """What decides a result's rounding: the CPU, the kernels torch chose for it, the MKL
    code path, the thread count, the dtype of the computation."""
    import torch

    mkl = re.search(r"Math Kernel Library Version ([\w.-]+)", torch.__config__.show())
    return {"cpu_model": cpu_model(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY"),
            "mkl": mkl.group(1) if mkl else None,
            "mkl_cbwr": os.environ.get("MKL_CBWR"),
            "torch_threads": torch.get_num_threads(),
            "dtype": dtype}


def cpu_model() -> str:
    """The processor's name (``/proc/cpuinfo``'s model name on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance(wall_time_s: float, figure_id: str | None = None, parameters: Any = None,
               dtype: str | None = None, **extra: Any) -> dict[str, Any]:
    """What produced a result: the commit and whether the figure's inputs differed from it
    (``uncommitted_changes``: its library or notebook code did), versions, the machine and
    what decides its rounding (:func:`numerics`)."""
    import numpy
    import torch

    from . import __version__

    checkout = running_checkout()
    commit = git_commit(checkout) if checkout else None
    changes = (input_changes(figure_id, parameters, checkout if commit else None)
               if figure_id else {})
    code = [changes.get("library_changed"), changes.get("notebook_changed")]
    return {
        "library": ("a git checkout" if commit else
                    f"qkov {__version__} installed, not a checkout" if checkout is None else
                    "a checkout outside git"),
        "commit": commit,
        "uncommitted_changes": any(code) if any(c is not None for c in code) else None,
        **changes,
        "qkov_version": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "torch": torch.__version__,
        "machine": {
            "platform": platform.platform(),
            "processor": platform.machine(),
            "cpu_count": os.cpu_count(),
            **numerics(dtype),
        },
        "wall_time_s": round(float(wall_time_s), 3),
        **extra,
    }


def _plain(value: Any) -> Any:
    """JSON-ready copies of numpy scalars/arrays and dataclasses; non-finite floats -> None."""
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def table_bytes(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
                name: str = "table") -> bytes:
    """``rows`` (flat records with the same keys) as CSV. ``columns``: the header, needed
    only where there may be no rows (then the table is just the header)."""
    if not rows and columns is None:
        raise ValueError(f"no rows to write to {name}")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns or rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: repr(v) if isinstance(v, float) else v for k, v in _plain(row).items()})
    return buffer.getvalue().encode()


def write_table(path: Path, rows: Sequence[Mapping[str, Any]],
                columns: Sequence[str] | None = None) -> None:
    """Write ``rows`` as CSV (:func:`table_bytes`) to ``path``, atomically."""
    write_atomic(path, table_bytes(rows, columns, str(path)))


def summary_bytes(figure_id: str, parameters: Any, rows: Sequence[Mapping[str, Any]],
                  wall_time_s: float, files: Mapping[str, bytes], dtype: str | None = None,
                  **provenance_extra: Any) -> bytes:
    """``summary.json`` of a set: ``parameters`` (the figure's
    :class:`~qkov.params.FigureParameters`, or a plain mapping) as given, the provenance,
    the ``rows`` and the digest of each of the set's other ``files``; ``dtype``: the
    floating-point type the figure computed in."""
    summary = {
        "figure": figure_id,
        "parameters": _plain(_given(parameters)),
        "provenance": provenance(wall_time_s, figure_id, parameters, dtype, **provenance_extra),
        "rows": _plain(list(rows)),
        DIGESTS: {name: digest(data) for name, data in files.items()},
    }
    return (json.dumps(summary, indent=2) + "\n").encode()


def table_text(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], digits: int = 4) -> str:
    """A plain-text table of ``rows``, numbers to ``digits`` significant digits.

    Notebooks print this instead of raw floats: nbval compares printed text, and the last
    bits of a float move with thread counts and library builds.
    """
    def cell(value):
        return f"{value:.{digits}g}" if isinstance(value, float) else str(value)

    body = [[cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(line[i]) for line in body)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(line, widths)) for line in body]
    return "\n".join(lines)
