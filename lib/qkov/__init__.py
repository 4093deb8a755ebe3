"""qkov: the shared library of the companion to "Faster Query-Key Learning Sharpens
Attention in Self-Attention Models" (Vashisht and Ramaswamy, ICML 2026). It computes and
draws the figures and needs only its runtime dependencies; running notebooks, the pipeline,
sweeps and records are in ``qkov_tools``, the book's Sphinx extension in ``book/_ext/``.

Its modules are in layers, each importing only from those below its own, so that the
library reads bottom-up. The layers, with a line on what each module does, are written once:
import-linter's contract in ``pyproject.toml`` (``[tool.importlinter]``), which
``lint-imports`` and ``tests/test_project.py`` check.
"""

import os
import sys
from importlib.metadata import PackageNotFoundError, version

# What decides the rounding of a computation beyond its code, pinned before torch computes
# anything (MKL reads MKL_CBWR at its first call, OpenMP its thread count when torch starts),
# however Python was started: importing qkov is the first thing every notebook, test and
# pipeline step does. MKL picks its matrix-product code by CPU vendor and model;
# "AVX2,STRICT" gives the same bits on every AVX2 CPU, Intel or AMD, at native speed here.
# One intra-op thread per process (QKOV_THREADS to change it): a run's reductions are then
# split the same way on every machine, and training spreads over processes instead.
MKL_CBWR = "AVX2,STRICT"
THREADS_ENV = "QKOV_THREADS"


def pinned_threads() -> int:
    """The intra-op threads of every computing process: ``$QKOV_THREADS``, default 1."""
    threads = os.environ.get(THREADS_ENV, "1")
    if not threads.isdigit() or int(threads) < 1:
        raise ValueError(f"environment variable {THREADS_ENV}: expected an integer >= 1, "
                         f"got {threads!r}")
    return int(threads)


def _pin_numerics() -> None:
    threads = pinned_threads()
    os.environ.setdefault("MKL_CBWR", MKL_CBWR)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    else:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)


_pin_numerics()

try:
    __version__ = version("qkov")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"
