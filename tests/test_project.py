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


def test_dependencies_are_pinned_and_torch_exactly():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    assert "torch==2.13.0" in deps
    for name in ("jupyter-book==1.0.4.post1", "papermill==2.7.0", "nbval==0.11.0"):
        assert name in deps


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "make test" in readme and "make book" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_every_notebook_is_in_the_book_and_the_pipeline():
    from qkov import pipeline

    toc = (REPO / "_toc.yml").read_text()
    notebooks = sorted(nb.stem for nb in (REPO / "notebooks").glob("*.ipynb"))
    for name in notebooks:
        assert f"notebooks/{name}" in toc
    assert sorted(pipeline.FIGURE_IDS) == notebooks, "the figure registry and notebooks/"


# The library's layers, lowest first: a module imports only from layers below its own, so a
# newcomer can read the library bottom-up and a change low down never needs a higher module.
LAYERS = (
    ("circuits", "seeding", "params", "processes", "artifacts"),  # vocabulary and utilities
    ("theory", "tasks"),  # the reduced dynamics; the synthetic task's data
    ("stylized", "models"),  # full-matrix model of the theory; the task's attention models
    ("train", "metrics"),  # training ensembles; measuring trained models
    ("paper", "theory_runs"),  # the computations behind each figure
    ("figures", "book", "pipeline"),  # drawing, the book's Sphinx extension, running notebooks
)


def test_library_imports_run_from_higher_layers_to_lower_ones():
    from qkov.pipeline import library_imports

    layer = {name: k for k, names in enumerate(LAYERS) for name in names}
    modules = sorted(p for p in (REPO / "lib" / "qkov").glob("*.py") if p.stem != "__init__")
    unplaced = [p.stem for p in modules if p.stem not in layer]
    assert not unplaced, f"place these modules in a layer of LAYERS: {unplaced}"
    wrong = [f"{p.stem} (layer {layer[p.stem]}) imports {name} (layer {layer[name]})"
             for p in modules for name in sorted(library_imports(p.stem, REPO))
             if layer[name] >= layer[p.stem]]
    assert not wrong, "imports that do not run downwards: " + "; ".join(wrong)
