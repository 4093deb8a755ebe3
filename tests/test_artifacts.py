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
