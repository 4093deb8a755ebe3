"""Independent runs on forked workers that die with their parent (SIGKILL asked of Linux, and
a watchdog thread). loky 3.7.0, measured instead, let workers idle ~40 s after the parent's
SIGKILL (these go within 0.1 s), and its fresh workers miss module state and pinned threads."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time

import torch

from . import pinned_threads


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(1)


def _start_worker(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        prctl = ctypes.CDLL(None).prctl
        prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4  # unsigned longs, all 64 bits
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    torch.set_num_threads(pinned_threads())


def map_in_processes(function, argument_tuples: list[tuple], workers: int) -> list:
    """``[function(*args) for args in argument_tuples]`` on up to ``workers`` forked
    processes (here when one suffices); they inherit module state set before the call."""
    if workers == 1 or len(argument_tuples) <= 1:
        return [function(*args) for args in argument_tuples]
    with multiprocessing.get_context("fork").Pool(
            min(workers, len(argument_tuples)), initializer=_start_worker,
            initargs=(os.getpid(),)) as pool:
        return pool.starmap(function, argument_tuples, chunksize=1)
