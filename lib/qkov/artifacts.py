"""Where a figure's outputs go, and how they are written: atomically, with provenance.

Every figure ``<figure-id>`` writes ``artifacts/<figure-id>/``: ``figure.{png,pdf,svg}``,
``data.csv`` (the plotted numbers) and ``summary.json`` (``figure``, ``parameters``,
``provenance``, ``rows``). Each file is written to a temporary name in the same folder and
renamed into place, so an interrupted run never leaves a half-written file that a later step
(Snakemake, the book, a reader) would trust.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
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


def figure_dir(figure_id: str, artifacts_dir: str | os.PathLike | None = None) -> Path:
    """The folder for ``figure_id``'s outputs, created if missing.

    ``artifacts_dir`` wins when given (relative paths are relative to the current folder, as
    for any command-line path); otherwise ``$QKOV_ARTIFACTS/<figure-id>`` if that variable is
    set (the tests point it at a temporary folder), else ``<repo>/artifacts/<figure-id>`` -
    the same place whether the notebook runs from the repo root or from ``notebooks/``.
    """
    path = Path(artifacts_dir) if artifacts_dir is not None else default_dir(figure_id)
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_dir(figure_id: str, checkout: str | os.PathLike | None = None) -> Path:
    """Where ``figure_id``'s outputs go by default (see :func:`figure_dir`); not created.
    ``checkout``: the repository whose ``artifacts/`` is meant (default: :func:`repo_root`;
    the book passes its source folder), unless ``$QKOV_ARTIFACTS`` is set."""
    root = os.environ.get(ARTIFACTS_ENV)
    return (Path(root) if root else Path(checkout or repo_root()) / "artifacts") / figure_id


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
OUTPUT_ONLY = ("artifacts_dir", "progress", "workers")


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
    custom = None
    if hasattr(parameters, "given") and hasattr(parameters, "defaults"):
        defaults = parameters.defaults()
        custom = sorted(k for k, v in parameters.given.items()
                        if k not in OUTPUT_ONLY and _plain(v) != _plain(defaults.get(k)))
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


def write_table(path: Path, rows: Sequence[Mapping[str, Any]],
                columns: Sequence[str] | None = None) -> None:
    """Write ``rows`` (flat records with the same keys) as CSV, atomically. ``columns``: the
    header, needed only where there may be no rows (then the file holds just the header)."""
    if not rows and columns is None:
        raise ValueError(f"no rows to write to {path}")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns or rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: repr(v) if isinstance(v, float) else v for k, v in _plain(row).items()})
    write_atomic(path, buffer.getvalue().encode())


def write_summary(
    folder: Path,
    figure_id: str,
    parameters: Any,
    rows: Sequence[Mapping[str, Any]],
    wall_time_s: float,
    dtype: str | None = None,
    **provenance_extra: Any,
) -> Path:
    """Write ``summary.json`` and ``data.csv`` (the same rows) into ``folder``.
    ``parameters``: the figure's :class:`~qkov.params.FigureParameters` (or a plain mapping);
    ``dtype``: the floating-point type the figure computed in."""
    given = parameters.given if hasattr(parameters, "given") else parameters
    summary = {
        "figure": figure_id,
        "parameters": _plain(given),
        "provenance": provenance(wall_time_s, figure_id, parameters, dtype, **provenance_extra),
        "rows": _plain(list(rows)),
    }
    write_table(folder / "data.csv", rows)
    path = folder / "summary.json"
    write_atomic(path, (json.dumps(summary, indent=2) + "\n").encode())
    return path


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
