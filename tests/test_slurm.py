"""The pipeline on a real (single-node, localhost) SLURM: the small sweep runs through
``snakemake --executor slurm --profile profiles/slurm``, every job goes through the
scheduler, a job lost mid-run (scancel) is reported with its set and logs and nothing is
gathered, the re-run submits only what is missing, and the gathered table equals the same
sweep run locally, number for number.

Skipped, with the reason, where SLURM cannot be stood up (not root, no apt-get, a SLURM of
the machine's own). Root with apt access (CI here) installs Debian's munge and SLURM.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import slurm_cluster
from conftest import REPO
from qkov_tools import sweeps

SWEEP = REPO / "sweeps" / "fig4-small.yaml"
RUN_LIMIT_S = 240  # per snakemake run; SIGINT makes it cancel its jobs (scancel) and stop


@pytest.fixture(scope="module")
def cluster():
    try:
        slurm_cluster.ensure_installed()
    except slurm_cluster.Unavailable as err:
        pytest.skip(f"no SLURM for this test: {err}")
    # Not below pytest's tmp_path: munged (its own user) must reach its socket's folder.
    folder = Path(tempfile.mkdtemp(prefix="qkov-slurm-"))
    c = slurm_cluster.Cluster(folder)
    try:
        c.__enter__()
    except slurm_cluster.Unavailable as err:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"no SLURM for this test: {err}")
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(folder, ignore_errors=True)


def workflow_dir(path: Path) -> Path:
    path.mkdir()
    for name in ("notebooks", "lib"):
        (path / name).symlink_to(REPO / name)
    return path


def snakemake_argv(work: Path, *args: str) -> list[str]:
    return ["timeout", "-s", "INT", "-k", "30", str(RUN_LIMIT_S),
            str(Path(sys.executable).parent / "snakemake"), "sweep_fig4_small",
            "-s", str(REPO / "Snakefile"), "-d", str(work), *args]


def slurm_argv(work: Path) -> list[str]:
    # squeue as the status command: no accounting database here (finished jobs stay listed
    # for MinJobAge); a short first status check keeps the test short.
    return snakemake_argv(work, "--profile", str(REPO / "profiles" / "slurm"),
                          "--slurm-status-command", "squeue",
                          "--slurm-init-seconds-before-status-checks", "3")


def job_env(cluster) -> dict:
    """Jobs inherit the submitting environment: the project's venv first on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    return {**cluster.env, "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "VIRTUAL_ENV": str(Path(bin_dir).parent)}


def set_jobs(cluster, sweep) -> dict[str, list[tuple[str, str]]]:
    """The SLURM jobs of each set and of the gather: name -> [(job id, state)]."""
    found = {}
    for job_id, job in sorted(cluster.jobs().items(), key=lambda kv: int(kv[0])):
        comment = job["comment"]
        if comment == f"rule_{sweep.rule}":
            found.setdefault("gather", []).append((job_id, job["state"]))
        elif comment.startswith(f"rule_{sweep.set_rule}_wildcards_"):
            set_id = comment.removeprefix(f"rule_{sweep.set_rule}_wildcards_")
            found.setdefault(set_id, []).append((job_id, job["state"]))
    return found


def test_the_small_sweep_on_slurm_survives_a_lost_job_and_equals_a_local_run(cluster, tmp_path):
    sweep = sweeps.load(SWEEP)
    env = job_env(cluster)
    work = workflow_dir(tmp_path / "slurm")

    # 1. Submit the sweep; when a set's job is running, cancel it as a lost node would.
    run = subprocess.Popen(slurm_argv(work), cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    lost, deadline = None, time.monotonic() + RUN_LIMIT_S
    while lost is None and run.poll() is None and time.monotonic() < deadline:
        running = [(s, ids[-1][0]) for s, ids in set_jobs(cluster, sweep).items()
                   if s != "gather" and ids[-1][1] == "RUNNING"]
        if running:
            lost, lost_job = running[0]
            subprocess.run(["scancel", lost_job], env=env, check=True)
        time.sleep(1)
    out, err = run.communicate(timeout=RUN_LIMIT_S + 60)
    assert lost is not None, f"no set job ran:\n{out[-2000:]}\n{err[-3000:]}\n{cluster.logs()}"
    assert run.returncode != 0, err[-3000:]
    jobs = set_jobs(cluster, sweep)
    assert jobs[lost] == [(lost_job, "CANCELLED")], jobs
    # The report names the lost set, its parameters and logs (the run's, SLURM's with job id).
    assert re.search(r"sweep fig4-small .*: 2 done, 1 failed", err), err[-3000:]
    assert f"failed     {lost}  " in err and "CANCELLED" in err
    slurm_log = f".snakemake/slurm_logs/rule_{sweep.set_rule}/{lost}/{lost_job}.log"
    assert f"log:   {slurm_log}" in err and (work / slurm_log).is_file(), err[-3000:]
    assert f"log:   {sweep.log(lost)}" in err
    assert not any((work / p).exists() for p in sweep.gathered)  # no figure from 2 of 3 sets

    # 2. The re-run submits the lost set and the gather only.
    before = {s: list(ids) for s, ids in jobs.items()}
    rerun = subprocess.run(slurm_argv(work), cwd=work, env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, f"{rerun.stdout[-2000:]}\n{rerun.stderr[-4000:]}"
    jobs = set_jobs(cluster, sweep)
    new = {s: ids[len(before.get(s, [])):] for s, ids in jobs.items()}
    assert {s: [state for _, state in ids] for s, ids in new.items() if ids} == {
        lost: ["COMPLETED"], "gather": ["COMPLETED"]}, jobs

    # Every set ran as a SLURM job that completed, and left a SLURM log named by its job id.
    for set_id in sweep.sets:
        job_id, state = jobs[set_id][-1]
        assert state == "COMPLETED", jobs
        assert (work / f".snakemake/slurm_logs/rule_{sweep.set_rule}/{set_id}/{job_id}.log").is_file()
        assert (work / sweep.set_folder(set_id) / "notebook.ipynb").is_file()

    # 3. The same sweep locally: the gathered table is the same, number for number.
    local = workflow_dir(tmp_path / "local")
    done = subprocess.run(snakemake_argv(local, "--cores", "2"), cwd=local, capture_output=True,
                          text=True, env={**os.environ, "PATH": env["PATH"]})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SLURM jobid" not in done.stderr and not (local / ".snakemake/slurm_logs").exists()
    on_slurm = (work / sweep.folder / "results.csv").read_text()
    assert on_slurm == (local / sweep.folder / "results.csv").read_text()
    assert len(on_slurm.splitlines()) == 1 + 3 * 3 * 5  # header; sets x ratios x thresholds
    assert (work / sweep.folder / "figure.png").stat().st_size > 0


def test_the_cluster_profile_gives_every_figure_resources_and_hard_codes_no_site():
    import yaml

    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm" and profile["rerun-incomplete"] is True
    defaults = profile["default-resources"]
    # Partition and account: read from the environment when Snakemake evaluates them.
    for name, variable in (("slurm_partition", "QKOV_SLURM_PARTITION"),
                           ("slurm_account", "QKOV_SLURM_ACCOUNT")):
        assert defaults[name] == f"__import__('os').environ.get('{variable}', '')"
        os.environ[variable] = "site-value"
        try:
            assert eval(defaults[name]) == "site-value"
        finally:
            del os.environ[variable]
    # A figure's resources are in its SPEC (tests/test_pipeline.py checks the rules get
    # them), never per rule name here.
    assert "set-resources" not in profile
