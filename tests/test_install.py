"""A plain install (``pip install .``, no extras, not editable) into a clean virtual
environment: every module of the science package imports with only the declared runtime
dependencies, and the tooling says which extra it needs instead of failing somewhere deep."""

import shutil
import subprocess
import sys

from conftest import REPO
from qkov_tools.imports import library_modules

CHECK = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print("imported", len(sys.argv) - 1)
try:
    import qkov_tools
except ImportError as err:
    print("qkov_tools:", err)
"""


def test_qkov_imports_with_only_its_runtime_dependencies(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    python = venv / "bin" / "python"
    source = tmp_path / "source"  # pip builds in the source tree: not in the checkout
    shutil.copytree(REPO / "lib", source / "lib", ignore=shutil.ignore_patterns(
        "*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", str(source)],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    installed = subprocess.run([python, "-m", "pip", "list", "--format=freeze"],
                               capture_output=True, text=True, check=True).stdout.lower()
    for tool in ("papermill", "nbformat", "snakemake", "jupyter-book", "nbval"):
        assert f"\n{tool}==" not in f"\n{installed}", f"{tool} came with a plain install"
    science = [m for m in library_modules(REPO) if m == "qkov" or m.startswith("qkov.")]
    result = subprocess.run([python, "-c", CHECK, *science], capture_output=True, text=True,
                            cwd=tmp_path, timeout=600)  # not the checkout: the installed copy
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"imported {len(science)}" in result.stdout
    assert "qkov_tools: qkov_tools needs the 'tools' extra" in result.stdout
    assert "missing: nbformat, nbstripout, papermill" in result.stdout
