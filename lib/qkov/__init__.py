"""qkov: the library of the companion to "Faster Query-Key Learning Sharpens Attention in
Self-Attention Models" (Vashisht and Ramaswamy, ICML 2026); its layers are import-linter's
contract in ``pyproject.toml``, the tooling ``qkov_tools``, the book's extensions ``book/_ext/``.
"""

import os
import sys
from importlib.metadata import PackageNotFoundError, version

# What decides rounding beyond the code, pinned at `import qkov`, before torch computes:
# MKL's "AVX2,STRICT" path and PyTorch's own AVX2 kernels give the same bits on every CPU
# with AVX2 (an AVX-512 CPU would otherwise use wider vectors, and round otherwise), and one
# intra-op thread per process (QKOV_THREADS) splits reductions the same way on every machine.
# A value set beforehand wins (the tests set ATEN_CPU_CAPABILITY=default for the scalar kernels).
MKL_CBWR = "AVX2,STRICT"
ATEN_CPU_CAPABILITY = "avx2"
THREADS_ENV = "QKOV_THREADS"


def cpu_flags() -> list[str]:
    """The CPU's feature flags (Linux's /proc/cpuinfo; none where it cannot tell)."""
    try:
        with open("/proc/cpuinfo") as info:
            return next((line.split(":", 1)[1].split() for line in info
                         if line.startswith("flags")), [])
    except OSError:
        return []


def has_avx2() -> bool:
    """Whether this CPU has AVX2 and FMA (False where it cannot tell)."""
    flags = cpu_flags()
    return "avx2" in flags and "fma" in flags


def keep_freed_memory() -> None:
    """Ask glibc's malloc to keep freed blocks for reuse instead of giving them back to the
    system. By default it returns every block over 32 MiB at once: the language trainers'
    float64 stacks are freed and allocated again at every step, and the kernel's zeroing of
    fresh pages took a third of their CPU time. Speed only: no number changes. Elsewhere than
    glibc (macOS, musl) nothing is done."""
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    trim_threshold, top_pad, mmap_threshold = -1, -2, -3  # glibc's <malloc.h> M_* parameters
    mallopt(mmap_threshold, 1 << 30)  # blocks under 1 GiB come from the heap
    mallopt(trim_threshold, 1 << 30)  # the heap keeps up to 1 GiB free at its top
    mallopt(top_pad, 256 << 20)  # and grows 256 MiB at a time


def pinned_threads() -> int:
    threads = os.environ.get(THREADS_ENV, "1")
    if not threads.isdigit() or int(threads) < 1:
        raise ValueError(f"environment variable {THREADS_ENV}: expected an integer >= 1, "
                         f"got {threads!r}")
    return int(threads)


os.environ.setdefault("MKL_CBWR", MKL_CBWR)
if has_avx2():  # else PyTorch's own choice (no CPU without AVX2 has run the tests)
    os.environ.setdefault("ATEN_CPU_CAPABILITY", ATEN_CPU_CAPABILITY)
keep_freed_memory()
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(pinned_threads())
else:
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(pinned_threads())

try:
    __version__ = version("qkov")
except PackageNotFoundError:  # a source tree, not installed
    __version__ = "0+unknown"
