"""A sweep file is checked before any job, runs as a Snakemake job per set plus a gather,
reports a failed set with its parameters and log, re-runs only what is missing or changed."""

import csv
import json
import os
import re

import pytest

from conftest import REPO
from qkov_tools import sweeps
from qkov_tools.sweeps import SweepError

FAST = """\
figure: paper-fig4
base: {ratios: [1], target_loss: 1e-2, per_decade: 1, m: 2}
grid: {eta_ov: [2, 1e300]}
plot: {x: r, y: alpha, group: eta_ov}
resources: {mem_mb: 1500, runtime: 3}
"""
GOOD, BAD = "eta_ov~2", "eta_ov~1e+300"  # Paramspace's names; 1e300 read as a number


def test_a_grid_is_every_combination_named_by_paramspace_and_checked(tmp_path):
    found = {s.name: s for s in map(sweeps.load, (REPO / "sweeps").glob("*.yaml"))}  # all load
    assert found["theory-ratio-sweep"].values("ratios~0.03") == {  # `same`: the set's own r
        "variants": [[64, "default", 0.1]], "ratios": [0.03], "variant_ratios": [0.03]}
    path = tmp_path / "g.yaml"
    path.write_text("figure: paper-fig4\nbase: {per_decade: 1}\nplot: {x: r, y: alpha}\n"
                    "grid: {M: [10, 20], eta_ov: [0.5, 2e-1], ratios: [[1, 10]]}\n")
    sweep = sweeps.load(path)
    assert list(sweep.sets) == ["M~10_eta_ov~0.5_ratios~1-10", "M~10_eta_ov~0.2_ratios~1-10",
                                "M~20_eta_ov~0.5_ratios~1-10", "M~20_eta_ov~0.2_ratios~1-10"]
    assert sweep.values("M~20_eta_ov~0.2_ratios~1-10") == {  # as written: the checks read "2e-1"
        "per_decade": 1, "M": 20, "eta_ov": "2e-1", "ratios": [1, 10]}
    assert (sweep.threads, sweep.resources) == (1, {"mem_mb": 1000, "runtime": 10})  # SPEC's


@pytest.mark.parametrize("body, expected", [
    ("grid: {m: [2], ratio: [3]}", r"set 'm~2_ratio~3': parameter 'ratio': not a parameter"),
    ("grid: {M: [2.5]}", r"set 'M~2.5': parameter 'M': expected an integer, got 2.5"),
    ("grid: {m: [2]}\nsame: {n: M}", r"'same' must map parameters to grid parameters"),
    ("grid: {m: [2, 2.0]}", r"two sets have one name"),
    ("grid: {m: [2]}\nseeds: [1]", r"unknown key \['seeds'\]"),
    ("grid: {m: [2]\n", r"while parsing"),
    ("grid: {m: 2}", r"'grid' must map parameters to non-empty lists"),
    ("grid: {m: [2]}\nplot: {x: r, y: alpha, logy: true}", r"plot: .*'logy'"),
    ("grid: {m: [2]}\nfigure: fig9", r"'figure' must be one of .*paper-fig4"),
    ("grid: {m: [2]}\nsame: [n]", r"'same' must map names to values"),
    ("grid: {m: [2]}\nthreads: 0", r"'threads' must be a whole number of cores, got 0"),
])
def test_a_bad_sweep_file_fails_naming_the_file_the_set_and_the_parameter(tmp_path, body, expected):
    path = tmp_path / "bad.yaml"  # (a key given twice: the last one holds)
    path.write_text("figure: paper-fig4\nplot: {x: r, y: alpha}\n" + body + "\n")
    with pytest.raises(SweepError, match=expected) as err:
        sweeps.load(path)
    assert str(err.value).startswith(str(path))


def test_a_sweep_runs_a_job_per_set_reports_a_failure_gathers_only_when_done_and_resumes(
        run_tool, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the workflow's directory: the sweep's paths are relative
    for name in ("notebooks", "lib"):
        (tmp_path / name).symlink_to(REPO / name)
    path = tmp_path / "sweeps" / "fails.yaml"
    path.parent.mkdir()
    path.write_text(FAST)
    sweep = sweeps.load(path)
    good = sweep.folder / GOOD

    def snakemake(*args, check=True):
        result = run_tool("snakemake", "sweep_fails", "-s", REPO / "Snakefile", "--cores", "2",
                          "--config", f"sweeps_dir={path.parent}", *args, cwd=tmp_path,
                          check=check)
        return result, result.stdout + result.stderr, re.findall(
            r"wildcards: set=(\S+)", result.stdout + result.stderr)

    # The plan: one job per set, each with the sweep's cluster resources.
    _, plan, planned = snakemake("-n")
    assert sorted(planned) == sorted([GOOD, BAD])
    assert plan.count("mem_mb=1500,") == plan.count("runtime=3") == 2, plan

    # The bad set's ODE cannot be integrated: its job fails, reported with its values and log.
    first, _, _ = snakemake("--keep-going", check=False)
    report = first.stderr
    assert first.returncode != 0 and re.search(r"sweep fails .*: 1 done, 1 failed", report)
    assert f'failed     {BAD}  {{"eta_ov": "1e300"}}' in report, report[-3000:]
    assert "error: RuntimeError: reduced ODE (CACO, eta_ov=1e+300" in report
    assert f"log:   {sweep.log(BAD)}" in report and os.path.isfile(sweep.log(BAD))
    assert not any(map(os.path.exists, sweep.gathered))
    assert (good / "notebook.ipynb").is_file() and (good / "figure.png").is_file()
    status = run_tool("python", "-m", "qkov_tools.sweeps", "status", path, cwd=tmp_path,
                      check=False)
    assert status.returncode == 1 and f"failed     {BAD}" in status.stdout
    with pytest.raises(SweepError, match="not gathering a partial sweep: .*1 failed"):
        sweeps.gather(sweep)

    # Mended (a new grid value, so a new set): the re-run runs it and the gather, not GOOD.
    done_at = (good / "notebook.ipynb").stat().st_mtime_ns
    path.write_text(FAST.replace("1e300", "0.5"))
    assert snakemake()[2] == ["eta_ov~0.5"]
    assert (good / "notebook.ipynb").stat().st_mtime_ns == done_at
    with open(sweep.gathered[0]) as handle:  # results.csv: a row per set and loss threshold
        rows = list(csv.DictReader(handle))
    assert [(r["set"], r["eta_ov"]) for r in rows] == [(GOOD, "2")] * 3 + [("eta_ov~0.5", "0.5")] * 3
    summary = json.loads((sweep.folder / "eta_ov~0.5" / "summary.json").read_text())
    assert summary["parameters"]["eta_ov"] == 0.5 and summary["parameters"]["m"] == 2
    assert [float(r["alpha"]) for r in rows[3:]] == [r["alpha"] for r in summary["rows"]]
    assert os.path.getsize(sweep.gathered[1]) > 0  # figure.png

    # A run killed mid-way (a set's notebook not stored): incomplete, not gathered, run again.
    for name in [good / "notebook.ipynb", *sweep.gathered]:
        os.remove(name)
    with pytest.raises(SweepError, match=f"1 incomplete(.|\n)*incomplete {GOOD}"):
        sweeps.gather(sweep)
    assert snakemake("-n")[2] == [GOOD]
    # A set's parameters are its job's params: editing the base re-runs every set.
    path.write_text(FAST.replace("1e300", "0.5").replace("per_decade: 1", "per_decade: 2"))
    _, plan, planned = snakemake("-n")
    assert sorted(planned) == sorted([GOOD, "eta_ov~0.5"]) and "Params have changed" in plan
