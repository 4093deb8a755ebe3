"""The project's set-up: the README's commands, the layers, the notebooks' install cell, the
test tiers."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions, requires
from pathlib import Path

import nbformat
from IPython.core.inputtransformer2 import TransformerManager
from packaging.requirements import Requirement

import conftest
from conftest import REPO
from qkov_tools.imports import graph, notebook_imports
from qkov_tools.notebooks import install_source

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def test_the_readme_commands_are_make_targets_ci_runs_make_test_and_the_tiers_name_files():
    readme, makefile = (REPO / "README.md").read_text(), (REPO / "Makefile").read_text()
    assert all(f"make {t}" in readme and re.search(rf"^{t}:", makefile, re.M)
               for t in ("book", "test", "check"))
    assert (REPO / ".ci" / "run").read_text().strip().endswith("make test")
    assert all((REPO / "tests" / name).is_file() for name in conftest.FILE_TIERS)


def lint_imports(root) -> subprocess.CompletedProcess:
    return subprocess.run([Path(sys.executable).with_name("lint-imports"), "--no-cache"],
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root / "lib")},
                          capture_output=True, text=True, timeout=120)


def test_every_module_is_in_a_layer_and_the_import_linter_contracts_hold(tmp_path):
    """Every module is in a layer or a package's own file (which imports nothing of the library).
    The contracts hold; on a copy, an import planted against each contract is reported."""
    contracts = {c["id"]: c for c in PROJECT["tool"]["importlinter"]["contracts"]}
    layers = [m.strip() for layer in contracts["layers"]["layers"] for m in layer.split("|")]
    assert not [m for m in graph().modules if m not in contracts["packages"]["source_modules"]
                and not any(m == layer or m.startswith(layer + ".") for layer in layers)]
    assert "0 broken" in lint_imports(REPO).stdout
    shutil.copytree(REPO / "lib", tmp_path / "lib", ignore=shutil.ignore_patterns("*.egg-info"))
    shutil.copy2(REPO / "pyproject.toml", tmp_path)
    planted = {"figures/paper_fig4": "qkov.figures.paper_fig2", "plotting": "qkov_tools.data",
               "spec": "qkov.params", "theory/__init__": "qkov.theory.reduced"}
    for module, imported in planted.items():
        with open(tmp_path / "lib" / "qkov" / f"{module}.py", "a") as file:
            file.write(f"\nimport {imported}  # noqa\n")
    text = lint_imports(tmp_path).stdout
    assert "Contracts: 0 kept, 3 broken." in text
    for module, imported in planted.items():
        importer = "qkov." + module.removesuffix("/__init__").replace("/", ".")
        assert f"{importer} is not allowed to import {imported}" in text, text


def test_the_install_cell_is_current_and_installs_what_the_notebooks_import(monkeypatch):
    """Every notebook's first code cell is the generated install cell; run as IPython runs it,
    it calls %pip only where `qkov` does not import, with extras that bring what they import."""
    for path in NOTEBOOKS:
        first = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        assert (first.source, first.metadata.get("tags")) == (install_source(), ["remove-cell"]), path
    calls = []
    shell = type("Shell", (), {"run_line_magic": lambda self, *a: calls.append(a)})()
    code = TransformerManager().transform_cell(install_source())
    exec(code, {"get_ipython": lambda: shell})  # qkov imports here
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    exec(code, {"get_ipython": lambda: shell})
    assert len(calls) == 1 and re.fullmatch(  # the URL: CITATION.cff's repository-code
        r'pip install --quiet "qkov\[notebook\] @ git\+https://\S+"', " ".join(calls[0])), calls

    def names(requirements):  # distributions, as packages_distributions names them
        return {re.sub(r"[-_.]+", "-", r.name).lower() for r in map(Requirement, requirements)
                if r.marker is None or r.marker.evaluate({"extra": ""})}

    named = names(PROJECT["project"]["dependencies"]
                  + PROJECT["project"]["optional-dependencies"]["notebook"])
    brought = named.union(*(names(requires(name) or []) for name in named))  # and theirs
    imported = {name.split(".")[0] for path in NOTEBOOKS for name in notebook_imports(path)}
    third_party = imported - set(sys.stdlib_module_names) - {"qkov"}
    provided = packages_distributions()
    missing = {m for m in third_party if not names(provided.get(m, [])) & brought}
    assert "myst_nb" in third_party and not missing, missing
