"""The ensemble's SGD step as one compiled C function (``fused_step.c``), loaded with ctypes.

On the trainer's tensors (a member's batch is 32 x 50) every PyTorch operator costs more in
dispatch than in arithmetic: the eager step (:meth:`~qkov.synthetic.models.Ensemble.step_eager`)
runs about 30 of them per step however few members there are. The compiled step takes every
member through its whole step in cache with no dispatch, skipping the tokens a sequence does
not hold. It computes the same mathematics; results differ from the eager step's by
floating-point rounding (the tests compare the two). The same library counts the tokens of
sampled sequences (:func:`count_tokens`, exact).

The library is compiled with the system's C compiler (``$CC``, else cc, gcc or clang) on
first use - ``make`` does it while installing, ``python -m qkov.synthetic.fused`` by hand -
into :func:`cache_dir` (``~/.cache/qkov`` by default) under a name that hashes the source,
the flags, the compiler and the CPU (it is built for this CPU: ``-march=native``). Where it
cannot be built or loaded, the trainer says why once and takes the eager step.
``QKOV_FUSED_STEP=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("fused_step.c")
# Rounding-only liberties: reassociated sums (vectorised reductions), fused multiply-adds.
# Infinities and NaN keep their meaning (no -ffinite-math-only: absent tokens are -inf).
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fassociative-math",
         "-fno-signed-zeros", "-ffp-contract=fast", "-shared", "-fPIC")
# The synthetic task's vocabulary and classes (tasks.VOCAB and tasks.N_CLASSES; a test
# checks they agree): the kernel is compiled for them, so that its loops have fixed lengths.
VOCAB, N_CLASSES = 50, 4
ENV_SWITCH = "QKOV_FUSED_STEP"


class FusedStepUnavailable(RuntimeError):
    """The compiled step could not be built or loaded (the message says why)."""


def _flags() -> tuple[str, ...]:
    return (*FLAGS, f"-DQKOV_V={VOCAB}", f"-DQKOV_CLASSES={N_CLASSES}")


def _compiler() -> str:
    compiler = os.environ.get("CC") or next(
        (c for c in ("cc", "gcc", "clang") if shutil.which(c)), "cc")
    if shutil.which(compiler) is None:
        raise FusedStepUnavailable(f"no C compiler {compiler!r} on PATH (set $CC, or install "
                                   "one: apt-get install gcc)")
    return compiler


def _cpu_signature() -> str:
    try:
        flags = [line for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("flags")][:1]
    except OSError:
        flags = []
    return platform.machine() + "".join(flags)


def library_path() -> Path:
    """Where the library for this source, compiler and CPU is (or will be) cached."""
    compiler = _compiler()
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout.splitlines()[:1]
    except (OSError, subprocess.SubprocessError) as error:
        raise FusedStepUnavailable(f"C compiler {compiler!r} does not run: {error}") from error
    key = hashlib.sha256("\0".join([SOURCE.read_text(), " ".join(_flags()), compiler,
                                    *version, _cpu_signature()]).encode()).hexdigest()[:16]
    return cache_dir() / f"fused_step-{key}.so"


def cache_dir() -> Path:
    """``$QKOV_CACHE_DIR``, else ``$XDG_CACHE_HOME/qkov``, else ``~/.cache/qkov`` (or a
    folder in the temporary directory where there is no home)."""
    if os.environ.get("QKOV_CACHE_DIR"):
        return Path(os.environ["QKOV_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "qkov"
    try:
        return Path.home() / ".cache" / "qkov"
    except RuntimeError:  # no home directory
        return Path(tempfile.gettempdir()) / f"qkov-cache-{os.getuid()}"


def build(force: bool = False) -> Path:
    """Compile the library into the cache (atomically: concurrent builds do not clash)."""
    target = library_path()
    if target.exists() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        command = [_compiler(), *_flags(), "-o", str(built), str(SOURCE), "-lm"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as error:
            raise FusedStepUnavailable(f"compiling {SOURCE.name} failed: {error}") from error
        if done.returncode != 0:
            raise FusedStepUnavailable(f"compiling {SOURCE.name} failed ({' '.join(command)}):"
                                       f"\n{done.stderr.strip()}")
        os.replace(built, target)
    return target


@functools.cache
def _library():
    """The loaded library, or the reason it is not there (a string)."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return f"{ENV_SWITCH}=0"
    try:
        lib = ctypes.CDLL(str(build()))
    except (FusedStepUnavailable, OSError) as error:
        return str(error)
    pointer, i64, status = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    signatures = {  # name: (argument types, result type)
        "qkov_ensemble_step": ([i64, i64, i64, ctypes.c_int, i64, i64, ctypes.c_float, i64,
                                *[pointer] * 17], status),
        "qkov_work_floats": ([i64], i64),
        "qkov_count_tokens": ([i64, i64, pointer, pointer, pointer, i64, i64, i64, pointer],
                              status),
        "qkov_sharpening_probe": ([i64, i64, *[pointer] * 4, i64, pointer, pointer, i64,
                                   *[pointer] * 6], status),
        "qkov_probe_work_floats": ([i64], i64),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = arguments, result
    return lib


_turned_off = False


@contextlib.contextmanager
def turned_off():
    """Within it, :func:`available` is false: ensembles made there take the eager step
    (the benchmark measures both side by side; forked workers inherit the setting)."""
    global _turned_off
    before, _turned_off = _turned_off, True
    try:
        yield
    finally:
        _turned_off = before


def available() -> bool:
    """Whether the compiled step is used; if not, says why once (a RuntimeWarning)."""
    if _turned_off:
        return False
    lib = _library()
    if isinstance(lib, str):
        if lib != f"{ENV_SWITCH}=0":
            _warn_once(lib)
        return False
    return True


@functools.cache
def _warn_once(reason: str) -> None:
    warnings.warn(f"qkov: the compiled training step is not available, so training takes "
                  f"the slower eager step (same results up to rounding): {reason}",
                  RuntimeWarning, stacklevel=3)


def _pointer(t: torch.Tensor | None, dtype: torch.dtype, name: str) -> int | None:
    if t is None:
        return None
    if t.dtype != dtype or not t.is_contiguous() or t.device.type != "cpu":
        raise ValueError(f"fused step: {name!r} must be a contiguous CPU {dtype} tensor, got "
                         f"{t.dtype} on {t.device}, contiguous={t.is_contiguous()}")
    return t.data_ptr()


def ensemble_step(E: int, n_seq: int, n_collapsed_ov: int, fixed: bool, n_classes: int,
                  query_row0: int, scale: float, member_stream, data, data_step, fixed_alpha, classes, targets,
                  params: dict, qk_factorized, has_bias, lr_qk, lr_ov, p_target, work) -> None:
    """Call the compiled step (see ``fused_step.c`` for the arguments' meaning)."""
    f32, i64 = torch.float32, torch.int64
    status = _library().qkov_ensemble_step(
        E, n_seq, n_collapsed_ov, int(fixed), n_classes, query_row0, scale, len(data),
        _pointer(member_stream, i64, "member_stream"), _pointer(data, f32, "data"),
        _pointer(data_step, f32, "data_step"), _pointer(fixed_alpha, f32, "fixed_alpha"),
        _pointer(classes, i64, "classes"), _pointer(targets, i64, "targets"),
        *(_pointer(params.get(k), f32, k) for k in ("W_Q", "W_K", "W_V", "W_O", "b")),
        _pointer(qk_factorized, f32, "qk_factorized"), _pointer(has_bias, f32, "has_bias"),
        _pointer(lr_qk, f32, "lr_qk"), _pointer(lr_ov, f32, "lr_ov"),
        _pointer(p_target, f32, "p_target"), _pointer(work, f32, "work"))
    if status != 0:
        raise ValueError("compiled step: " + {
            -1: f"{n_classes} classes with query rows from {query_row0}: expected "
                f"{N_CLASSES} classes whose query rows are tokens of {VOCAB}",
            -2: f"member_stream must index the {len(data)} streams of the batch",
            -3: f"every target must be a token in [0, {VOCAB})",
            -4: f"every class must be in [0, {N_CLASSES})"}[status] + "; nothing was changed")


def count_tokens(slots: torch.Tensor, classes: torch.Tensor, table: torch.Tensor,
                 query_row0: int) -> torch.Tensor:
    """Token counts (R, V) of rows ``table[classes[r], slots[r]]`` plus each row's query
    token ``query_row0 + classes[r]``: what ``tasks`` computes with take and scatter_add,
    in one pass (exact: whole numbers)."""
    i64 = torch.int64
    counts = torch.empty(len(classes), VOCAB)
    if slots.dim() != 2 or len(slots) != len(classes) or table.dim() != 2:
        raise ValueError(f"count_tokens: slots (rows, L) with one class per row and a 2-D "
                         f"table expected, got slots {tuple(slots.shape)}, classes "
                         f"{tuple(classes.shape)}, table {tuple(table.shape)}")
    status = _library().qkov_count_tokens(
        slots.shape[0], slots.shape[1], _pointer(slots, i64, "slots"),
        _pointer(classes, i64, "classes"), _pointer(table, i64, "table"), table.shape[0],
        table.shape[1], query_row0, _pointer(counts, torch.float32, "counts"))
    if status != 0:
        raise ValueError(f"count_tokens: every class must be a row of the {table.shape[0]}-row "
                         f"table, every slot in [0, {table.shape[1]}) and every token (table "
                         f"entries, query tokens from {query_row0}) in [0, {VOCAB})")
    return counts


def sharpening_probe(w_ov_t, bias, alpha, a_step, off_tokens, off, step_tokens, step,
                     targets, losses, drops) -> None:
    """Add E OV circuits' summed losses and sharpening drops on n sequences of one class to
    ``losses`` and ``drops`` (float64, (E,)): see ``qkov_sharpening_probe`` in the source
    and :class:`qkov.synthetic.metrics.SharpeningProbe`, which it computes."""
    f32, i64, f64 = torch.float32, torch.int64, torch.float64
    n_off, n_step = len(off_tokens), len(step_tokens)
    work = torch.empty(_library().qkov_probe_work_floats(n_off + n_step))
    status = _library().qkov_sharpening_probe(
        len(w_ov_t), len(targets), _pointer(w_ov_t, f32, "w_ov_t"), _pointer(bias, f32, "bias"),
        _pointer(alpha, f32, "alpha"), _pointer(a_step, f32, "a_step"), n_off,
        _pointer(off_tokens, i64, "off_tokens"), _pointer(off, f32, "off"), n_step,
        _pointer(step_tokens, i64, "step_tokens"), _pointer(step, f32, "step"),
        _pointer(targets, i64, "targets"), _pointer(losses, f64, "losses"),
        _pointer(drops, f64, "drops"), _pointer(work, f32, "work"))
    if status != 0:
        raise ValueError(f"sharpening probe: tokens and targets must be in [0, {VOCAB}); "
                         "nothing was changed")


def work_floats(n_seq: int) -> int:
    return _library().qkov_work_floats(n_seq)


def main() -> int:
    """Build the library now (``make`` calls this while installing) and say where it is."""
    try:
        path = build()
    except (FusedStepUnavailable, OSError) as error:
        print(f"qkov: compiled training step not built; training will take the eager step. "
              f"Reason: {error}", file=sys.stderr)
        return 0  # not an install failure: the eager step computes the same
    print(f"qkov: compiled training step ready: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
