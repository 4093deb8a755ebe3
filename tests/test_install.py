"""A plain install (``pip install .``, no extras, not editable) into a clean virtual
environment: every module of the science package imports with only the declared runtime
dependencies, and the tooling says which extra it needs instead of failing somewhere deep."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from qkov_tools.imports import library_modules

PUBLISH = """
from qkov import plotting
from qkov.figures import model_schematic as m
rows = m.rows()
plotting.publish(m.SPEC, m.Parameters(), rows, 0.0, {"figure": m.plot(rows)})
"""

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
    science = [m for m in library_modules() if m == "qkov" or m.startswith("qkov.")]
    result = subprocess.run([python, "-c", CHECK, *science], capture_output=True, text=True,
                            cwd=tmp_path, timeout=600)  # not the checkout: the installed copy
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"imported {len(science)}" in result.stdout
    assert "qkov_tools: qkov_tools needs the 'tools' extra" in result.stdout
    assert "missing: nbformat, nbstripout, papermill" in result.stdout

    # The probe: run from inside another git repository, the installed copy recorded that
    # repository's commit as the figure's provenance and wrote <cwd>/artifacts/<figure-id>.
    other = tmp_path / "other-repo"
    other.mkdir()
    git = lambda *a: subprocess.run(["git", *a], cwd=other, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "c")
    commit = git("rev-parse", "HEAD").stdout.decode().strip()
    env = {k: v for k, v in os.environ.items() if k not in ("QKOV_ARTIFACTS", "QKOV_PIPELINE")}
    result = subprocess.run([python, "-c", PUBLISH], capture_output=True, text=True, cwd=other,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    folder = Path(result.stdout.splitlines()[-1].split(" into ", 1)[1])  # "wrote ... into F"
    assert folder.parent == other / "artifacts" / "runs", folder
    assert not (other / "artifacts" / "model-schematic").exists()
    summary = (folder / "summary.json").read_text()
    provenance = json.loads(summary)["provenance"]
    assert provenance["commit"] is None and commit not in summary
    assert provenance["library"].endswith("installed, not a checkout")
