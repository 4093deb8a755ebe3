"""Artifact writing: atomic files, summary layout, rounded tables, figure formats."""

import json
import os
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from qkov import artifacts, plotting, provenance, sets, tables


def test_write_atomic_replaces_whole_files_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "x.txt"
    sets.write_atomic(target, b"old")
    sets.write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "x.txt"
    sets.write_atomic(target, b"old")

    with pytest.raises(TypeError):
        sets.write_atomic(target, object())  # not bytes: fails mid-write
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_where_a_run_writes(tmp_path, monkeypatch):
    """Its artifacts_dir if given; in the pipeline the canonical folder, and only at the
    defaults; otherwise a run folder named by its parameters, never the canonical one."""
    from qkov.figures import paper_fig4

    monkeypatch.setenv(artifacts.ARTIFACTS_ENV, str(tmp_path / "root"))
    monkeypatch.delenv(artifacts.PIPELINE_ENV, raising=False)
    default, custom = paper_fig4.Parameters(), paper_fig4.Parameters(ratios=[1])
    assert artifacts.output_dir("paper-fig4", paper_fig4.Parameters(artifacts_dir="x")) == Path("x")
    run = artifacts.output_dir("paper-fig4", custom)
    assert run.parent == tmp_path / "root" / "runs" and run.name.startswith("paper-fig4-")
    assert run != artifacts.output_dir("paper-fig4", default)
    # The same values, however written, and where a run goes or how it shows: one folder.
    assert run == artifacts.output_dir("paper-fig4", paper_fig4.Parameters(ratios=(1.0,),
                                                                          allow_long=True))

    monkeypatch.setenv(artifacts.PIPELINE_ENV, "1")
    assert artifacts.output_dir("paper-fig4", default) == tmp_path / "root" / "paper-fig4"
    with pytest.raises(ValueError, match="paper-fig4: the canonical folder .* sets ratios"):
        artifacts.output_dir("paper-fig4", custom)
    monkeypatch.delenv(artifacts.ARTIFACTS_ENV)
    monkeypatch.setattr(artifacts, "repo_root", lambda: tmp_path / "repo")
    assert artifacts.default_dir("f") == tmp_path / "repo" / "artifacts" / "f"


@pytest.mark.notebook  # subprocesses or a real run: seconds
def test_a_notebook_run_outside_the_pipeline_leaves_the_canonical_set_alone(tmp_path,
                                                                            monkeypatch, capsys):
    """The probe: `papermill notebooks/paper-fig4.ipynb o.ipynb -y "ratios: [1]"` without
    artifacts_dir overwrote artifacts/paper-fig4/, which the book then showed as the figure.
    In the pipeline, the same parameters are refused before any work."""
    from qkov.figures import paper_fig4

    monkeypatch.setenv(artifacts.ARTIFACTS_ENV, str(tmp_path))
    monkeypatch.delenv(artifacts.PIPELINE_ENV, raising=False)
    namespace = {**paper_fig4.Parameters.defaults(), "ratios": [1], "M": 10}
    p = paper_fig4.Parameters.from_notebook(dict(namespace))
    plotting.publish(paper_fig4.SPEC, p, paper_fig4.threshold_rows(paper_fig4.trajectories(p)),
                     0.0, {"figure": paper_fig4.plot(paper_fig4.trajectories(p), p.thresholds)})
    folder = artifacts.run_dir("paper-fig4", p)
    assert f"into {folder}" in capsys.readouterr().out
    assert sorted(f.name for f in folder.iterdir()) == sorted(paper_fig4.SPEC.files)
    assert not (tmp_path / "paper-fig4").exists()
    sets.verify_set(folder)

    monkeypatch.setenv(artifacts.PIPELINE_ENV, "1")
    with pytest.raises(ValueError, match="sets M, ratios"):
        paper_fig4.Parameters.from_notebook(dict(namespace))


def _figure_set(tag: str, size: int = 1000) -> dict:
    files = {"figure.png": tag.encode() * size, "data.csv": f"x\n{tag}\n".encode()}
    files["summary.json"] = sets.summary_bytes("fig", {"tag": tag}, [{"x": tag}], 0.0,
                                                    dict(files))
    return files


def test_a_set_is_swapped_in_whole(tmp_path):
    folder = tmp_path / "fig"
    sets.write_set(folder, _figure_set("old"))
    assert json.loads((folder / "summary.json").read_text())["parameters"] == {"tag": "old"}
    sets.write_set(folder, _figure_set("new"))
    assert sets.verify_set(folder)["parameters"] == {"tag": "new"}
    assert (folder / "data.csv").read_text() == "x\nnew\n"
    assert [p.name for p in tmp_path.iterdir()] == ["fig"], "no temporary folder is left"
    assert oct(folder.stat().st_mode & 0o777) != oct(0o700)

    broken = _figure_set("broken")
    broken["data.csv"] = object()  # a write that fails part-way through the set
    with pytest.raises(TypeError):
        sets.write_set(folder, broken)
    assert sets.verify_set(folder)["parameters"] == {"tag": "new"}
    assert [p.name for p in tmp_path.iterdir()] == ["fig"]


_WRITER = """
import sys
from pathlib import Path
from qkov import sets
sys.path.insert(0, sys.argv[3])
from test_artifacts import _figure_set
figures = [_figure_set(f"{sys.argv[4]}{k}", int(sys.argv[5])) for k in range(3)]
Path(sys.argv[1] + ".ready").touch()
for k in range(int(sys.argv[2])):
    sets.write_set(sys.argv[1], figures[k % 3])
"""


def _read_in(folder_fd: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY, dir_fd=folder_fd)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


@pytest.mark.notebook  # subprocesses or a real run: seconds
def test_two_runs_saving_into_one_folder_never_mix(tmp_path):
    """The probe: two runs into one folder at once left png/pdf of one beside svg/csv/summary
    of the other. Two writers race; whenever a reader opens the folder it holds one whole
    set, and so does the folder they leave."""
    import subprocess
    import sys

    folder = tmp_path / "fig"
    sets.write_set(folder, _figure_set("start"))
    here = str(Path(__file__).parent)
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(folder), "200", here, tag,
                                 "1000"]) for tag in ("a", "b")]
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
    assert [w.returncode for w in writers] == [0, 0]
    assert len(seen) > 3, "the reader saw the writers' sets"
    sets.verify_set(folder)
    Path(f"{folder}.ready").unlink()
    assert [p.name for p in tmp_path.iterdir()] == ["fig"]


@pytest.mark.notebook  # subprocesses or a real run: seconds
def test_a_run_killed_while_saving_leaves_a_whole_set(tmp_path):
    """The probe: a kill during the save cell left files of two runs side by side. A writer
    saves large sets without pause and is killed at moments spread over a save; each time
    the folder holds one whole set, and the next save removes what the killed ones left."""
    import random
    import signal
    import subprocess
    import sys
    import time

    folder = tmp_path / "fig"
    sets.write_set(folder, _figure_set("start"))
    here = str(Path(__file__).parent)
    rng = random.Random(0)
    left = []  # what each killed writer left beside the set (its next save removes it)
    for k in range(8):
        ready = Path(f"{folder}.ready")
        ready.unlink(missing_ok=True)
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(folder), "100000", here,
                                   f"k{k}", "20000000"])  # 40 MB sets: tens of ms a save
        while not ready.exists():
            assert writer.poll() is None, "the writer failed"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.05, 0.3))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        sets.verify_set(folder)
        left += [p.name for p in tmp_path.iterdir() if p.name.startswith(".fig.")]
    ready.unlink()
    assert left, "no kill landed during a save: the test did not test"
    sets.write_set(folder, _figure_set("after"))
    assert [p.name for p in tmp_path.iterdir()] == ["fig"]


def test_a_folder_that_is_not_a_previous_set_is_refused_and_kept(tmp_path, monkeypatch):
    own = tmp_path / "results"
    own.mkdir()
    (own / "experiment.csv").write_text("mine")
    (own / "figure.png").write_bytes(b"mine")
    with pytest.raises(ValueError, match=r"results: holds experiment.csv, which are not"):
        sets.write_set(own, _figure_set("x"))
    (own / "experiment.csv").unlink()  # a figure's file name, but no summary.json
    with pytest.raises(ValueError, match=r"holds no summary.json \(not a previous run's set\)"):
        sets.write_set(own, _figure_set("x"))
    assert (own / "figure.png").read_bytes() == b"mine"
    link = tmp_path / "link"
    link.symlink_to(own)
    with pytest.raises(ValueError, match=r"link: is a symbolic link"):
        sets.write_set(link, _figure_set("x"))
    monkeypatch.chdir(own)
    with pytest.raises(ValueError, match=r"is the current folder or holds it"):
        sets.write_set(Path("."), _figure_set("x"))
    with pytest.raises(ValueError, match=r"is the current folder or holds it"):
        sets.write_set(tmp_path, _figure_set("x"))
    assert sorted(p.name for p in own.iterdir()) == ["figure.png"]


def test_a_folder_with_other_files_is_refused_and_kept(tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work")
    with pytest.raises(ValueError, match=r"holds thesis.tex, which are not a figure's files"):
        sets.write_set(tmp_path, _figure_set("x"))
    assert (tmp_path / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis.tex"]


def test_verify_set_names_the_file_that_differs_or_is_missing(tmp_path):
    sets.write_set(tmp_path / "fig", _figure_set("x"))
    (tmp_path / "fig" / "data.csv").write_text("x\ny\n")
    with pytest.raises(ValueError, match=r"fig/data.csv: differs from the digest"):
        sets.verify_set(tmp_path / "fig")
    (tmp_path / "fig" / "data.csv").unlink()
    with pytest.raises(ValueError, match=r"fig/data.csv: missing"):
        sets.verify_set(tmp_path / "fig")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "summary.json").write_text('{"figure": "f"}')
    with pytest.raises(ValueError, match="not a figure summary with the digests"):
        sets.verify_set(tmp_path / "old")


def test_summary_has_the_documented_keys():
    rows = [{"r": 1.0, "loss": 0.5, "alpha": float("nan")}]
    data = tables.csv_bytes(rows)
    summary = json.loads(sets.summary_bytes("fig", {"ratios": [1.0]}, rows, 1.23456,
                                                 {"data.csv": data}))
    assert list(summary) == ["figure", "parameters", "provenance", "rows", "tables", "files"]
    assert summary["rows"] == [{"r": 1.0, "loss": 0.5, "alpha": None}]
    assert summary["provenance"]["wall_time_s"] == 1.235
    assert summary["files"] == {"data.csv": sets.digest(data)}
    assert data.decode().splitlines()[0] == "r,loss,alpha"
    with pytest.raises(ValueError, match="no rows"):
        tables.csv_bytes([])


def test_a_table_prints_rounded_from_its_data():
    text = tables.text(tables.table([{"r": 0.1, "alpha": 0.123456789}], ["r", "alpha"]))
    assert text.splitlines() == ["  r   alpha", "0.1  0.1235"]


def test_a_table_prints_the_same_from_its_data_as_stored_in_summary_json(capsys):
    """The book renders a printed table from summary.json: its JSON form prints exactly as
    the notebook's table did (floats of numpy, non-finite, None, text and integers)."""
    import numpy as np

    rows = [{"a": np.float64(1 / 3), "b": float("nan"), "c": None, "d": "0.5 ± 0.1", "e": 7,
             "f": np.float32(0.1), "g": np.int64(3), "h": True, "i": -float("inf")},
            {"a": 12345.678, "b": 1e-7, "c": 2, "d": "-", "e": 10**6, "f": 0.0, "g": 1,
             "h": False, "i": 3.0}]
    tables.taken()  # none left from another test
    tables.show(rows, digits=3)
    printed = capsys.readouterr().out
    [stored] = json.loads(json.dumps(tables.taken({"a": "α"})))
    assert tables.text(stored) + "\n" == printed
    assert stored["headers"][:2] == ["α", "b"] and tables.taken() == []
    assert printed.splitlines()[1].split() == [
        "0.333", "nan", "None", "0.5", "±", "0.1", "7", "0.1", "3", "True", "-inf"]


def test_a_table_with_a_missing_column_or_bad_digits_is_refused():
    with pytest.raises(ValueError, match=r"row 1 has no column 'b'"):
        tables.table([{"a": 1, "b": 2}, {"a": 1}], ["a", "b"])
    with pytest.raises(ValueError, match="digits: expected an integer from 1 to 17"):
        tables.table([{"a": 1.0}], digits=0)
    with pytest.raises(ValueError, match="no rows and no columns"):
        tables.table([])


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
    monkeypatch.setattr(provenance, "repo_root", lambda: repo)
    monkeypatch.setattr(provenance, "running_checkout", lambda: repo)

    p = paper_fig4.Parameters()
    state = provenance.provenance(1.0, "fig", p, "float64")
    assert state["commit"] and state["uncommitted_changes"] is False
    assert state["custom_parameters"] == [] and state["machine"]["dtype"] == "float64"

    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nbformat.write(nb, repo / "notebooks" / "fig.ipynb")  # what a build writes
    assert provenance.provenance(1.0, "fig", p, "float64")["uncommitted_changes"] is False

    nb.cells[0].source = "print(2)"
    nbformat.write(nb, repo / "notebooks" / "fig.ipynb")
    state = provenance.provenance(1.0, "fig", p, "float64")
    assert state["notebook_changed"] and state["uncommitted_changes"]
    assert not state["library_changed"]
    git("checkout", "notebooks/fig.ipynb")

    (repo / "lib" / "new.py").write_text("")  # an untracked module is a change too
    state = provenance.provenance(1.0, "fig", paper_fig4.Parameters(ratios=[2.0]), "float64")
    assert state["library_changed"] and state["uncommitted_changes"]
    assert state["custom_parameters"] == ["ratios"]
    # The defaults in another container, or where the outputs go, are not custom.
    same = paper_fig4.Parameters(ratios=tuple(paper_fig4.Parameters.defaults()["ratios"]),
                                 artifacts_dir="elsewhere")
    assert provenance.provenance(1.0, "fig", same, "float64")["custom_parameters"] == []

    nbformat.write(nb, repo / "notebooks" / "new.ipynb")  # a notebook the commit lacks
    assert provenance.provenance(1.0, "new", p, "float64")["notebook_changed"] is True


def test_a_library_not_run_from_the_checkout_records_no_commit(tmp_path, monkeypatch):
    """A non-editable install started inside some other git repository: that repository's
    commit says nothing about the code that ran."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setattr(provenance, "repo_root", lambda: tmp_path)
    assert provenance.running_checkout() is None
    state = provenance.provenance(1.0, "fig", None, "float32")
    assert state["commit"] is None and state["uncommitted_changes"] is None


def test_provenance_records_what_decides_the_rounding():
    import os

    import qkov

    machine = provenance.provenance(1.0, "fig", dtype="float32")["machine"]
    assert machine["mkl_cbwr"] == os.environ.get("MKL_CBWR", qkov.MKL_CBWR)
    assert machine["torch_threads"] == int(os.environ.get(qkov.THREADS_ENV, "1"))
    assert machine["dtype"] == "float32" and machine["cpu_model"]
    assert isinstance(machine["torch_cpu_capability"], str) and machine["torch_cpu_capability"]
    import torch

    assert bool(machine["mkl"]) == torch.backends.mkl.is_available()
