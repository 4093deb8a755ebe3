"""The compiled training step and token counting (qkov.synthetic.fused) against the eager
PyTorch path: the same models to float32 rounding for every parameterization, the same data
exactly, and a clear fallback where no C compiler is found."""

import platform
import shutil
import warnings

import numpy as np
import pytest
import torch

from qkov.circuits import PARAMETERIZATIONS
from qkov.synthetic import fused, tasks
from qkov.synthetic import models as M
from qkov.synthetic import train as T

needs_compiler = pytest.mark.skipif(not fused.available(),
                                    reason="the compiled step could not be built here")


def ordered(specs):
    return [specs[i] for i in M.ensemble_order(specs)]


LEARNED = ordered([M.ModelSpec(p, ov_bias=bias, qk_init=init, ov_init=init)
                   for p in PARAMETERIZATIONS for bias in (False, True)
                   for init in ("default", "identity")])
FIXED = ordered([M.ModelSpec(p, ov_bias=bias, fixed_alpha=alpha)
                 for p in ("CACO", "CAFO") for bias in (False, True) for alpha in (0.0, 0.55, 1.0)])


def test_the_kernel_is_compiled_for_the_tasks_sizes():
    assert (fused.VOCAB, fused.N_CLASSES) == (tasks.VOCAB, tasks.N_CLASSES)


def test_the_compiled_step_is_used_where_a_compiler_is():
    """Where the machine has a C compiler (as `make` expects), training must not quietly
    fall back to the slower eager step."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler on this machine")
    assert fused.available(), fused._library()
    assert M.Ensemble([M.ModelSpec("CACO")], [torch.Generator().manual_seed(0)]).fused


def twins(specs):
    generators = lambda: [torch.Generator().manual_seed(i) for i in range(len(specs))]  # noqa: E731
    compiled, eager = M.Ensemble(specs, generators()), M.Ensemble(specs, generators())
    eager.fused = False
    return compiled, eager


@needs_compiler
@pytest.mark.parametrize("specs", [LEARNED, FIXED], ids=["all-four", "fixed-attention"])
@pytest.mark.parametrize("shared_ov_rate", [False, True], ids=["ov-rate-each", "ov-rate-one"])
def test_compiled_and_eager_steps_train_the_same_models(specs, shared_ov_rate):
    """300 steps on the trainer's per-stream data (three streams, members spread over them):
    losses and parameters of every member agree to float32 rounding."""
    train_both_ways(specs, shared_ov_rate)


@pytest.mark.skipif(platform.machine() != "x86_64" or not fused.available(),
                    reason="builds the x86 variant without AVX-512")
def test_the_build_without_avx512_computes_the_same(monkeypatch, tmp_path):
    """A CPU without AVX-512 gets 8-wide vectors and the portable exp and row tails: build
    that variant here (-mno-avx512f) and check it as the native one is checked."""
    monkeypatch.setattr(fused, "FLAGS", (*fused.FLAGS, "-mno-avx512f"))
    monkeypatch.setenv("QKOV_CACHE_DIR", str(tmp_path))
    fused._library.cache_clear()
    try:
        assert fused.available() and "-mno-avx512f" in fused._flags()
        for specs in (LEARNED, FIXED):
            train_both_ways(specs, False, steps=100)
        test_compiled_token_counts_equal_the_eager_ones(64, False)
        test_compiled_and_eager_sharpening_probes_agree()
    finally:
        fused._library.cache_clear()


def train_both_ways(specs, shared_ov_rate, steps=300):
    compiled, eager = twins(specs)
    E = len(specs)
    streams = [tasks.DataStream(s, 64, 32) for s in (1, 2, 3)]
    member_stream = torch.arange(E) % 3
    lr_qk = torch.linspace(0.05, 2.0, E)
    lr_ov = 0.3 if shared_ov_rate else torch.linspace(0.5, 0.05, E)
    for t in range(steps):
        drawn = [s.batch_at(t) for s in streams]
        batch = M.StreamBatch.from_counts(torch.stack([d.counts for d in drawn]),
                                          torch.stack([d.classes for d in drawn]),
                                          member_stream, compiled.fixed)
        ours = M.mean_losses(compiled.step(batch, lr_qk, lr_ov))
        theirs = M.mean_losses(eager.step(batch, lr_qk, lr_ov))
        assert torch.allclose(ours, theirs, rtol=0, atol=2e-5), t
    if steps >= 300:  # they learned (tiny factorized inits sit near their saddle longer)
        assert ours.mean() < np.log(tasks.VOCAB) - 1
    for i, spec in enumerate(specs):
        for k, v in eager.member(i).items():
            assert torch.allclose(compiled.member(i)[k], v, rtol=1e-4, atol=2e-6), (spec, k)


@needs_compiler
def test_the_compiled_step_reads_each_members_own_stream():
    """A StreamBatch's member_stream sends each member to its stream: the same as laying the
    data out per member."""
    specs = ordered([M.ModelSpec("FAFO"), M.ModelSpec("CACO", ov_bias=True)])
    by_stream, laid_out = twins(specs)
    laid_out.fused = True
    g = torch.Generator().manual_seed(4)
    for _ in range(20):
        a, b = tasks.sample_counts(g, 32, 64), tasks.sample_counts(g, 32, 64)
        counts, classes = torch.stack([a.counts, b.counts]), torch.stack([a.classes, b.classes])
        p1 = by_stream.step(M.StreamBatch.from_counts(counts, classes, torch.tensor([1, 0]),
                                                      False), torch.ones(2), 0.5)
        p2 = laid_out.step(laid_out.batch(counts.flip(0), classes.flip(0)), torch.ones(2), 0.5)
        assert torch.equal(p1, p2)


@needs_compiler
@pytest.mark.parametrize("T_, per_class", [(64, False), (128, False), (3, False), (9, True)])
def test_compiled_token_counts_equal_the_eager_ones(T_, per_class):
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    ours = tasks._draw_counts(g1, 8, T_, per_class, repeats=5)
    theirs = tasks._counts(*tasks._draw(g2, 8, T_, per_class, repeats=5))
    assert torch.equal(ours.classes, theirs.classes)
    assert torch.equal(ours.counts, theirs.counts)
    assert (ours.counts.sum(1) == T_ - 1).all()
    # the generator was read the same way: the streams go on together
    assert torch.equal(torch.randint(99, (4,), generator=g1), torch.randint(99, (4,), generator=g2))


@needs_compiler
def test_training_with_and_without_the_compiled_step(monkeypatch):
    """The trainer end to end, fixed and learned attention, per-class batches, a QK ramp:
    epoch losses agree to float32 rounding."""
    runs = [T.RunConfig("fafo", M.ModelSpec("FAFO"), 1, 2, 60, lr_qk=0.5, qk_ramp=(1, 3)),
            T.RunConfig("caco", M.ModelSpec("CACO", ov_bias=True), 2, 3, 40, T=128),
            T.RunConfig("fixed", M.ModelSpec("CAFO", fixed_alpha=0.7), 1, 2, 50,
                        batch_size=8, per_class_batches=True)]
    compiled = T.train(runs, progress=False)
    monkeypatch.setattr(M.fused, "available", lambda: False)
    eager = T.train(runs, progress=False)
    for ours, theirs in zip(compiled, eager):
        assert np.allclose(ours.epoch_losses, theirs.epoch_losses, rtol=0, atol=1e-5)


def test_without_a_compiler_training_says_why_and_takes_the_eager_step(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "no-such-compiler-qkov")
    monkeypatch.setenv("QKOV_CACHE_DIR", str(tmp_path))
    fused._library.cache_clear()
    fused._warn_once.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="eager step.*no C compiler 'no-such-compiler"):
            results = T.train([T.RunConfig("r", M.ModelSpec("FACO"), 1, 1, 20)],
                              progress=False)
        assert np.isfinite(results[0].final_loss)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once, not at every ensemble
            M.Ensemble([M.ModelSpec("CACO")], [torch.Generator()])
        assert not list(tmp_path.iterdir())  # nothing half-built left behind
    finally:
        fused._library.cache_clear()
        fused._warn_once.cache_clear()


def test_the_switch_turns_the_compiled_step_off_quietly(monkeypatch):
    monkeypatch.setenv(fused.ENV_SWITCH, "0")
    fused._library.cache_clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert not fused.available()
    finally:
        fused._library.cache_clear()


@needs_compiler
def test_a_failed_build_names_the_source_and_the_compilers_message(monkeypatch, tmp_path):
    broken = tmp_path / "fused_step.c"
    broken.write_text(fused.SOURCE.read_text() + "\nthis is not C;\n")
    monkeypatch.setattr(fused, "SOURCE", broken)
    monkeypatch.setenv("QKOV_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(fused.FusedStepUnavailable, match=r"compiling fused_step\.c failed"
                       r"(.|\n)*error"):
        fused.build()
    assert not list((tmp_path / "cache").iterdir())  # no partial library in the cache


@needs_compiler
def test_the_cached_library_is_rebuilt_when_its_source_changes(monkeypatch, tmp_path):
    source = tmp_path / "fused_step.c"
    source.write_text(fused.SOURCE.read_text())
    monkeypatch.setattr(fused, "SOURCE", source)
    monkeypatch.setenv("QKOV_CACHE_DIR", str(tmp_path / "cache"))
    first = fused.build()
    assert first.exists() and fused.build() == first
    source.write_text(source.read_text() + "\n/* changed */\n")
    assert fused.library_path() != first


def test_bad_tensors_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="'classes' must be a contiguous CPU torch.int64"):
        fused._pointer(torch.zeros(3), torch.int64, "classes")


@needs_compiler
def test_compiled_and_eager_sharpening_probes_agree():
    """Fig. 3's per-epoch measurement: the compiled probe against the batched PyTorch one,
    for alphas with and without a sharper attention (alpha + d > 1 has pressure 0)."""
    from qkov.synthetic import metrics

    held_out = metrics.held_out_batches(3, 64, 20, per_class=True)
    g = torch.Generator().manual_seed(1)
    circuits = {"W_OV": torch.randn(5, 50, 50, generator=g) * 0.5,
                "b": torch.randn(5, 50, generator=g) * 0.1}
    alphas = np.array([0.1, 0.4, 0.8, 0.997, 1.0])
    probe = metrics.SharpeningProbe(held_out, chunk=300)
    ours = probe(circuits, alphas)
    with fused.turned_off():
        theirs = probe(circuits, alphas)
    assert np.allclose(ours, theirs, rtol=1e-6, atol=1e-9)
    assert (ours[:3, 1] != 0).all() and (ours[3:, 1] == 0).all()


@needs_compiler
@pytest.mark.parametrize("broken, message", [
    ("member_stream", "member_stream must index the 1 streams"),
    ("targets", "every target must be a token"),
    ("classes", "every class must be in"),
])
def test_bad_indices_are_refused_before_anything_changes(broken, message):
    """The compiled step reads and writes where indices point: a bad one is refused by name,
    and no member has moved."""
    specs = ordered([M.ModelSpec("FAFO"), M.ModelSpec("CACO")])
    ens = twins(specs)[0]
    sample = tasks.sample_counts(torch.Generator().manual_seed(0), 8, 64)
    batch = M.StreamBatch.from_counts(sample.counts[None], sample.classes[None],
                                      torch.zeros(2, dtype=torch.long), False)
    bad = {"member_stream": torch.tensor([0, 1]),
           "targets": batch.targets.clone().index_fill_(1, torch.tensor([3]), 50),
           "classes": batch.classes.clone().index_fill_(1, torch.tensor([5]), 4)}[broken]
    batch = M.StreamBatch(**{**batch.__dict__, broken: bad})
    before = {k: v.clone() for k, v in ens.params.items()}
    with pytest.raises(ValueError, match=message):
        ens.step(batch, torch.ones(2), 0.5)
    assert all(torch.equal(v, ens.params[k]) for k, v in before.items())


@needs_compiler
def test_token_counting_refuses_a_slot_outside_the_table():
    table = tasks._slot_tables()
    slots = torch.zeros(2, 5, dtype=torch.long)
    slots[1, 2] = table.shape[1]
    with pytest.raises(ValueError, match="every slot in"):
        fused.count_tokens(slots, torch.tensor([0, 1]), table, tasks.query_token(0))
