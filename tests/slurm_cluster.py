"""A real single-node SLURM on localhost for the tests: Debian's munge, slurmctld and slurmd,
started in the background with their state, sockets and logs in one temporary folder and
stopped by PID.

Why each setting: job steps read the default
``/etc/slurm/slurm.conf`` (so it is a link to the generated file while the cluster runs);
``EnforcePartLimits=ALL`` makes sbatch reject a job that asks for more than the node has
instead of leaving it pending forever; ``MinJobAge=300`` keeps finished jobs visible to
``squeue`` (the executor's status command here: there is no accounting database);
``proctrack/linuxproc`` needs no cgroups. munged gets its own socket and key copy, so a
munged the machine may already run is left alone.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ("munge", "slurmctld", "slurmd", "slurm-client")
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")
SLURM_CONF = Path("/etc/slurm/slurm.conf")
PARTITION = "qkovtest"


class Unavailable(Exception):
    """SLURM cannot be stood up here (not root, no apt-get, a real SLURM present): skip."""


def _which(name: str) -> str | None:
    return shutil.which(name) or next((str(p) for p in (Path("/usr/sbin") / name,
                                                        Path("/usr/bin") / name) if p.exists()),
                                      None)


def ensure_installed() -> None:
    """Install the Debian packages if a binary is missing (root and apt-get needed)."""
    if all(_which(b) for b in BINARIES):
        return
    if os.geteuid() != 0:
        raise Unavailable("SLURM is not installed and this is not root: "
                          f"sudo apt-get install {' '.join(PACKAGES)}")
    if not shutil.which("apt-get"):
        raise Unavailable("SLURM is not installed and there is no apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        done = subprocess.run(install, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise Unavailable(f"apt-get could not install {' '.join(PACKAGES)}: "
                              f"{done.stderr.strip()[-300:]}")
    missing = [b for b in BINARIES if not _which(b)]
    if missing:
        raise Unavailable(f"installed {' '.join(PACKAGES)} but {missing} are missing")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 - 512
    return 1024


class Cluster:
    """``with Cluster(folder) as c:`` a running single-node cluster; ``c.env`` for commands."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.host = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1
        self.conf = self.folder / "slurm.conf"
        self.munge_socket = self.folder / "munge" / "munge.socket"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._linked = False

    # -- set-up --------------------------------------------------------------------------

    def _check_free(self) -> None:
        if SLURM_CONF.exists() and not SLURM_CONF.is_symlink():
            raise Unavailable(f"{SLURM_CONF} is a real SLURM configuration; not replacing it")
        for port in (6817, 6818):
            if not _port_free(port):
                raise Unavailable(f"port {port} is in use (another SLURM running?)")

    def _write_conf(self) -> None:
        f = self.folder
        self.conf.write_text("\n".join([
            "ClusterName=qkovtest",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={f / 'ctld'}", f"SlurmdSpoolDir={f / 'slurmd'}",
            f"SlurmctldPidFile={f / 'slurmctld.pid'}", f"SlurmdPidFile={f / 'slurmd.pid'}",
            f"SlurmctldLogFile={f / 'slurmctld.log'}", f"SlurmdLogFile={f / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/affinity",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill", "MpiDefault=none",
            "ReturnToService=2", "MinJobAge=300", "EnforcePartLimits=ALL",
            "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
            "SlurmdTimeout=60", "InactiveLimit=0", "KillWait=5",
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} "
            f"RealMemory={_memory_mb()} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes={self.host} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]))
        for name in ("ctld", "slurmd"):
            (f / name).mkdir()

    def _start(self, name: str, argv: list[str], **kw) -> None:
        log = open(self.folder / f"{name}.out", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                start_new_session=True, **kw)
        self.procs.append((name, proc))

    def _start_munge(self) -> None:
        munge = pwd.getpwnam("munge")
        folder = self.munge_socket.parent
        folder.mkdir()
        folder.chmod(0o755)  # munged: others must reach the socket, not write here
        key = folder / "munge.key"
        shutil.copy("/etc/munge/munge.key", key)
        for path in (folder, key):
            os.chown(path, munge.pw_uid, munge.pw_gid)
        key.chmod(0o400)
        self.folder.chmod(0o755)  # munged checks that it can reach its folder

        def as_munge():
            os.setgid(munge.pw_gid)
            os.setuid(munge.pw_uid)

        self._start("munged", [_which("munged"), "--foreground", f"--socket={self.munge_socket}",
                               f"--key-file={key}", f"--log-file={folder / 'munged.log'}",
                               f"--pid-file={folder / 'munged.pid'}",
                               f"--seed-file={folder / 'munged.seed'}"],
                    preexec_fn=as_munge)
        self._wait(lambda: self.munge_socket.exists(), "munged to create its socket")

    def _wait(self, ready, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}) while waiting for "
                                       f"{what}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out waiting for {what}:\n{self.logs()}")

    def _node_idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=self.env,
                             capture_output=True, text=True)
        return out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc")

    def start(self) -> Cluster:
        self._check_free()
        self._write_conf()
        self._start_munge()
        self._start("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._start("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf)])
        SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
        if SLURM_CONF.is_symlink():  # left by a run that was killed before its clean-up
            SLURM_CONF.unlink()
        SLURM_CONF.symlink_to(self.conf)
        self._linked = True
        self._wait(self._node_idle, "the node to become idle")
        return self

    # -- tear-down -----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every daemon this cluster started (by PID: slurmd, slurmctld, munged) and
        remove the /etc/slurm/slurm.conf link; the folder goes with the test's tmp_path."""
        if any(name == "slurmctld" and proc.poll() is None for name, proc in self.procs):
            # Jobs a failed test left running (this controller's only), before the daemons go.
            subprocess.run(["scancel", "--partition", PARTITION], env=self.env,
                           capture_output=True, timeout=30)
        if self._linked and SLURM_CONF.is_symlink() and SLURM_CONF.resolve() == self.conf:
            SLURM_CONF.unlink()
        for _name, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()

    def logs(self) -> str:
        parts = []
        for path in sorted(self.folder.glob("*.log")) + sorted(self.folder.glob("*.out")):
            text = path.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(parts)

    def __enter__(self) -> Cluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- queries -------------------------------------------------------------------------

    def jobs(self) -> dict[str, dict]:
        """Every job the controller remembers (finished ones for MinJobAge): id -> name,
        state, comment (the executor puts the rule and wildcards there), exit code."""
        out = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%j|%T|%k"],
                             env=self.env, capture_output=True, text=True, check=True)
        jobs = {}
        for line in out.stdout.splitlines():
            job_id, name, state, comment = line.split("|", 3)
            jobs[job_id] = {"name": name, "state": state, "comment": comment}
        return jobs
