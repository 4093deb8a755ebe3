"""Artifact writing: atomic files, summary layout, rounded tables, figure formats."""

import json

import matplotlib.pyplot as plt
import pytest

from qkov import artifacts, plotting


def test_write_atomic_replaces_whole_files_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "x.txt"
    artifacts.write_atomic(target, b"old")
    artifacts.write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "x.txt"
    artifacts.write_atomic(target, b"old")

    with pytest.raises(TypeError):
        artifacts.write_atomic(target, object())  # not bytes: fails mid-write
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_figure_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv(artifacts.ARTIFACTS_ENV, str(tmp_path / "root"))
    assert artifacts.figure_dir("paper-fig4") == tmp_path / "root" / "paper-fig4"
    assert artifacts.figure_dir("paper-fig4", tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv(artifacts.ARTIFACTS_ENV)
    monkeypatch.setattr(artifacts, "repo_root", lambda: tmp_path / "repo")
    assert artifacts.figure_dir("f") == tmp_path / "repo" / "artifacts" / "f"
    assert (tmp_path / "repo" / "artifacts" / "f").is_dir()


def test_summary_has_the_documented_keys(tmp_path):
    rows = [{"r": 1.0, "loss": 0.5, "alpha": float("nan")}]
    path = artifacts.write_summary(tmp_path, "fig", {"ratios": [1.0]}, rows, wall_time_s=1.23456)
    summary = json.loads(path.read_text())
    assert list(summary) == ["figure", "parameters", "provenance", "rows"]
    assert summary["rows"] == [{"r": 1.0, "loss": 0.5, "alpha": None}]
    assert summary["provenance"]["wall_time_s"] == 1.235
    assert (tmp_path / "data.csv").read_text().splitlines()[0] == "r,loss,alpha"
    with pytest.raises(ValueError, match="no rows"):
        artifacts.write_table(tmp_path / "empty.csv", [])


def test_table_text_rounds_to_four_significant_digits():
    text = artifacts.table_text([{"r": 0.1, "alpha": 0.123456789}], ["r", "alpha"])
    assert text.splitlines() == ["  r   alpha", "0.1  0.1235"]


def test_save_figure_writes_every_format_reproducibly(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    first = [p.read_bytes() for p in plotting.save_figure(fig, tmp_path)]
    second = [p.read_bytes() for p in plotting.save_figure(fig, tmp_path)]
    plt.close(fig)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.pdf", "figure.png",
                                                          "figure.svg"]
    assert first == second, "the same figure must give the same bytes (no dates in files)"


def test_provenance_says_which_inputs_differ_from_the_commit(tmp_path, monkeypatch):
    """Uncommitted code (library, the notebook's code cells) is recorded; the outputs a build
    writes into the stored notebook are not a change; custom parameters are named."""
    import subprocess

    import nbformat

    from qkov.figures import paper_fig4

    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    (repo / "lib" / "m.py").write_text("x = 1\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    nbformat.write(nb, repo / "notebooks" / "fig.ipynb")
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(artifacts, "repo_root", lambda: repo)
    monkeypatch.setattr(artifacts, "running_checkout", lambda: repo)

    p = paper_fig4.Parameters()
    state = artifacts.provenance(1.0, "fig", p, "float64")
    assert state["commit"] and state["uncommitted_changes"] is False
    assert state["custom_parameters"] == [] and state["machine"]["dtype"] == "float64"

    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nbformat.write(nb, repo / "notebooks" / "fig.ipynb")  # what a build writes
    assert artifacts.provenance(1.0, "fig", p, "float64")["uncommitted_changes"] is False

    nb.cells[0].source = "print(2)"
    nbformat.write(nb, repo / "notebooks" / "fig.ipynb")
    state = artifacts.provenance(1.0, "fig", p, "float64")
    assert state["notebook_changed"] and state["uncommitted_changes"]
    assert not state["library_changed"]
    git("checkout", "notebooks/fig.ipynb")

    (repo / "lib" / "new.py").write_text("")  # an untracked module is a change too
    state = artifacts.provenance(1.0, "fig", paper_fig4.Parameters(ratios=[2.0]), "float64")
    assert state["library_changed"] and state["uncommitted_changes"]
    assert state["custom_parameters"] == ["ratios"]
    # The defaults in another container, or where the outputs go, are not custom.
    same = paper_fig4.Parameters(ratios=tuple(paper_fig4.Parameters.defaults()["ratios"]),
                                 artifacts_dir="elsewhere")
    assert artifacts.provenance(1.0, "fig", same, "float64")["custom_parameters"] == []

    nbformat.write(nb, repo / "notebooks" / "new.ipynb")  # a notebook the commit lacks
    assert artifacts.provenance(1.0, "new", p, "float64")["notebook_changed"] is True


def test_a_library_not_run_from_the_checkout_records_no_commit(tmp_path, monkeypatch):
    """A non-editable install started inside some other git repository: that repository's
    commit says nothing about the code that ran."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setattr(artifacts, "repo_root", lambda: tmp_path)
    assert artifacts.running_checkout() is None
    state = artifacts.provenance(1.0, "fig", None, "float32")
    assert state["commit"] is None and state["uncommitted_changes"] is None


def test_provenance_records_what_decides_the_rounding():
    import os

    import qkov

    machine = artifacts.provenance(1.0, dtype="float32")["machine"]
    assert machine["mkl_cbwr"] == os.environ.get("MKL_CBWR", qkov.MKL_CBWR)
    assert machine["torch_threads"] == int(os.environ.get(qkov.THREADS_ENV, "1"))
    assert machine["dtype"] == "float32" and machine["cpu_model"]
    assert isinstance(machine["torch_cpu_capability"], str) and machine["torch_cpu_capability"]
    import torch

    assert bool(machine["mkl"]) == torch.backends.mkl.is_available()
