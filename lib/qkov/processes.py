"""Independent computations spread over worker processes, each on the pinned number of
torch threads (``qkov.pinned_threads``: one unless ``QKOV_THREADS`` says otherwise).

The companion's runs (a training ensemble's share, a descent of the stylized model) are
small: one process cannot spread their many tiny operations over the cores, so independent
runs go to separate processes instead. A run's result does not depend on where it ran.
"""

from __future__ import annotations

import multiprocessing

import torch

from . import pinned_threads


def _pinned_threads() -> None:
    torch.set_num_threads(pinned_threads())


def map_in_processes(function, argument_tuples: list[tuple], workers: int) -> list:
    """``[function(*args) for args in argument_tuples]``, computed by up to ``workers``
    forked processes (in this process when ``workers`` is 1 or there is one call).

    ``function`` must be defined at a module's top level; forking lets the workers inherit
    module state set just before the call (see :mod:`qkov.synthetic.train`).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"parameter 'workers': expected an integer >= 1, got {workers!r}")
    if workers == 1 or len(argument_tuples) <= 1:
        return [function(*args) for args in argument_tuples]
    context = multiprocessing.get_context("fork")
    with context.Pool(min(workers, len(argument_tuples)), initializer=_pinned_threads) as pool:
        return pool.starmap(function, argument_tuples, chunksize=1)
