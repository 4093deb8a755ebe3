"""The pipeline on a real single-node SLURM on localhost (`make slurm` installs it as root;
skipped, saying why, elsewhere): jobs carry their sweep's resources, a lost job is reported
and resumed, and the gathered table equals a local run's."""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import BIN, REPO
from qkov_tools import sweeps

SWEEP = sweeps.load(REPO / "sweeps" / "fig4-small.yaml")
ETC_CONF = Path("/etc/slurm/slurm.conf")  # the executor's job steps drop $SLURM_CONF


@pytest.fixture(scope="module")
def cluster():
    """The environment of a running cluster whose one partition, qkovtest, is no default."""
    path = f"{BIN}:/usr/sbin:{os.environ['PATH']}"
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch")
               if not shutil.which(b, path=path)]
    why = (missing and f"{missing} not installed (`make slurm` as root installs them)"
           or os.geteuid() and "the daemons need root" or ETC_CONF.exists()
           and not ETC_CONF.is_symlink() and f"a SLURM of this machine's own ({ETC_CONF})")
    if why:
        pytest.skip(f"no SLURM for this test: {why}")
    folder = Path(tempfile.mkdtemp(prefix="qkov-slurm-"))  # munged checks its folder's modes
    folder.chmod(0o755)
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf"), "PATH": path,
           "VIRTUAL_ENV": str(BIN.parent), "QKOV_SLURM_PARTITION": "qkovtest"}
    node = subprocess.run(["slurmd", "-C"], env=env, capture_output=True, text=True).stdout
    (folder / "slurm.conf").write_text(f"""ClusterName=qkovtest
SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)
SlurmUser=root
AuthInfo=socket={folder}/munge.socket
StateSaveLocation={folder}
SlurmdSpoolDir={folder}
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
ProctrackType=proctrack/linuxproc
SelectType=select/cons_tres
MinJobAge=300
EnforcePartLimits=ALL
{node.splitlines()[0]} NodeAddr=127.0.0.1
PartitionName=qkovtest Nodes=ALL
""")  # MinJobAge: squeue, the status command here (no accounting), shows finished jobs
    ETC_CONF.unlink(missing_ok=True)  # a link a killed run left
    ETC_CONF.symlink_to(folder / "slurm.conf")
    procs = [subprocess.Popen(argv, env=env, stdout=open(folder / f"{argv[0]}.log", "w"),
                              stderr=subprocess.STDOUT) for argv in (
        ["munged", "-F", "--force", f"--socket={folder}/munge.socket",
         f"--pid-file={folder}/munged.pid", f"--seed-file={folder}/munged.seed"],
        ["slurmctld", "-D", "-i"], ["slurmd", "-D"])]
    try:
        for _ in range(60):
            if "idle" in subprocess.run(["sinfo", "-h", "-o", "%t"], env=env,
                                        capture_output=True, text=True).stdout:
                break
            time.sleep(1)
        else:
            pytest.fail("the test cluster did not start:\n" + "\n".join(
                p.read_text()[-1500:] for p in folder.glob("*.log")))
        yield env
    finally:
        subprocess.run(["scancel", "-p", "qkovtest"], env=env)
        ETC_CONF.unlink()
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(folder)


def snakemake(work: Path, *args: str, env: dict, out: Path) -> subprocess.Popen:
    """Snakemake on the small sweep in ``work``, output to a file (a pipe would fill); after
    240 s, SIGINT makes it cancel its jobs."""
    work.mkdir(exist_ok=True)
    for name in ("notebooks", "lib"):
        (work / name).is_symlink() or (work / name).symlink_to(REPO / name)
    argv = ["timeout", "-s", "INT", "-k", "30", "240", str(BIN / "snakemake"),
            SWEEP.rule, "-s", str(REPO / "Snakefile"), "-d", str(work), *args]
    return subprocess.Popen(argv, cwd=work, env=env, stdout=open(out, "w"),
                            stderr=subprocess.STDOUT)


def set_jobs(env) -> dict[str, list[tuple[str, str, str]]]:
    """Each set's and the gather's jobs (id, state, memory and time), by the job's comment."""
    out = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%T|%m %l|%k"], env=env,
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for line in sorted(out.splitlines(), key=lambda line: int(line.split("|")[0])):
        job_id, state, asked, comment = line.split("|", 3)
        name = re.sub(rf"^rule_{SWEEP.rule}(_set_wildcards_)?", "", comment) or "gather"
        found.setdefault(name, []).append((job_id, state, asked))
    return found


def test_the_small_sweep_on_slurm_survives_a_lost_job_and_equals_a_local_run(cluster, tmp_path):
    work = tmp_path / "slurm"
    on_slurm = ("--profile", str(REPO / "profiles" / "slurm"), "--slurm-status-command",
                "squeue", "--slurm-init-seconds-before-status-checks", "3")

    # 1. When a set's job runs, cancel it as a lost node would.
    run, lost = snakemake(work, *on_slurm, env=cluster, out=tmp_path / "first.out"), None
    while lost is None and run.poll() is None:
        running = [(s, ids[-1][0]) for s, ids in set_jobs(cluster).items()
                   if ids[-1][1] == "RUNNING" and s != "gather"]
        if running:
            lost, lost_job = running[0]
            subprocess.run(["scancel", lost_job], env=cluster, check=True)
        time.sleep(1)
    run.wait()
    err = (tmp_path / "first.out").read_text()
    assert lost is not None and run.returncode != 0, err[-3000:]
    jobs = set_jobs(cluster)
    assert jobs[lost] == [(lost_job, "CANCELLED", "1000M 5:00")], jobs  # the sweep's resources
    assert re.search(r"sweep fig4-small .*: 2 done, 1 failed", err), err[-3000:]
    assert f"failed     {lost}  " in err and "CANCELLED" in err
    slurm_log = f".snakemake/slurm_logs/rule_{SWEEP.rule}_set/{lost}/{lost_job}.log"
    assert f"log:   {slurm_log}" in err and f"log:   {SWEEP.log(lost)}" in err, err[-3000:]
    assert not any((work / path).exists() for path in SWEEP.gathered)

    # 2. The re-run submits the lost set and the gather only, and every job completes.
    rerun = snakemake(work, *on_slurm, env=cluster, out=tmp_path / "rerun.out")
    assert rerun.wait() == 0, (tmp_path / "rerun.out").read_text()[-4000:]
    new = {s: [state for _, state, _ in ids[len(jobs.get(s, [])):]]
           for s, ids in set_jobs(cluster).items()}
    assert {s: states for s, states in new.items() if states} == {
        lost: ["COMPLETED"], "gather": ["COMPLETED"]}, new
    assert all(ids[-1][1] == "COMPLETED" for ids in set_jobs(cluster).values())

    # 3. The same sweep run locally gathers the same table, number for number.
    local = snakemake(tmp_path / "local", "--cores", "2", env=os.environ, out=tmp_path / "local.out")
    assert local.wait() == 0, (tmp_path / "local.out").read_text()[-3000:]
    assert not (tmp_path / "local/.snakemake/slurm_logs").exists()
    table = (work / SWEEP.gathered[0]).read_text()
    assert table == (tmp_path / "local" / SWEEP.gathered[0]).read_text()
    assert len(table.splitlines()) == 1 + 3 * 3 * 5  # header; sets x ratios x thresholds
