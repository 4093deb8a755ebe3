"""The project's set-up files agree with each other."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from conftest import REPO


def test_environment_yml_hands_off_to_the_pip_install():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert pip == ["-e .[dev]"]


def test_the_environment_has_the_pinned_versions():
    """What pyproject.toml pins exactly (the numerical stack, the tools whose output the
    stored notebooks and the book depend on) is what this environment runs: a stale .venv
    fails here, not as a puzzling nbval difference."""
    from importlib.metadata import version

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [
        r for extra in project["optional-dependencies"].values() for r in extra]
    pins = dict(r.split("#")[0].strip().split("==") for r in requirements if "==" in r)
    assert pins["torch"] == "2.13.0"  # any other request pulls a multi-GB CUDA build
    assert {"jupyter-book", "papermill", "nbval", "numpy", "matplotlib"} <= set(pins)
    # A local build label ("2.13.0+cpu": the CPU wheel) is the same release.
    wrong = {name: (pin, version(name)) for name, pin in pins.items()
             if version(name).split("+")[0] != pin}
    assert not wrong, f"installed versions differ from the pins (pin, installed): {wrong}"


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "make test" in readme and "make book" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text()


def lint_imports(root) -> subprocess.CompletedProcess:
    """import-linter's check of the contracts in ``root``'s pyproject.toml (the library's
    layers, and what may not import what) on the library below ``root``."""
    return subprocess.run([Path(sys.executable).with_name("lint-imports"), "--no-cache"],
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root / "lib")},
                          capture_output=True, text=True, timeout=120)


def test_library_imports_keep_the_import_linter_contracts():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_every_module_is_placed_by_a_contract():
    """Every module of both packages is a layer, inside one, or a package's own file (which
    imports nothing of the library): a new module cannot escape the layers unnoticed."""
    from qkov_tools.imports import library_modules

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = {c["id"]: c for c in config["contracts"]}
    layers = [m.strip() for layer in contracts["layers"]["layers"] for m in layer.split("|")]
    packages = contracts["packages"]["source_modules"]
    unplaced = [m for m in library_modules() if m not in packages
                and not any(m == layer or m.startswith(layer + ".") for layer in layers)]
    assert not unplaced, f"place these modules in a layer of [tool.importlinter]: {unplaced}"


def test_a_wrong_import_breaks_a_contract(tmp_path):
    """A figure module importing another, the science importing its tooling, a low layer
    importing a higher one, and a package's own file importing a module are each reported
    (on a copy of the library with the imports planted)."""
    shutil.copytree(REPO / "lib", tmp_path / "lib", ignore=shutil.ignore_patterns("*.egg-info"))
    shutil.copy2(REPO / "pyproject.toml", tmp_path)
    for module, line in (("qkov/figures/paper_fig4.py", "from . import paper_fig2"),
                         ("qkov/plotting.py", "from qkov_tools import records"),
                         ("qkov/spec.py", "from qkov import params"),
                         ("qkov/theory/__init__.py", "from qkov.theory import reduced")):
        path = tmp_path / "lib" / module
        path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout[-5000:] + result.stderr[-2000:]
    text = result.stdout
    assert "Contracts: 0 kept, 4 broken." in text
    for broken in ("qkov.figures.paper_fig4 is not allowed to import qkov.figures.paper_fig2",
                   "qkov.plotting is not allowed to import qkov_tools.records",
                   "qkov.spec is not allowed to import qkov.params",
                   "qkov.theory is not allowed to import qkov.theory.reduced"):
        assert broken in text, text


def test_test_tiers_are_the_registered_markers():
    """Every tier conftest assigns is a marker pyproject.toml registers (an unregistered
    one would select nothing under `pytest -m`), and every file it names exists."""
    import conftest

    registered = [m.split(":")[0] for m in tomllib.loads((REPO / "pyproject.toml").read_text())
                  ["tool"]["pytest"]["ini_options"]["markers"]]
    assert registered == list(conftest.TIERS)
    assert set(conftest.FILE_TIERS.values()) <= set(conftest.TIERS)
    assert all((REPO / "tests" / name).is_file() for name in conftest.FILE_TIERS)


def test_every_notebook_installs_the_companion_where_it_is_missing(monkeypatch):
    """Opened on Colab or Binder, a notebook's first code cell installs the companion; where
    `qkov` imports it does nothing. The cell is run as IPython runs it (its %pip line
    becomes a magic call), with the magic recorded instead of run."""
    import importlib.util

    import nbformat
    from IPython.core.inputtransformer2 import TransformerManager

    from qkov_tools.notebooks import INSTALL_TAG, install_source, repository_url

    INSTALL_SOURCE = install_source()
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert first.source == INSTALL_SOURCE.rstrip("\n"), f"{path.name}: no install cell first"
        assert INSTALL_TAG in first.metadata.get("tags", []), path.name

    code = TransformerManager().transform_cell(INSTALL_SOURCE)
    calls = []
    shell = type("Shell", (), {"run_line_magic": lambda self, *a: calls.append(a)})()
    exec(code, {"get_ipython": lambda: shell})
    assert calls == []  # qkov imports here
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    exec(code, {"get_ipython": lambda: shell})
    assert len(calls) == 1 and calls[0][0] == "pip" and "install" in calls[0][1] \
        and f"git+{repository_url()}" in calls[0][1]


def test_the_install_cell_installs_what_the_notebooks_import():
    """The extras the install cell names bring every third-party module the notebooks
    import (directly, or as a dependency of what they name)."""
    import ast
    import re
    import sys
    from importlib.metadata import packages_distributions, requires

    import nbformat
    from packaging.requirements import Requirement

    from qkov_tools.imports import python_source
    from qkov_tools.notebooks import install_source

    extras = re.search(r'"qkov\[([a-z,]+)\] @', install_source()).group(1).split(",")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r).name for r in project["dependencies"]]
    wanted += [Requirement(r).name for extra in extras
               for r in project["optional-dependencies"][extra]]
    brought, pending = set(), [name.lower() for name in wanted]
    while pending:  # what those distributions depend on, installed here
        name = pending.pop()
        if name in brought:
            continue
        brought.add(name)
        for line in requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name.lower().replace("_", "-"))
    imported = set()
    for path in (REPO / "notebooks").glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                for node in ast.walk(ast.parse(python_source(cell.source))):
                    if isinstance(node, ast.Import):
                        imported |= {a.name.split(".")[0] for a in node.names}
                    elif isinstance(node, ast.ImportFrom) and node.level == 0:
                        imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"qkov", "qkov_tools"}
    assert "myst_nb" in third_party  # the glue the chapters read
    distributions = packages_distributions()
    missing = {module: distributions.get(module) for module in third_party
               if not {d.lower().replace("_", "-") for d in distributions.get(module, [])}
               & brought}
    assert not missing, f"the install cell's extras {extras} do not bring {missing}"
