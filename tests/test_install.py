"""A plain install (``pip install .``: no extras, not editable) into a clean virtual
environment: every module of the science imports with only the runtime dependencies."""

import os
import shutil
import subprocess
import sys

from conftest import REPO
from qkov_tools.imports import graph


def test_qkov_imports_with_only_its_runtime_dependencies(tmp_path):
    run = lambda *args: subprocess.run(  # noqa: E731
        args, cwd=tmp_path, capture_output=True, text=True, timeout=900,  # not the checkout
        env={k: v for k, v in os.environ.items() if not k.startswith(("QKOV_", "PYTHONPATH"))})
    python = tmp_path / "venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", python.parents[1]], check=True)
    for name in ("lib", "pyproject.toml", "README.md"):  # pip builds in the source tree
        (shutil.copytree if name == "lib" else shutil.copy2)(REPO / name, tmp_path / "src" / name)
    assert run(python, "-m", "pip", "install", "--quiet", tmp_path / "src").returncode == 0
    installed = run(python, "-m", "pip", "list", "--format=freeze").stdout.lower().split()
    assert not {"papermill", "snakemake", "jupyter-book", "nbval"} & {
        line.split("==")[0] for line in installed}
    science = [m for m in sorted(graph().modules) if m.split(".")[0] == "qkov"]
    imported = run(python, "-c", "import importlib, sys; [importlib.import_module(m) for m in "
                   "sys.argv[1:]]", *science)
    assert imported.returncode == 0, imported.stderr[-3000:]
