"""What produced a result: the commit and whether the figure's inputs differed from it,
the versions, the machine and what decides its rounding (recorded in every summary.json)."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from .artifacts import custom_parameters, repo_root


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

