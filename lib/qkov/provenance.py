"""What produced a result, recorded in every summary.json: the commit and whether the
figure's inputs differed from it, the versions, the machine and what decides its rounding."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from .artifacts import custom_parameters, repo_root


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def running_checkout() -> Path | None:
    """The checkout whose library runs (editable), or None (an installed copy)."""
    root = repo_root()
    return root if Path(__file__).resolve().is_relative_to(root / "lib") else None


def _code_cells(notebook_json: str) -> list[str]:  # a cell's source: a string or a list of lines
    return ["".join(c["source"]) for c in json.loads(notebook_json).get("cells", [])
            if c.get("cell_type") == "code"]



def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo; elsewhere what platform says)."""
    cpuinfo = Path("/proc/cpuinfo")
    cpu = cpuinfo.is_file() and re.search(r"^model name\s*:(.*)$", cpuinfo.read_text(), re.M)
    return cpu.group(1).strip() if cpu else platform.processor() or platform.machine()

def provenance(wall_time_s: float, figure_id: str, parameters: Any = None,
               dtype: str | None = None) -> dict[str, Any]:
    import numpy
    import torch

    from . import __version__

    checkout = running_checkout()
    commit = _git(checkout, "rev-parse", "HEAD") if checkout else None
    library_changed = notebook_changed = None
    if commit:  # the library's and the notebook's code (not its outputs) against the commit
        library = _git(checkout, "status", "--porcelain", "--untracked-files=all", "--", "lib",
                       "pyproject.toml")
        library_changed = None if library is None else bool(library)
        notebook = checkout / "notebooks" / f"{figure_id}.ipynb"
        committed = _git(checkout, "show", f"HEAD:notebooks/{figure_id}.ipynb")
        notebook_changed = None if not notebook.is_file() else (
            committed is None or _code_cells(committed) != _code_cells(notebook.read_text()))
    code = [c for c in (library_changed, notebook_changed) if c is not None]
    mkl = re.search(r"Math Kernel Library Version ([\w.-]+)", torch.__config__.show())
    return {
        "library": ("a git checkout" if commit else
                    f"qkov {__version__} installed, not a checkout" if checkout is None else
                    "a checkout outside git"),
        "commit": commit,
        "uncommitted_changes": any(code) if code else None,
        "library_changed": library_changed,
        "notebook_changed": notebook_changed,
        "custom_parameters": custom_parameters(parameters),
        "qkov_version": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "torch": torch.__version__,
        "machine": {
            "platform": platform.platform(),
            "processor": platform.machine(),
            "cpu_count": os.cpu_count(),
            "cpu_model": cpu_model(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY"),
            "mkl": mkl.group(1) if mkl else None,
            "mkl_cbwr": os.environ.get("MKL_CBWR"),
            "torch_threads": torch.get_num_threads(),
            "dtype": dtype,
        },
        "wall_time_s": round(float(wall_time_s), 3),
    }
