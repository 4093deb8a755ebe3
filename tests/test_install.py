"""A plain install (``pip install .``: no extras, not editable) into a clean virtual
environment: every module of the science imports with only the runtime dependencies, and a
figure published by the installed copy records no commit, not even its folder's repository's."""

import json
import os
import shutil
import subprocess
import sys

from conftest import REPO
from qkov_tools.imports import library_modules

PUBLISH = """
from qkov import plotting
from qkov.figures import model_schematic as m
plotting.publish(m.SPEC, m.Parameters(), m.rows(), 0.0, {"figure": m.plot(m.rows())})
"""


def test_qkov_imports_with_only_its_runtime_dependencies(tmp_path):
    run = lambda *args, cwd=tmp_path: subprocess.run(  # noqa: E731
        args, cwd=cwd, capture_output=True, text=True, timeout=900,
        env={k: v for k, v in os.environ.items() if not k.startswith(("QKOV_", "PYTHONPATH"))})
    python = tmp_path / "venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", python.parents[1]], check=True)
    for name in ("lib", "pyproject.toml", "README.md"):  # pip builds in the source tree
        (shutil.copytree if name == "lib" else shutil.copy2)(REPO / name, tmp_path / "src" / name)
    assert run(python, "-m", "pip", "install", "--quiet", tmp_path / "src").returncode == 0
    installed = run(python, "-m", "pip", "list", "--format=freeze").stdout.lower().split()
    assert not {"papermill", "snakemake", "jupyter-book", "nbval"} & {
        line.split("==")[0] for line in installed}
    science = [m for m in library_modules() if m.split(".")[0] == "qkov"]
    imported = run(python, "-c", "import importlib, sys; [importlib.import_module(m) for m in "
                   "sys.argv[1:]]", *science)
    assert imported.returncode == 0, imported.stderr[-3000:]

    other = tmp_path / "other-repo"  # a run from inside another git repository
    other.mkdir()
    run("git", "init", "-q", cwd=other)
    run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
        "-m", "c", cwd=other)
    published = run(python, "-c", PUBLISH, cwd=other)
    assert published.returncode == 0, published.stderr[-3000:]
    folder = other / "artifacts" / "runs"  # wrote <cwd>/artifacts/runs/<figure-id>-<hash>
    (summary,) = folder.glob("model-schematic-*/summary.json")
    provenance = json.loads(summary.read_text())["provenance"]
    assert provenance["commit"] is None and provenance["library"].endswith("not a checkout")
