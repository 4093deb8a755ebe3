"""qkov: the shared library of the companion to "Faster Query-Key Learning Sharpens
Attention in Self-Attention Models" (Vashisht and Ramaswamy, ICML 2026).

Modules by layer, lowest first (a module imports only from layers below its own; the test
suite checks it):

- ``circuits`` (the four parameterizations, which parameters are QK or OV), ``seeding``
  (every random generator), ``params`` (notebook parameters: checks, typed figure
  parameters), ``processes`` (runs spread over worker processes), ``artifacts`` (output
  folders, provenance, atomic writes);
- ``theory.reduced`` (the reduced dynamics, closed forms), ``synthetic.tasks`` (the
  synthetic task's data), ``plotting`` (house style, drawing, saving a figure's files);
- ``theory.stylized`` (full matrices whose gradient flow is the reduced dynamics),
  ``synthetic.models`` (the task's one-layer attention models and their ensembles);
- ``synthetic.train`` (training many models as one batched computation),
  ``synthetic.metrics``;
- ``figures.<figure_id>``: one module per figure of the book (``figures.paper_fig2``, ...);
- ``book`` (the book's Sphinx extension), ``pipeline`` (the figure registry, executing and
  storing notebooks).

- ``language`` (beside ``synthetic``: the language tasks' data, tokenizers, models, training
  and attribution metrics), used by the ``figures.language_*`` modules.
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
