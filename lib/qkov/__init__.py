"""qkov: the shared library of the companion to "Faster Query-Key Learning Sharpens
Attention in Self-Attention Models" (Vashisht and Ramaswamy, ICML 2026). It computes and
draws the figures and needs only its runtime dependencies; running notebooks, the pipeline,
sweeps and records are in ``qkov_tools``, the book's Sphinx extension in ``book/_ext/``.

Modules by layer, lowest first (a module imports only from layers below its own;
``tests/test_project.py`` checks it, and that this list names every module):

1. ``circuits`` (the four parameterizations, which parameters are QK or OV), ``seeding``
   (every random generator), ``processes`` (runs spread over worker processes that end
   with their parent), ``spec`` (a figure's specification), ``stats`` (intervals over
   seeds and their formatting), ``tables`` (tables as data: CSV, and the tables notebooks
   print); then, each on the one before, ``artifacts`` (where a figure's set of files
   goes), ``provenance`` (what produced it) and ``sets`` (the set written whole);
2. ``params`` (notebook parameters: checks, typed figure parameters, a run's cost and
   where it writes, before any work);
3. ``theory``, ``theory.reduced`` (the reduced dynamics, closed forms), ``synthetic``,
   ``synthetic.tasks`` (the synthetic task's data, with or without the query-token
   shortcut), ``synthetic.authors`` (what the authors' released notebooks show for Figs. 2
   and 3, quoted), ``plotting`` (house style, drawing,
   publishing a figure's files), ``language``, ``language.batches`` and
   ``language.tokenizers`` (token batches; tokenizers trained offline),
   ``language.sources`` (the real data fetched from package registries: what, where, its
   digests);
4. ``theory.stylized`` (full matrices whose gradient flow is the reduced dynamics),
   ``synthetic.models`` (the task's one-layer attention models and their ensembles),
   ``language.models`` (the decoder), ``language.metrics`` (attention rollout, ERASER),
   ``language.agreement`` (the synthetic agreement task), ``language.data`` (the real
   datasets' loaders);
5. ``synthetic.train`` (training many models as one batched computation),
   ``synthetic.metrics`` (measuring them), ``language.train``, ``language.corpus``
   (agreement examples parsed from real English; spaCy only while building),
   ``language.ratings`` (human-rated sentences and words, the proxy for HateXplain);
6. ``synthetic.trajectories`` (measuring runs during training: the runs one figure writes
   and others read), ``language.pipelines`` (the real-data figures' shared steps),
   ``language.comparison`` (learning-rate conditions on agreement tasks: setups, tables,
   drawing pieces);
7. ``figures`` and ``figures.<module>``: one module per figure of the book, each with its
   ``SPEC`` (``figures.paper_fig2``, ...).
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
