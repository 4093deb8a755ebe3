"""Worker processes die with their parent (issue 28): papermill killed mid-training leaves
nothing of its process tree alive 5 s later (:mod:`qkov.processes`)."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil  # ipython's and snakemake's dependency
import pytest

from conftest import REPO


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    def running(p):
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    return [p for p in procs if running(p)]


@pytest.mark.notebook
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_killed_papermill_leaves_no_workers(tmp_path, signal_name):
    """papermill on the ratio sweep, killed while two workers train (the matched loss is out
    of reach, so they would train on)."""
    options = {"artifacts_dir": tmp_path / "artifacts", "ratios": "[0.01, 0.03]", "seeds": "[1234]",
               "workers": 2, "max_epochs": 100000, "matched_loss": 1e-6, "progress": False}
    with open(tmp_path / "log", "w") as log:
        papermill = subprocess.Popen(
            [Path(sys.executable).parent / "papermill", "notebooks/theory-ratio-sweep.ipynb",
             tmp_path / "out.ipynb", *(a for k, v in options.items() for a in ("-y", f"{k}: {v}"))],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    tree, deadline = [], time.monotonic() + 90
    try:
        while len(tree) < 3:  # the kernel and its two workers
            assert papermill.poll() is None and time.monotonic() < deadline, \
                f"no two training workers within 90 s:\n{(tmp_path / 'log').read_text()[-3000:]}"
            time.sleep(0.2)
            tree = alive(psutil.Process(papermill.pid).children(recursive=True))
        time.sleep(1.0)  # well into training
        tree = alive(psutil.Process(papermill.pid).children(recursive=True))
        papermill.send_signal(getattr(signal, signal_name))
        papermill.wait(timeout=10)
        psutil.wait_procs(tree, timeout=5)  # zombies wait it out; alive() does not count them
        assert not alive(tree), f"5 s after papermill got {signal_name}: {alive(tree)}"
    finally:
        for p in [papermill, *alive(tree)]:
            p.kill()
        papermill.wait()

