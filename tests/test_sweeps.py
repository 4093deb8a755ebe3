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
    base: {ratios: [1], target_loss: 1e-2, per_decade: 1, m: 2}
    grid: {eta_ov: [2, 1e300]}
    plot: {x: r, y: alpha, group: eta_ov}
    threads: 1
    """
GOOD, BAD = "eta_ov~2", "eta_ov~1e+300"  # the sets' names (Paramspace's, from the grid)


# --- the sweep files ------------------------------------------------------------------------


def test_the_project_sweeps_are_valid():
    found = {s.name: s for s in sweeps.load_all(REPO / "sweeps")}
    assert {"fig4-small", "theory-ratio-sweep", "fig2-seeds"} <= set(found)
    small = found["fig4-small"]
    assert list(small.sets) == ["m~2", "m~5", "m~10"]
    assert small.values("m~2") == {"ratios": [0.1, 1, 10], "target_loss": 0.01,
                                   "per_decade": 2, "m": 2}
    assert small.rule == "sweep_fig4_small" and small.threads == 1
    seeds = found["fig2-seeds"]
    assert len(seeds.sets) == 20 and len({seeds.values(s)["seeds"][0] for s in seeds.sets}) == 20
    ratios = found["theory-ratio-sweep"]
    assert list(ratios.sets)[:2] == ["ratios~0.01", "ratios~0.03"] and len(ratios.sets) == 9
    # `same`: each set's default-init condition runs at the set's own ratio.
    assert ratios.values("ratios~0.03") == {"variants": [[64, "default", 0.1]], "ratios": [0.03],
                                            "variant_ratios": [0.03]}


def test_a_grid_is_every_combination_named_by_paramspace(tmp_path):
    path = write(tmp_path, "g.yaml", """\
        figure: paper-fig4
        base: {per_decade: 1}
        grid: {M: [10, 20], eta_ov: [0.5, 2], ratios: [[1, 10]]}
        plot: {x: r, y: alpha}
        """)
    sweep = sweeps.load(path)
    assert list(sweep.sets) == ["M~10_eta_ov~0.5_ratios~1-10", "M~10_eta_ov~2_ratios~1-10",
                                "M~20_eta_ov~0.5_ratios~1-10", "M~20_eta_ov~2_ratios~1-10"]
    assert sweep.values("M~20_eta_ov~2_ratios~1-10") == {"per_decade": 1, "M": 20, "eta_ov": 2,
                                                         "ratios": [1, 10]}
    assert sweep.pattern == "{set}"
    assert sweep.set_outputs(sweep.pattern) == ["artifacts/sweeps/g/{set}/summary.json",
                                                "artifacts/sweeps/g/{set}/notebook.ipynb"]
    assert sweep.threads == 1  # the figure's own (its SPEC)
    assert sweep.resources == {"mem_mb": 1000, "runtime": 10}  # its SPEC's, unless the file says


@pytest.mark.parametrize("body, expected", [
    # An unknown parameter, a wrong type, a value out of range: file, set and parameter named.
    ("grid: {m: [2], ratio: [3]}", r"set 'm~2_ratio~3': parameter 'ratio': unknown parameter"),
    ("grid: {M: [2.5]}", r"set 'M~2.5': parameter 'M': expected an integer, got 2.5"),
    ("grid: {ratios: [[1, -1]]}", r"set 'ratios~1--1': parameter 'ratios': item 1: expected a "
                                  r"number > 0"),
    ("grid: {ratios: ['1, 10']}", r"set 'ratios~1-10': parameter 'ratios': expected a list"),
    ("grid: {target_loss: [2]}", r"set 'target_loss~2': parameter 'loss_max'|set 'target_loss~2'"
                                 r": parameter 'target_loss'"),
    ("grid: {artifacts_dir: [x]}", r"set 'artifacts_dir~x': parameter 'artifacts_dir': set by "
                                   r"the sweep"),
    ("grid: {m: [2]}\nsame: {mm: m}", r"set 'm~2': parameter 'mm': unknown parameter"),
    ("grid: {m: [2]}\nsame: {n: M}", r"same: 'n' must name a grid parameter, got 'M'"),
    # The file itself.
    ("grid: {m: [2, 2.0]}", r"set 'm~2' appears twice"),
    ("sets: [{m: 2}]", r"unknown key 'sets'"),
    ("grid: {m: [2]}\nseeds: [1]", r"unknown key 'seeds'"),
    ("grid: {m: [2]\n", r"not valid YAML"),
    ("grid: {m: 2}", r"grid parameter 'm': expected a non-empty list"),
    ("grid: {}", r"'grid' must map parameter names to lists of values"),
])
def test_a_bad_sweep_file_fails_naming_the_file_the_set_and_the_parameter(tmp_path, body, expected):
    path = write(tmp_path, "bad.yaml", "figure: paper-fig4\nplot: {x: r, y: alpha}\n" + body + "\n")
    with pytest.raises(SweepError, match=expected) as err:
        sweeps.load(path)
    assert str(err.value).startswith(str(path))


def test_an_unknown_figure_and_a_missing_plot_are_named(tmp_path):
    with pytest.raises(SweepError, match=r"'figure' must be one of .*paper-fig4.*got 'fig9'"):
        sweeps.load(write(tmp_path, "a.yaml", "figure: fig9\ngrid: {m: [2]}\n"))
    with pytest.raises(SweepError, match=r"'plot' needs x"):
        sweeps.load(write(tmp_path, "b.yaml", "figure: paper-fig4\ngrid: {m: [2]}\n"))


def test_numbers_in_exponent_form_are_numbers(tmp_path):
    sweep = sweeps.load(write(tmp_path, "e.yaml", FAST))
    assert list(sweep.sets) == [GOOD, BAD]
    assert sweep.values(GOOD)["target_loss"] == 0.01
    assert sweep.values(BAD)["eta_ov"] == 1e300


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
    log = f"artifacts/logs/sweeps/fails/{BAD}.log"
    report = first.stderr
    assert re.search(r"sweep fails .*: 1 done, 1 failed", report), report[-3000:]
    assert f'failed     {BAD}  {{"eta_ov": 1e+300}}' in report
    assert "error: RuntimeError: reduced ODE (CACO, eta_ov=1e+300" in report
    assert f"log:   {log}" in report and (work / log).is_file()
    # No gathered table or figure from the one good set; the good set is kept.
    assert not any((work / p).exists() for p in sweep.gathered)
    good = work / "artifacts/sweeps/fails" / GOOD
    assert (good / "notebook.ipynb").is_file() and (good / "figure.png").is_file()
    assert not (work / "artifacts/sweeps/fails" / BAD / "notebook.ipynb").exists()
    status = run_tool("python", "-m", "qkov_tools.sweeps", "status", path, "--root", work, check=False)
    assert status.returncode == 1 and f"failed     {BAD}" in status.stdout
    refused = run_tool("python", "-m", "qkov_tools.sweeps", "gather", path, "--root", work, check=False)
    assert refused.returncode == 2 and "not gathering a partial sweep" in refused.stderr

    # Mend the bad set (a new grid value, so a new set): the re-run runs it (and the gather),
    # not the good one again.
    done_at = (good / "notebook.ipynb").stat().st_mtime_ns
    path.write_text(FAST.replace("1e300", "0.5").replace("    ", ""))
    second = snakemake(run_tool, work, sweep_dir, "sweep_fails")
    ran = re.findall(r"wildcards: set=(\S+)", second.stdout + second.stderr)
    assert ran == ["eta_ov~0.5"], second.stderr[-3000:]
    assert (good / "notebook.ipynb").stat().st_mtime_ns == done_at
    with open(work / "artifacts/sweeps/fails/results.csv") as handle:
        rows = list(csv.DictReader(handle))
    # One row per set and loss threshold (1, 0.1, 0.01), the set's grid values in front.
    assert [(r["set"], r["eta_ov"]) for r in rows] == [(GOOD, "2")] * 3 + [("eta_ov~0.5", "0.5")] * 3
    summary = json.loads((work / "artifacts/sweeps/fails/eta_ov~0.5/summary.json").read_text())
    assert summary["parameters"]["eta_ov"] == 0.5 and summary["parameters"]["m"] == 2
    assert summary["parameters"]["artifacts_dir"] == str(work / "artifacts/sweeps/fails/eta_ov~0.5")
    assert [float(r["alpha"]) for r in rows[3:]] == [r["alpha"] for r in summary["rows"]]
    assert (work / "artifacts/sweeps/fails/figure.png").stat().st_size > 0

    # A run killed mid-way (a set's summary written, its notebook not stored yet, nothing
    # gathered) left a set that is not done: the gather refuses, Snakemake runs that set again.
    os.remove(good / "notebook.ipynb")
    for name in sweep.gathered:
        os.remove(work / name)
    refused = run_tool("python", "-m", "qkov_tools.sweeps", "gather", path, "--root", work, check=False)
    assert refused.returncode == 2 and f"incomplete {GOOD}" in refused.stderr
    plan = run_tool("snakemake", "sweep_fails", "-s", REPO / "Snakefile", "-d", work, "-n",
                    "--config", f"sweeps_dir={sweep_dir}", cwd=work)
    assert re.findall(r"wildcards: set=(\S+)", plan.stdout + plan.stderr) == [GOOD]

    # A set's parameters are its job's params: editing the base re-runs every set.
    path.write_text(path.read_text().replace("per_decade: 1", "per_decade: 2"))
    plan = run_tool("snakemake", "sweep_fails", "-s", REPO / "Snakefile", "-d", work, "-n",
                    "--config", f"sweeps_dir={sweep_dir}", cwd=work)
    out = plan.stdout + plan.stderr
    assert sorted(re.findall(r"wildcards: set=(\S+)", out)) == sorted([GOOD, "eta_ov~0.5"])
    assert "Params have changed since last execution" in out, out[-3000:]


def test_the_default_target_is_the_book_figures_only(run_tool, tmp_path):
    """`make figures` (snakemake's first rule) runs the figures as before: no sweep."""
    from qkov.figures import specs

    work = workflow_dir(tmp_path)
    plan = run_tool("snakemake", "-s", REPO / "Snakefile", "-d", work, "-n", "--cores", "2",
                    cwd=work).stdout
    planned = set(re.findall(r"^rule (\w+):", plan, flags=re.MULTILINE))
    assert planned == {"all"} | {s.module for s in specs().values() if not s.needs_dataset}


def test_each_set_job_carries_its_sweeps_threads_and_cluster_resources(run_tool, tmp_path):
    """What a SLURM job asks for (profiles/slurm): the sweep file's threads and resources,
    else its figure's SPEC's; one job per set, each into its own folder."""
    found = sweeps.load_all(REPO / "sweeps")
    work = workflow_dir(tmp_path)
    plan = run_tool("snakemake", *[s.rule for s in found], "-s", REPO / "Snakefile", "-d", work,
                    "-n", "--cores", "2", cwd=work).stdout
    jobs = re.findall(r"^rule (\w+):\n(.*?)(?=^\[|^rule |\Z)", plan, re.M | re.S)
    for sweep in found:
        mine = [job for rule, job in jobs if rule == sweep.set_rule]
        assert sorted(re.search(r"wildcards: set=(\S+)", job)[1] for job in mine) == sorted(
            sweep.sets)
        for job in mine:
            set_id = re.search(r"wildcards: set=(\S+)", job)[1]
            assert f"output: {', '.join(sweep.set_outputs(set_id))}\n" in job
            assert f"threads: {sweep.threads}\n" in job or sweep.threads == 1, job
            for name, value in sweep.resources.items():
                assert f"{name}={value}" in job, (sweep.name, name, job)
    assert all(s.resources for s in found)  # (the loop above checks something)
