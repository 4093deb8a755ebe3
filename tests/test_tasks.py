"""The synthetic next-token task: layout, class distributions, streams."""

import pytest
import torch
from scipy import stats

from qkov.synthetic import tasks


def test_class_distributions_follow_the_spec():
    p = tasks.class_distributions()
    assert p.shape == (4, 50) and torch.allclose(p.sum(1), torch.ones(4, dtype=p.dtype))
    for c in range(4):
        weights = p[c] * 15.5
        assert torch.allclose(weights[:10], torch.ones(10, dtype=p.dtype))
        own = list(tasks.distinct_tokens(c))
        assert own == list(range(10 * (c + 1), 10 * (c + 2)))
        assert torch.allclose(weights[own], torch.arange(1, 11, dtype=p.dtype) / 10)
        others = [v for v in range(10, 50) if v not in own]
        assert torch.all(p[c, others] == 0)


def test_sequence_layout():
    batch = tasks.sample_tokens(torch.Generator().manual_seed(0), 64, 20)
    assert batch.tokens.shape == (64, 20)
    assert torch.equal(batch.tokens[:, -2], 5 + batch.classes)  # the query token
    assert torch.equal(batch.targets, 1 + batch.classes)
    assert batch.inputs.shape == (64, 19)
    counts = batch.to_counts().counts
    assert torch.all(counts.sum(1) == 19)


def test_sampled_counts_fit_the_class_distribution():
    """Chi-square goodness of fit of pooled context tokens, per class (fixed seed)."""
    batch = tasks.sample_tokens(torch.Generator().manual_seed(1234), 4000, 64)
    context = batch.tokens[:, :-2]
    for c in range(4):
        tokens = context[batch.classes == c].flatten()
        support = torch.nonzero(tasks.class_distributions()[c]).flatten()
        observed = torch.bincount(tokens, minlength=50)
        assert observed.sum() == observed[support].sum(), "a token outside the class"
        expected = tasks.class_distributions()[c][support] * len(tokens)
        chi2 = stats.chisquare(observed[support].numpy(), expected.numpy())
        assert chi2.pvalue > 1e-3, (c, chi2)
    # classes are uniform
    assert stats.chisquare(torch.bincount(batch.classes, minlength=4).numpy()).pvalue > 1e-3


def test_per_class_batches_hold_every_class_equally():
    batch = tasks.sample_counts(torch.Generator().manual_seed(0), 32, 64, per_class=True)
    assert torch.equal(torch.bincount(batch.classes), torch.full((4,), 32))


@pytest.mark.parametrize("per_class, pinned", [
    (False, {0: 29429, 77: 28626, 149: 28727}), (True, {0: 109725, 77: 109375, 149: 112659})])
def test_streams_are_reproducible_and_independent_of_how_they_are_read(per_class, pinned):
    a, b = tasks.DataStream(7, 64, 32, per_class), tasks.DataStream(7, 64, 32, per_class)
    one_by_one = [a.batch_at(k) for k in range(150)]
    by_chunk = [b.chunk_at(k) for k in range(0, 150, tasks.DataStream.CHUNK)]
    rows = one_by_one[0].counts.shape[0]
    counts = torch.cat([c.counts for c in by_chunk]).view(150, rows, 50)
    classes = torch.cat([c.classes for c in by_chunk]).view(150, rows)
    for k, batch in enumerate(one_by_one):
        assert torch.equal(batch.counts, counts[k]) and torch.equal(batch.classes, classes[k])
    # pinned sums (token id x count) of the stream since qkov 0.1.0: stored results use it
    token = torch.arange(50.0)
    assert {k: int((one_by_one[k].counts * token).sum()) for k in pinned} == pinned
    other = tasks.DataStream(8, 64, 32, per_class)
    assert not torch.equal(other.batch_at(0).counts, one_by_one[0].counts)
    with pytest.raises(IndexError, match="already discarded"):
        a.batch_at(0)
    with pytest.raises(ValueError, match="multiples of 50"):
        b.chunk_at(151)


def test_counts_are_the_tokens_of_the_same_draws():
    dense = tasks.sample_tokens(torch.Generator().manual_seed(3), 40, 64)
    counts = tasks.sample_counts(torch.Generator().manual_seed(3), 40, 64)
    assert torch.equal(counts.classes, dense.classes)
    assert torch.equal(counts.counts, dense.to_counts().counts)


def test_bad_length_is_refused():
    with pytest.raises(ValueError, match="parameter 'T'"):
        tasks.sample_tokens(torch.Generator(), 4, 2)


def test_the_context_cut_keeps_the_query_token_out_of_the_context_and_the_counts():
    dense = tasks.sample_tokens(torch.Generator().manual_seed(5), 4000, 64, cut="context")
    context = dense.tokens[:, :-2]
    queries = tasks.query_token(dense.classes)
    assert not (context == queries[:, None]).any()  # never drawn into the context
    assert (dense.tokens[:, -2] == queries).all()  # but still the query
    counts = tasks.sample_counts(torch.Generator().manual_seed(5), 4000, 64, cut="context")
    assert torch.equal(counts.counts, dense.to_counts("context").counts)
    assert (counts.counts.sum(1) == 62).all()  # the T - 2 context tokens, not the query
    assert (counts.counts.gather(1, queries[:, None]) == 0).all()
    # the other tokens keep their relative weights: the class distribution renormalised
    weights = tasks.class_distributions()[0].clone()
    weights[tasks.query_token(0)] = 0
    mine = counts.counts[counts.classes == 0].sum(0)
    assert torch.allclose(mine / mine.sum(), (weights / weights.sum()).float(), atol=4e-3)


def test_the_self_cut_is_the_same_data_without_the_querys_own_position():
    a = tasks.DataStream(7, 64, 32).chunk_at(0)
    b = tasks.DataStream(7, 64, 32, cut="self").chunk_at(0)
    assert torch.equal(a.classes, b.classes)
    queries = tasks.query_token(a.classes)
    own = torch.zeros_like(a.counts).scatter_(1, queries[:, None], 1.0)
    assert torch.equal(a.counts - own, b.counts)  # the very same contexts, one count less
    c = tasks.DataStream(7, 64, 32, cut="context").chunk_at(0)
    assert torch.equal(a.classes, c.classes) and not torch.equal(b.counts, c.counts)
    with pytest.raises(ValueError, match="parameter 'cut'"):
        tasks.DataStream(7, 64, 32, cut="half")


@pytest.mark.parametrize("cut, share", [("none", 5.5 / 15.5 * 62 / 63), ("self", 5.5 / 15.5),
                                        ("context", 5.5 / 14.5)])
def test_uniform_attention_puts_the_stated_share_on_the_distinct_tokens(cut, share):
    """The share against a measurement: attention that is uniform over the attended
    positions (W_QK = 0) on many sequences."""
    from qkov.synthetic import metrics, models

    batch = tasks.sample_counts(torch.Generator().manual_seed(9), 20_000, 64, cut=cut)
    params = models.init_parameters(models.ModelConfig("CACO", qk_init="identity",
                                                     init_scale=0.0), torch.Generator())
    _, attention = models.count_logits(params, batch.counts, batch.classes)
    measured = metrics.attention_on_distinct(attention, batch.classes).mean().item()
    assert tasks.uniform_distinct_share(cut, 64) == pytest.approx(share)
    assert measured == pytest.approx(share, abs=0.002)
