"""The project's set-up files agree with each other."""

import tomllib

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


# The library's layers, lowest first: a module imports only from layers below its own, so a
# newcomer can read the library bottom-up and a change low down never needs a higher module.
# Packages (their __init__) sit with their lowest module; "x.*" is every module below x.
# Both packages are covered: the science (qkov) and its build tooling (qkov_tools), which
# sits on top and which no qkov module may import.
LAYERS = (
    ("qkov", "qkov.circuits", "qkov.seeding", "qkov.processes", "qkov.spec", "qkov.stats",
     "qkov.tables"),  # vocabulary and utilities
    ("qkov.artifacts",), ("qkov.provenance",), ("qkov.sets",),  # where a figure's set goes,
    #   what produced it, the set written whole
    ("qkov.params",),  # notebook parameters: checked, costed, and where the run will write
    ("qkov.theory", "qkov.theory.reduced", "qkov.synthetic", "qkov.synthetic.tasks",
     "qkov.synthetic.authors", "qkov.plotting", "qkov.language", "qkov.language.batches",
     "qkov.language.tokenizers", "qkov.language.sources"),  # reduced dynamics; the
    #   synthetic task's data; house style and drawing; token batches and tokenizers; the
    #   real data's packages
    ("qkov.theory.stylized", "qkov.synthetic.models", "qkov.language.models",
     "qkov.language.metrics", "qkov.language.agreement", "qkov.language.data"),  # full-matrix
    #   model of the theory; task models; the language decoder, its metrics, the agreement
    #   task, real-data loaders
    ("qkov.synthetic.train", "qkov.synthetic.metrics",
     "qkov.language.train", "qkov.language.corpus", "qkov.language.ratings"),  # training;
    #   measuring; corpora built from real text, and the rated sentences
    ("qkov.synthetic.trajectories", "qkov.language.pipelines",
     "qkov.language.comparison"),  # runs measured during training and passed between
    #   figures; the real-data figures' shared steps; conditions compared on agreement
    ("qkov.figures", "qkov.figures.*"),  # one module per figure, each with its SPEC
    ("qkov_tools", "qkov_tools.imports", "qkov_tools.notebooks"),  # tooling: the import
    #   graph, running and storing notebooks
    ("qkov_tools.records", "qkov_tools.sweeps", "qkov_tools.data"),  # records of whole
    #   runs; sweeps; fetching the real data
    ("qkov_tools.__main__",),  # the tools' command line
)


def _layer(module: str) -> int | None:
    for k, names in enumerate(LAYERS):
        if module in names or any(n.endswith(".*") and module.startswith(n[:-1]) for n in names):
            return k
    return None


def layering_violations(root) -> list[str]:
    """Every import in the library below ``root`` that does not run downwards."""
    from qkov_tools.imports import library_imports, library_modules

    modules = library_modules(root)
    assert {m.split(".")[0] for m in modules} == {"qkov", "qkov_tools"}
    unplaced = [m for m in modules if _layer(m) is None]
    assert not unplaced, f"place these modules in a layer of LAYERS: {unplaced}"
    return [f"{m} (layer {_layer(m)}) imports {name} (layer {_layer(name)})"
            for m in modules for name in sorted(library_imports(m, root))
            if _layer(name) >= _layer(m) and not m.startswith(name + ".")]


def test_library_imports_run_from_higher_layers_to_lower_ones():
    wrong = layering_violations(REPO)
    assert not wrong, "imports that do not run downwards: " + "; ".join(wrong)


def test_the_package_docstring_lists_every_module_in_its_layer():
    """qkov's docstring (what a newcomer reads first) names every module of the science
    package, in the order of LAYERS."""
    import qkov
    from qkov_tools.imports import library_modules

    doc = qkov.__doc__
    science = [m for m in library_modules(REPO) if m.startswith("qkov.")
               and not m.startswith("qkov.figures.")]
    missing = [m for m in science if f"``{m[len('qkov.'):]}``" not in doc]
    assert not missing, f"qkov's docstring does not mention {missing}"
    first = {m: doc.index(f"``{m[len('qkov.'):]}``") for m in science}
    for low, high in ((a, b) for a in science for b in science if _layer(a) < _layer(b)):
        assert first[low] < first[high], f"the docstring names {high} before {low}"


def test_a_sideways_import_between_figure_modules_is_caught(tmp_path):
    """The layer check reads imports from the files: a figure module importing another is
    reported (copying the library so the check can be run on a planted import)."""
    import shutil

    shutil.copytree(REPO / "lib", tmp_path / "lib", ignore=shutil.ignore_patterns("*.egg-info"))
    planted = tmp_path / "lib" / "qkov" / "figures" / "paper_fig4.py"
    planted.write_text(planted.read_text() + "\nfrom . import paper_fig2  # noqa\n")
    science = tmp_path / "lib" / "qkov" / "plotting.py"  # and the science importing the tools
    science.write_text(science.read_text() + "\nfrom qkov_tools import records  # noqa\n")
    figures, plotting, tools, records = (_layer(m) for m in (
        "qkov.figures.paper_fig4", "qkov.plotting", "qkov_tools", "qkov_tools.records"))
    assert layering_violations(tmp_path) == [
        f"qkov.figures.paper_fig4 (layer {figures}) imports qkov.figures.paper_fig2 (layer {figures})",
        f"qkov.plotting (layer {plotting}) imports qkov_tools (layer {tools})",
        f"qkov.plotting (layer {plotting}) imports qkov_tools.records (layer {records})"]


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

    from qkov_tools.notebooks import INSTALL_SOURCE, INSTALL_TAG

    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["repository"]["url"].removeprefix("https://") in INSTALL_SOURCE
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
        and "git+https://github.com/qkov-companion/qkov" in calls[0][1]


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
    from qkov_tools.notebooks import INSTALL_SOURCE

    extras = re.search(r'"qkov\[([a-z,]+)\] @', INSTALL_SOURCE).group(1).split(",")
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
