"""The project's set-up files agree with each other."""

import importlib
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
    # Real-data notebooks (their module says NEEDS_DOWNLOAD) need a dataset the reader
    # downloads: they are in the book, not in the pipeline's default run.
    needs_data = {name for name in notebooks if getattr(importlib.import_module(
        "qkov.figures." + name.replace("-", "_")), "NEEDS_DOWNLOAD", False)}
    assert needs_data == {"language-hatexplain", "language-sva", "language-squad"}
    assert sorted(pipeline.FIGURE_IDS) == sorted(set(notebooks) - needs_data), \
        "the figure registry and notebooks/"


# The library's layers, lowest first: a module imports only from layers below its own, so a
# newcomer can read the library bottom-up and a change low down never needs a higher module.
# Packages (their __init__) sit with their lowest module; "figures.*" is every figure module.
LAYERS = (
    ("circuits", "seeding", "params", "processes", "artifacts"),  # vocabulary and utilities
    ("theory", "theory.reduced", "synthetic", "synthetic.tasks", "plotting",
     "language", "language.batches", "language.tokenizers"),  # reduced dynamics; the
    #   synthetic task's data; house style and drawing; token batches and tokenizers
    ("theory.stylized", "synthetic.models", "language.models", "language.metrics",
     "language.agreement", "language.data"),  # full-matrix model of the theory; task
    #   models; the language decoder, its metrics, the agreement task, real-data loaders
    ("synthetic.train", "synthetic.metrics", "language.train"),  # training; measuring
    ("language.pipelines",),  # the real-data figures' shared steps: both conditions per seed
    ("figures", "figures.*"),  # one module per figure: its parameters and computations
    ("pipeline",),  # the figure registry, running notebooks
    ("book", "sweeps"),  # the book's Sphinx extension (reads the registry); sweeps/*.yaml runs
)


def _layer(module: str) -> int | None:
    for k, names in enumerate(LAYERS):
        if module in names or any(n.endswith(".*") and module.startswith(n[:-1]) for n in names):
            return k
    return None


def test_library_imports_run_from_higher_layers_to_lower_ones():
    from qkov.pipeline import library_imports, library_modules

    modules = library_modules(REPO)
    unplaced = [m for m in modules if _layer(m) is None]
    assert not unplaced, f"place these modules in a layer of LAYERS: {unplaced}"
    wrong = [f"{m} (layer {_layer(m)}) imports {name} (layer {_layer(name)})"
             for m in modules for name in sorted(library_imports(m, REPO))
             if _layer(name) >= _layer(m) and not m.startswith(name + ".")]
    assert not wrong, "imports that do not run downwards: " + "; ".join(wrong)


def test_a_sideways_import_between_figure_modules_is_caught(tmp_path):
    """The layer check reads imports from the files: a figure module importing another is
    reported (copying the library so the check can be run on a planted import)."""
    import shutil

    from qkov.pipeline import library_imports

    shutil.copytree(REPO / "lib", tmp_path / "lib")
    planted = tmp_path / "lib" / "qkov" / "figures" / "paper_fig4.py"
    planted.write_text(planted.read_text() + "\nfrom . import paper_fig2  # noqa\n")
    assert "figures.paper_fig2" in library_imports("figures.paper_fig4", tmp_path)
    assert _layer("figures.paper_fig2") >= _layer("figures.paper_fig4")


def test_test_tiers_are_the_registered_markers():
    """Every tier conftest assigns is a marker pyproject.toml registers (an unregistered
    one would select nothing under `pytest -m`), and every file it names exists."""
    import conftest

    registered = [m.split(":")[0] for m in tomllib.loads((REPO / "pyproject.toml").read_text())
                  ["tool"]["pytest"]["ini_options"]["markers"]]
    assert registered == list(conftest.TIERS)
    assert set(conftest.FILE_TIERS.values()) <= set(conftest.TIERS)
    assert all((REPO / "tests" / name).is_file() for name in conftest.FILE_TIERS)
