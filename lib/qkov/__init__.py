"""qkov: the library of the companion to "Faster Query-Key Learning Sharpens Attention in
Self-Attention Models" (Vashisht and Ramaswamy, ICML 2026); its layers are import-linter's
contract in ``pyproject.toml``, the tooling ``qkov_tools``, the book's extensions ``book/_ext/``.
"""

import os
import sys
from importlib.metadata import PackageNotFoundError, version

# What decides rounding beyond the code, pinned at `import qkov`, before torch computes:
# MKL's "AVX2,STRICT" path gives the same bits on every AVX2 CPU, and one intra-op thread
# per process (QKOV_THREADS) splits reductions the same way on every machine.
MKL_CBWR = "AVX2,STRICT"
THREADS_ENV = "QKOV_THREADS"


def pinned_threads() -> int:
    threads = os.environ.get(THREADS_ENV, "1")
    if not threads.isdigit() or int(threads) < 1:
        raise ValueError(f"environment variable {THREADS_ENV}: expected an integer >= 1, "
                         f"got {threads!r}")
    return int(threads)


os.environ.setdefault("MKL_CBWR", MKL_CBWR)
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(pinned_threads())
else:
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(pinned_threads())

try:
    __version__ = version("qkov")
except PackageNotFoundError:  # a source tree, not installed
    __version__ = "0+unknown"
