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
    toc = (REPO / "_toc.yml").read_text()
    snakefile = (REPO / "Snakefile").read_text()
    for nb in (REPO / "notebooks").glob("*.ipynb"):
        assert f"notebooks/{nb.stem}" in toc
        assert f'"notebooks/{nb.name}"' in snakefile
