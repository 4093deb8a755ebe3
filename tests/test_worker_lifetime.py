"""Worker processes die with their parent (issue 28).

papermill starts the notebook's kernel in a session of its own; the kernel forks the
training workers (:func:`qkov.processes.map_in_processes`). When papermill is killed (by
``timeout``, CI, a scheduler) the kernel notices and exits, and the workers must not outlive
it: each case below kills papermill mid-training and then finds nothing of its process tree
alive 5 s later. The processes are found through /proc, so these tests run on Linux only.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from qkov.processes import map_in_processes

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GRACE_S = 5.0  # workers must be gone this long after their parent
START_TIMEOUT_S = 90.0  # papermill, the kernel and the first training cell start within this

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="parent-death signals and /proc are Linux's")


def processes() -> dict[int, dict]:
    """Every live process: pid -> state, ppid, sid and cmdline (zombies are dead: left out)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if fields[0] in "ZX":
            continue
        out[int(entry)] = dict(state=fields[0], ppid=int(fields[1]), sid=int(fields[3]),
                               cmd=cmdline.replace(b"\0", b" ").decode(errors="replace")[:160])
    return out


def descendants(root: int, table: dict[int, dict]) -> dict[int, dict]:
    """``root`` and everything below it in ``table``."""
    found = {root} if root in table else set()
    while True:
        more = {pid for pid, p in table.items() if p["ppid"] in found} - found
        if not more:
            return {pid: table[pid] for pid in found}
        found |= more


def in_sessions(sessions: set[int]) -> dict[int, dict]:
    return {pid: p for pid, p in processes().items() if p["sid"] in sessions}


def describe(table: dict[int, dict]) -> str:
    return "\n".join(f"  pid {pid} ppid {p['ppid']} sid {p['sid']} state {p['state']}: {p['cmd']}"
                     for pid, p in sorted(table.items())) or "  (none)"


def kill_all(sessions: set[int], pids: set[int]) -> None:
    """SIGKILL every live process of ``sessions`` and every pid of ``pids``, until none is
    left (a dying parent may fork once more)."""
    for _ in range(20):
        targets = set(in_sessions(sessions)) | (pids & set(processes()))
        targets.discard(os.getpid())
        if not targets:
            return
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)


def wait_until_gone(sessions: set[int], pids: set[int], grace: float) -> dict[int, dict]:
    """What is still alive of ``sessions`` and ``pids`` after at most ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while True:
        table = processes()
        alive = {pid: p for pid, p in table.items() if p["sid"] in sessions or pid in pids}
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.2)


@pytest.mark.notebook
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_killed_papermill_leaves_no_workers(tmp_path, signal_name):
    """papermill on the ratio sweep, killed while two workers train (the runs cannot stop
    early: the matched loss is out of reach): no process of its tree is alive 5 s later."""
    artifacts = tmp_path / "artifacts"
    command = [str(BIN / "papermill"), "notebooks/theory-ratio-sweep.ipynb",
               str(tmp_path / "out.ipynb"), "-p", "artifacts_dir", str(artifacts),
               "-y", "ratios: [0.01, 0.03]", "-y", "seeds: [1234]", "-p", "workers", "2",
               "-p", "max_epochs", "100000", "-p", "matched_loss", "1e-6",
               "-p", "progress", "False"]
    log = tmp_path / "papermill.log"
    with open(log, "w") as stream:
        papermill = subprocess.Popen(
            command, cwd=REPO, stdout=stream, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env={**os.environ, "QKOV_ARTIFACTS": str(artifacts)})
    sessions = {papermill.pid}  # papermill's, and the kernel's own (jupyter_client's setsid)
    seen = {papermill.pid}
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            tree = descendants(papermill.pid, processes())
            seen |= set(tree)
            sessions |= {p["sid"] for p in tree.values()}
            kernels = {pid for pid, p in tree.items() if p["ppid"] == papermill.pid}
            workers = {pid for pid, p in tree.items() if p["ppid"] in kernels}
            if len(workers) >= 2:
                break
            if papermill.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no two training workers within {START_TIMEOUT_S:.0f} s (papermill "
                            f"exit {papermill.returncode}):\n{describe(tree)}\n"
                            f"{log.read_text()[-3000:]}")
            time.sleep(0.2)
        time.sleep(1.0)  # well into training
        tree = descendants(papermill.pid, processes())
        seen |= set(tree)
        sessions |= {p["sid"] for p in tree.values()}

        papermill.send_signal(getattr(signal, signal_name))
        papermill.wait(timeout=10)
        alive = wait_until_gone(sessions, seen, GRACE_S)
        assert not alive, (f"{GRACE_S:g} s after papermill got {signal_name}, its tree "
                           f"(sessions {sorted(sessions)}) still has:\n{describe(alive)}\n"
                           f"before the signal:\n{describe(tree)}")
    finally:
        if papermill.poll() is None:
            papermill.kill()
        kill_all(sessions, seen)
        papermill.wait()


PARENT = textwrap.dedent("""
    import os, sys, time
    from qkov.processes import map_in_processes

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    def report(pid_file):
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\\n")
        spin(300)

    if __name__ == "__main__":
        map_in_processes(report, [(sys.argv[1],)] * 2, 2)
""")


@pytest.mark.notebook  # a subprocess that imports torch: a few seconds
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_workers_die_with_their_parent(tmp_path, signal_name):
    """No notebook in between: the process that called ``map_in_processes`` is killed and
    its two workers, busy in their calls, end within 5 s."""
    script, pid_file = tmp_path / "parent.py", tmp_path / "workers.txt"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(pid_file)], cwd=tmp_path,
                              start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2:
            if parent.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the workers did not start: {parent.stderr.read().decode()[-3000:]}"
                            if parent.poll() is not None else "the workers did not start")
            time.sleep(0.2)
            if pid_file.exists():
                workers = {int(line) for line in pid_file.read_text().split()}
        assert all(processes()[pid]["ppid"] == parent.pid for pid in workers)

        parent.send_signal(getattr(signal, signal_name))
        parent.wait(timeout=10)
        alive = wait_until_gone({parent.pid}, workers, GRACE_S)
        assert not alive, (f"{GRACE_S:g} s after their parent got {signal_name}, still alive:\n"
                           f"{describe(alive)}")
    finally:
        if parent.poll() is None:
            parent.kill()
        kill_all({parent.pid}, workers)
        parent.wait()
        parent.stderr.close()


def _death_signal_and_watchdog() -> tuple[int, bool]:
    import ctypes
    import threading

    value = ctypes.c_int(-1)
    ctypes.CDLL(None).prctl(2, ctypes.byref(value), 0, 0, 0)  # PR_GET_PDEATHSIG
    return value.value, any(t.name == "qkov-parent-watchdog" for t in threading.enumerate())


def test_workers_ask_for_a_death_signal():
    """Each worker holds a parent-death signal (SIGKILL) and runs the parent watchdog; this
    process, which called ``map_in_processes``, holds neither."""
    assert map_in_processes(_death_signal_and_watchdog, [()] * 2, 2) \
        == [(signal.SIGKILL, True)] * 2
    assert _death_signal_and_watchdog()[1] is False
