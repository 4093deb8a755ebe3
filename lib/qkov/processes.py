"""Independent computations spread over worker processes, each on the pinned number of
torch threads (``qkov.pinned_threads``: one unless ``QKOV_THREADS`` says otherwise).

The companion's runs (a training ensemble's share, a descent of the stylized model) are
small: one process cannot spread their many tiny operations over the cores, so independent
runs go to separate processes instead. A run's result does not depend on where it ran.

Workers die with the process that forked them. A notebook's kernel runs in a session and
process group of its own (``jupyter_client`` starts it with ``start_new_session``), so a
signal to papermill's process group - ``timeout``, CI, a scheduler - does not reach the
kernel; the kernel notices that papermill is gone (ipykernel polls its parent every second)
and exits, and its workers would then be reparented and go on training for as long as their
share takes. So each worker asks Linux for SIGKILL when its parent dies
(``prctl(PR_SET_PDEATHSIG)``) and, on every platform, watches its parent from a thread.

loky (joblib's pool) does not give this, measured with its 3.7.0: its workers do not watch
their parent, so after a SIGKILL to it they finish their call and idle some 40 s more (two
in a 60 s call: still alive 75 s on); these are gone within 0.1 s. Its workers also start
afresh: they see neither module state set before the call nor, without an initializer,
the pinned threads.
"""

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

PARENT_POLL_S = 0.5  # how often a worker's watchdog checks that its parent is alive
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _signal_on_parent_death(signal_number: int) -> bool:
    """Ask Linux to send ``signal_number`` to this process when its parent exits; False
    where that cannot be asked (another system, no prctl)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    prctl.restype = ctypes.c_int
    return prctl(_PR_SET_PDEATHSIG, signal_number, 0, 0, 0) == 0


def _watch_parent(parent_pid: int) -> None:
    """End this process as soon as its parent is no longer ``parent_pid`` (it died and this
    process was reparented). Linux's death signal already does that; the watchdog covers
    other systems and the death signal's limits (it follows the thread that forked)."""
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)
        time.sleep(PARENT_POLL_S)


def _start_worker(parent_pid: int) -> None:
    """A worker's initializer: die with the parent, then pin torch's threads."""
    _signal_on_parent_death(signal.SIGKILL)  # nothing to clean up: results go to the parent
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="qkov-parent-watchdog",
                     daemon=True).start()
    torch.set_num_threads(pinned_threads())


def map_in_processes(function, argument_tuples: list[tuple], workers: int) -> list:
    """``[function(*args) for args in argument_tuples]``, computed by up to ``workers``
    forked processes (in this process when ``workers`` is 1 or there is one call).

    ``function`` must be defined at a module's top level; forking lets the workers inherit
    module state set just before the call (see :mod:`qkov.synthetic.train`). The workers
    end when this process does, however it ends (see the module's docstring).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"parameter 'workers': expected an integer >= 1, got {workers!r}")
    if workers == 1 or len(argument_tuples) <= 1:
        return [function(*args) for args in argument_tuples]
    context = multiprocessing.get_context("fork")
    with context.Pool(min(workers, len(argument_tuples)), initializer=_start_worker,
                      initargs=(os.getpid(),)) as pool:
        return pool.starmap(function, argument_tuples, chunksize=1)
