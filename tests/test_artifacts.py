"""A figure's set of files: whole or not at all, never mixed, never over a folder that is not
a previous set, canonical only from the pipeline at the defaults; its tables and provenance."""

import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat
import numpy as np
import pytest
import torch

import qkov
from qkov import artifacts, plotting, provenance, sets, tables
from qkov.figures import paper_fig4


def _figure_set(tag: str) -> dict:
    files = {"figure.png": tag.encode() * 1000, "data.csv": f"x\n{tag}\n".encode()}
    files["summary.json"] = sets.summary_bytes("fig", {"tag": tag}, [{"x": tag}], 0.0, dict(files))
    return files


def test_a_file_and_a_set_are_replaced_whole_or_not_at_all(tmp_path):
    sets.write_atomic(tmp_path / "x.txt", b"old")
    with pytest.raises(TypeError):
        sets.write_atomic(tmp_path / "x.txt", object())  # fails mid-write
    assert (tmp_path / "x.txt").read_bytes() == b"old"
    assert oct((tmp_path / "x.txt").stat().st_mode & 0o777) != oct(0o600)
    folder = tmp_path / "fig"
    sets.write_set(folder, _figure_set("old"))
    sets.write_set(folder, _figure_set("new"))
    with pytest.raises(TypeError):  # fails part-way through the set
        sets.write_set(folder, {**_figure_set("broken"), "data.csv": object()})
    assert sets.verify_set(folder)["parameters"] == {"tag": "new"}
    assert oct(folder.stat().st_mode & 0o777) != oct(0o700)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig", "x.txt"], "no temporaries"
    (folder / "data.csv").write_text("x\ny\n")
    with pytest.raises(ValueError, match=r"fig/data.csv: differs from the digest"):
        sets.verify_set(folder)
    (folder / "data.csv").unlink()
    with pytest.raises(ValueError, match=r"fig/data.csv: missing"):
        sets.verify_set(folder)


@pytest.mark.notebook  # a real publish: seconds
def test_where_a_run_writes(tmp_path, monkeypatch):
    """Its artifacts_dir if given; in the pipeline the canonical folder, at the defaults only
    (the probe: -y "ratios: [1]" overwrote the book's paper-fig4); else a run folder of its own."""
    monkeypatch.setenv(artifacts.ARTIFACTS_ENV, str(tmp_path))
    monkeypatch.delenv(artifacts.PIPELINE_ENV, raising=False)
    default, custom = paper_fig4.Parameters(), paper_fig4.Parameters(ratios=[1])
    assert artifacts.output_dir("paper-fig4", paper_fig4.Parameters(artifacts_dir="x")) == Path("x")
    run = artifacts.output_dir("paper-fig4", custom)
    assert run.parent == tmp_path / "runs" and run.name.startswith("paper-fig4-")
    assert run != artifacts.output_dir("paper-fig4", default)
    # The same values however written, and where a run goes or how it shows: one folder.
    assert run == artifacts.output_dir("paper-fig4", paper_fig4.Parameters(ratios=(1.0,),
                                                                          allow_long=True))
    trajectories = paper_fig4.trajectories(custom)  # publish writes there, whole, and says so
    plotting.publish(paper_fig4.SPEC, custom, paper_fig4.threshold_rows(trajectories), 0.0,
                     {"figure": paper_fig4.plot(trajectories, custom.thresholds)})
    assert sorted(f.name for f in run.iterdir()) == sorted(paper_fig4.SPEC.files)
    sets.verify_set(run)
    assert not (tmp_path / "paper-fig4").exists()
    monkeypatch.setenv(artifacts.PIPELINE_ENV, "1")
    assert artifacts.output_dir("paper-fig4", default) == tmp_path / "paper-fig4"
    with pytest.raises(ValueError, match="paper-fig4: the canonical folder .* sets M, ratios"):
        paper_fig4.Parameters.from_notebook({**paper_fig4.Parameters.defaults(), "ratios": [1],
                                             "M": 10})


_WRITER = """
import sys
from qkov import sets
sys.path.insert(0, sys.argv[2])
from test_artifacts import _figure_set
figures = [_figure_set(f"{sys.argv[3]}{k}") for k in range(3)]
for k in range(200):
    sets.write_set(sys.argv[1], figures[k % 3])
"""


def _read_in(folder_fd: int, name: str) -> bytes:
    with os.fdopen(os.open(name, os.O_RDONLY, dir_fd=folder_fd), "rb") as handle:
        return handle.read()


@pytest.mark.notebook
def test_two_runs_saving_into_one_folder_never_mix(tmp_path):
    """The probe: two runs into one folder at once left png/pdf of one beside svg/csv of the
    other. Two writers race; whenever a reader opens the folder it holds one whole set."""
    folder = tmp_path / "fig"
    sets.write_set(folder, _figure_set("start"))
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(folder),
                                 str(Path(__file__).parent), tag]) for tag in ("a", "b")]
    seen = set()
    while any(w.poll() is None for w in writers):
        folder_fd = os.open(folder, os.O_RDONLY)  # this folder, even if another takes its name
        try:
            summary = json.loads(_read_in(folder_fd, "summary.json"))
            files = {name: _read_in(folder_fd, name) for name in summary["files"]}
        except FileNotFoundError:
            continue  # swapped out and removed while being read: not a mixed set
        finally:
            os.close(folder_fd)
        assert {n: sets.digest(d) for n, d in files.items()} == summary["files"]
        seen.add(summary["parameters"]["tag"])
    assert [w.returncode for w in writers] == [0, 0] and len(seen) > 3
    assert list(sets.verify_set(folder)) == ["figure", "parameters", "provenance", "rows",
                                             "tables", "files"]


def test_the_next_save_removes_what_runs_killed_while_saving_left(tmp_path):
    """A run killed mid-save leaves its staging folder (the folder stays whole, as a failed
    write shows); the next save removes it, not a live run's."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = [tmp_path / f".fig.{dead.pid}.abcdefgh.new", tmp_path / f".fig.{os.getpid()}.abcdefgh.new"]
    for folder in left:
        folder.mkdir()
    sets.write_set(tmp_path / "fig", _figure_set("x"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [left[1].name, "fig"]


def test_a_folder_that_is_not_a_previous_set_is_refused_and_kept(tmp_path, monkeypatch):
    own = tmp_path / "results"
    own.mkdir()
    (own / "thesis.tex").write_text("years of work")
    (own / "figure.png").write_bytes(b"mine")
    (tmp_path / "link").symlink_to(own)
    refused = [(own, r"results: holds thesis.tex, which are not a figure's files"),
               (tmp_path / "link", r"link: is a symbolic link"),
               (Path("."), r"is the current folder or holds it"),
               (tmp_path, r"is the current folder or holds it")]
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    for folder, message in refused:
        with pytest.raises(ValueError, match=message):
            sets.write_set(folder, _figure_set("x"))
    (own / "thesis.tex").unlink()  # a figure's file name, but no summary.json
    with pytest.raises(ValueError, match=r"holds no summary.json \(not a previous run's set\)"):
        sets.write_set(own, _figure_set("x"))
    assert [p.name for p in own.iterdir()] == ["figure.png"]


def test_a_table_prints_the_same_from_its_data_as_stored_in_summary_json(capsys):
    """The book shows a table from its data: its JSON form (summary.json) prints exactly as
    the table did (numpy floats, non-finite, None, text and integers)."""
    rows = [{"alpha": np.float64(1 / 3), "b": float("nan"), "c": None, "d": "0.5 ± 0.1", "e": 7,
             "f": np.float32(0.1), "g": np.int64(3), "h": True, "i": -float("inf")},
            {"alpha": 12345.678, "b": 1e-7, "c": 2, "d": "-", "e": 10**6, "f": 0.0, "g": 1,
             "h": False, "i": 3.0}]
    tables.taken()  # none left from another test
    tables.show(rows, digits=3)
    printed = capsys.readouterr().out
    [stored] = json.loads(json.dumps(tables.taken()))
    assert tables.text(stored) + "\n" == printed and tables.taken() == []
    assert stored["headers"][:2] == ["α", "b"]
    assert printed.splitlines()[1].split() == [
        "0.333", "nan", "None", "0.5", "±", "0.1", "7", "0.1", "3", "True", "-inf"]


def test_a_table_is_one_display_output_with_text_html_and_latex_from_its_data():
    """In a kernel a table is one display output (never parsed back out of stdout): its text
    is the printed form, its HTML and LaTeX show the same cells, a wide table in parts of at
    most MAX_COLUMNS columns led by the column that names the rows; LaTeX's specials escaped."""
    from IPython.core.interactiveshell import InteractiveShell

    rows = [{"name": f"r_{k}", **{f"c{j}": k + j / 7 for j in range(7)}, "note": "50% & #1"}
            for k in range(3)]
    shell = InteractiveShell.instance()
    published = []
    shell.display_pub.publish = lambda data, **kwargs: published.append(data)
    try:
        tables.taken()
        tables.show(rows, digits=3)
    finally:
        InteractiveShell.clear_instance()
    [data] = published
    [stored] = tables.taken()
    assert set(data) == {"text/plain", "text/html", "text/latex"}
    assert data["text/plain"] == tables.text(stored)
    parts = data["text/html"].count("<table")
    assert parts == len(tables.split_wide(stored["headers"], stored["rows"])) == 2
    for header, _ in tables.split_wide(stored["headers"], stored["rows"]):
        assert header[0] == "name" and len(header) <= tables.MAX_COLUMNS
    assert "<td>1.14</td>" in data["text/html"] and "<td>50% &amp; #1</td>" in data["text/html"]
    assert data["text/latex"].count(r"\begin{tabular}") == 2
    assert r"r\_1 & 1 & 1.14" in data["text/latex"] and r"50\% \& \#1" in data["text/latex"]


def test_a_table_without_rows_shows_its_columns_and_rows_may_come_from_a_generator(capsys):
    tables.taken()
    tables.show([], ["a", "b"])
    tables.show({"a": k} for k in range(2))
    assert capsys.readouterr().out == "a  b\na\n0\n1\n"
    assert [t["rows"] for t in tables.taken()] == [[], [[0], [1]]]


@pytest.mark.parametrize("call, named", [
    (lambda: tables.show([], None), "no rows"),
    (lambda: tables.show([{"a": 1}], ["a", "b"]), "'b'"),
    (lambda: tables.show([{"a": 1}], digits=0), "digits"),
])
def test_a_bad_table_is_refused_naming_what_is_wrong(call, named):
    with pytest.raises(ValueError, match=named):
        call()
    tables.taken()


def test_column_headers_are_the_same_on_every_page():
    assert tables.header("alpha") == "α" and tables.header("L=0.01") == "L = 0.01"
    assert tables.header("final_train_loss") == "final train loss"


def test_save_figure_writes_every_format_reproducibly(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    first = [p.read_bytes() for p in plotting.save_figure(fig, tmp_path)]
    assert first == [p.read_bytes() for p in plotting.save_figure(fig, tmp_path)]
    plt.close(fig)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.pdf", "figure.png", "figure.svg"]


def test_provenance_records_the_commit_what_differs_from_it_and_the_rounding(tmp_path,
                                                                            monkeypatch):
    """Uncommitted library or notebook code is recorded, not the outputs a build writes;
    custom parameters are named; a library not run from the checkout records no commit."""
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    nbformat.write(nb, repo / "notebooks" / "fig.ipynb")
    for command in (["init", "-q"], ["add", "."],
                    ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", *command], cwd=repo, check=True, capture_output=True)
    monkeypatch.setattr(provenance, "repo_root", lambda: repo)
    state = lambda figure="fig", **values: provenance.provenance(  # noqa: E731
        1.0, figure, paper_fig4.Parameters(**values), "float64")
    assert state()["commit"] is None and state()["uncommitted_changes"] is None
    monkeypatch.setattr(provenance, "running_checkout", lambda: repo)
    assert state()["commit"] and state()["uncommitted_changes"] is False
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nbformat.write(nb, repo / "notebooks" / "fig.ipynb")  # what a build writes
    assert state()["uncommitted_changes"] is False and state()["custom_parameters"] == []
    nb.cells[0].source = "print(2)"
    nbformat.write(nb, repo / "notebooks" / "fig.ipynb")
    nbformat.write(nb, repo / "notebooks" / "new.ipynb")  # a notebook the commit lacks
    assert state()["notebook_changed"] and state("new")["notebook_changed"]
    assert state()["library_changed"] is False
    (repo / "lib").mkdir()
    (repo / "lib" / "new.py").write_text("")  # an untracked module is a change too
    assert state()["library_changed"] and state()["uncommitted_changes"]
    assert state(ratios=[2.0], artifacts_dir="x")["custom_parameters"] == ["ratios"]
    machine = state()["machine"]  # what decides the rounding
    assert (machine["mkl_cbwr"], machine["dtype"]) == (os.environ.get("MKL_CBWR", qkov.MKL_CBWR),
                                                       "float64")
    assert machine["torch_threads"] == int(os.environ.get(qkov.THREADS_ENV, "1"))
    assert machine["torch_cpu_capability"] and bool(machine["mkl"]) == torch.backends.mkl.is_available()
