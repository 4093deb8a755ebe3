"""Sweeps (qkov_tools.sweeps): sweep files are checked before any job, a sweep runs as one
Snakemake job per set plus a gather, a failed set is reported with its parameters and log,
a re-run runs only what is missing, and nothing is gathered from a partial set."""

import csv
import json
import os
import re
import textwrap

import pytest

from conftest import REPO
from qkov_tools import sweeps
from qkov_tools.sweeps import SweepError


def write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


FAST = """\
    figure: paper-fig4
    base: {ratios: [1], target_loss: 1e-2, per_decade: 1}
    sets:
      - {id: good, m: 2}
      - {id: bad, eta_ov: 1e300}
    plot: {x: r, y: alpha, group: m}
    threads: 1
    """


# --- the sweep files ------------------------------------------------------------------------


def test_the_project_sweeps_are_valid():
    found = {s.name: s for s in sweeps.load_all(REPO / "sweeps")}
    assert {"fig4-small", "theory-ratio-sweep", "fig2-seeds"} <= set(found)
    small = found["fig4-small"]
    assert [s.id for s in small.sets] == ["m-2", "m-5", "m-10"]
    assert small.sets[0].values == {"ratios": [0.1, 1, 10], "target_loss": 0.01,
                                    "per_decade": 2, "m": 2}
    assert small.rule == "sweep_fig4_small" and small.threads == 1
    seeds = found["fig2-seeds"]
    assert len(seeds.sets) == 20 and len({s.values["seeds"][0] for s in seeds.sets}) == 20
    assert [s.values["ratios"] for s in found["theory-ratio-sweep"].sets][:2] == [[0.01], [0.03]]
    assert len(found["theory-ratio-sweep"].sets) == 9


def test_a_grid_is_every_combination_with_readable_ids(tmp_path):
    path = write(tmp_path, "g.yaml", """\
        figure: paper-fig4
        base: {per_decade: 1}
        grid: {M: [10, 20], eta_ov: [0.5, 2]}
        plot: {x: r, y: alpha}
        """)
    sweep = sweeps.load(path)
    assert [s.id for s in sweep.sets] == ["M-10_eta_ov-0.5", "M-10_eta_ov-2", "M-20_eta_ov-0.5",
                                          "M-20_eta_ov-2"]
    assert sweep.sets[3].values == {"per_decade": 1, "M": 20, "eta_ov": 2}
    assert sweep.set_outputs("M-10_eta_ov-2") == [
        "artifacts/sweeps/g/M-10_eta_ov-2/summary.json",
        "artifacts/sweeps/g/M-10_eta_ov-2/notebook.ipynb"]
    assert sweep.threads == 1  # the figure's own (its SPEC)
    assert sweep.resources == {"mem_mb": 1000, "runtime": 10}  # its SPEC's, unless the file says


@pytest.mark.parametrize("body, expected", [
    # An unknown parameter, a wrong type, a value out of range: file, set and parameter named.
    ("sets: [{id: a, m: 2}, {id: b, ratio: 3}]", r"set 'b': parameter 'ratio': unknown parameter"),
    ("sets: [{id: a, M: 2.5}]", r"set 'a': parameter 'M': expected an integer, got 2.5"),
    ("grid: {ratios: [[1, -1]]}", r"set 'ratios-1--1': parameter 'ratios': item 1: expected a "
                                  r"number > 0"),
    ("sets: [{id: a, ratios: '1, 10'}]", r"set 'a': parameter 'ratios': expected a list"),
    ("sets: [{id: a, target_loss: 2}]", r"set 'a': parameter 'loss_max'|set 'a': parameter "
                                        r"'target_loss'"),
    ("sets: [{id: a, artifacts_dir: x}]", r"set 'a': parameter 'artifacts_dir': set by the sweep"),
    # The file itself.
    ("sets: [{id: a}, {id: a, m: 3}]", r"set 'a' appears twice"),
    ("sets: [{id: 'a/b'}]", r"set 'a/b' \(item 0\): a set id is"),
    ("sets: [{m: 2}]\ngrid: {m: [3]}", r"either 'sets' .* or 'grid'"),
    ("sets: [{m: 2}]\nseeds: [1]", r"unknown key 'seeds'"),
    ("sets: [{m: 2}\n", r"not valid YAML"),
    ("grid: {m: 2}", r"grid parameter 'm': expected a non-empty list"),
])
def test_a_bad_sweep_file_fails_naming_the_file_the_set_and_the_parameter(tmp_path, body, expected):
    path = write(tmp_path, "bad.yaml", "figure: paper-fig4\nplot: {x: r, y: alpha}\n" + body + "\n")
    with pytest.raises(SweepError, match=expected) as err:
        sweeps.load(path)
    assert str(err.value).startswith(str(path))


def test_an_unknown_figure_and_a_missing_plot_are_named(tmp_path):
    with pytest.raises(SweepError, match=r"'figure' must be one of .*paper-fig4.*got 'fig9'"):
        sweeps.load(write(tmp_path, "a.yaml", "figure: fig9\nsets: [{m: 2}]\n"))
    with pytest.raises(SweepError, match=r"'plot' needs x"):
        sweeps.load(write(tmp_path, "b.yaml", "figure: paper-fig4\nsets: [{m: 2}]\n"))


def test_numbers_in_exponent_form_are_numbers(tmp_path):
    sweep = sweeps.load(write(tmp_path, "e.yaml", FAST))
    assert sweep.get("good").values["target_loss"] == 0.01
    assert sweep.get("bad").values["eta_ov"] == 1e300


# --- running, failing, resuming (locally, through Snakemake) --------------------------------


def workflow_dir(tmp_path):
    """A working directory for the project's Snakefile: its inputs are linked, its outputs
    (artifacts/, .snakemake/) stay here."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("notebooks", "lib"):
        (work / name).symlink_to(REPO / name)
    return work


def snakemake(run_tool, work, sweep_dir, *targets, check=True):
    return run_tool("snakemake", *targets, "-s", REPO / "Snakefile", "-d", work, "--cores", "2",
                    "--keep-going", "--config", f"sweeps_dir={sweep_dir}", cwd=work, check=check)


def test_a_failed_set_is_reported_nothing_is_gathered_and_a_rerun_resumes(run_tool, tmp_path):
    work = workflow_dir(tmp_path)
    sweep_dir = tmp_path / "sweeps"
    path = write(sweep_dir, "fails.yaml", FAST)
    sweep = sweeps.load(path)

    # The bad set's ODE cannot be integrated (valid types, hopeless values): its job fails.
    first = snakemake(run_tool, work, sweep_dir, "sweep_fails", check=False)
    assert first.returncode != 0
    log = "artifacts/logs/sweeps/fails/bad.log"
    report = first.stderr
    assert re.search(r"sweep fails .*: 1 done, 1 failed", report), report[-3000:]
    assert 'failed     bad  {"eta_ov": 1e+300}' in report
    assert "error: RuntimeError: reduced ODE (CACO, eta_ov=1e+300" in report
    assert f"log:   {log}" in report and (work / log).is_file()
    # No gathered table or figure from the one good set; the good set is kept.
    assert not any((work / p).exists() for p in sweep.gathered)
    good = work / "artifacts/sweeps/fails/good"
    assert (good / "notebook.ipynb").is_file() and (good / "figure.png").is_file()
    assert not (work / "artifacts/sweeps/fails/bad/notebook.ipynb").exists()
    status = run_tool("python", "-m", "qkov_tools.sweeps", "status", path, "--root", work, check=False)
    assert status.returncode == 1 and "failed     bad" in status.stdout
    refused = run_tool("python", "-m", "qkov_tools.sweeps", "gather", path, "--root", work, check=False)
    assert refused.returncode == 2 and "not gathering a partial sweep" in refused.stderr

    # Mend the bad set: the re-run runs it (and the gather), not the good one again.
    done_at = (good / "notebook.ipynb").stat().st_mtime_ns
    path.write_text(FAST.replace("eta_ov: 1e300", "eta_ov: 2").replace("    ", ""))
    second = snakemake(run_tool, work, sweep_dir, "sweep_fails")
    ran = re.findall(r"wildcards: set=(\S+)", second.stdout + second.stderr)
    assert ran == ["bad"], second.stderr[-3000:]
    assert (good / "notebook.ipynb").stat().st_mtime_ns == done_at
    with open(work / "artifacts/sweeps/fails/results.csv") as handle:
        rows = list(csv.DictReader(handle))
    # One row per set and loss threshold (1, 0.1, 0.01), the set's own parameters in front.
    assert [(r["set"], r["m"], r["eta_ov"]) for r in rows] == [("good", "2", "")] * 3 + [
        ("bad", "", "2")] * 3
    summary = json.loads((work / "artifacts/sweeps/fails/bad/summary.json").read_text())
    assert [float(r["alpha"]) for r in rows[3:]] == [r["alpha"] for r in summary["rows"]]
    assert (work / "artifacts/sweeps/fails/figure.png").stat().st_size > 0

    # A run killed mid-way (a set's summary written, its notebook not stored yet, nothing
    # gathered) left a set that is not done: the gather refuses, Snakemake runs that set again.
    os.remove(good / "notebook.ipynb")
    for name in sweep.gathered:
        os.remove(work / name)
    refused = run_tool("python", "-m", "qkov_tools.sweeps", "gather", path, "--root", work, check=False)
    assert refused.returncode == 2 and "incomplete good" in refused.stderr
    plan = run_tool("snakemake", "sweep_fails", "-s", REPO / "Snakefile", "-d", work, "-n",
                    "--config", f"sweeps_dir={sweep_dir}", cwd=work)
    assert re.findall(r"wildcards: set=(\S+)", plan.stdout + plan.stderr) == ["good"]


def test_the_default_target_is_the_book_figures_only(run_tool, tmp_path):
    """`make figures` (snakemake's first rule) runs the figures as before: no sweep."""
    from qkov.figures import specs

    work = workflow_dir(tmp_path)
    plan = run_tool("snakemake", "-s", REPO / "Snakefile", "-d", work, "-n", "--cores", "2",
                    cwd=work).stdout
    planned = set(re.findall(r"^rule (\w+):", plan, flags=re.MULTILINE))
    assert planned == {"all"} | {s.module for s in specs().values() if not s.needs_dataset}
