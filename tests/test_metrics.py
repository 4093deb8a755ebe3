"""Metrics of Figs. 2 and 3."""

import numpy as np
import pytest
import torch

from qkov.circuits import effective
from qkov.synthetic import metrics, models, tasks
from qkov.synthetic import train as T


@pytest.fixture(scope="module")
def held_out():
    return metrics.held_out_batches(1234, 64, 20)


def test_fixed_attention_puts_alpha_on_distinct_tokens(held_out):
    spec = models.ModelConfig("CACO", fixed_alpha=0.3)
    p = models.init_parameters(spec, torch.Generator().manual_seed(0))
    result = metrics.evaluate(p, spec, held_out)
    assert np.allclose(result.attention, 0.3, atol=1e-6)


def test_heatmap_is_a_percentage_table(held_out):
    spec = models.ModelConfig("CACO")
    p = models.init_parameters(spec, torch.Generator().manual_seed(0))
    result = metrics.evaluate(p, spec, held_out)
    h = result.heatmap()
    assert h.shape == (5, 5) and h.sum() == pytest.approx(100.0)
    # untrained: probability ~1/50 (bottom row), attention near its uniform share
    assert h[0].sum() == pytest.approx(100.0)
    assert 0 < result.accuracy <= 1 and result.loss == pytest.approx(np.log(50), abs=0.2)
    mean, std = metrics.heatmap_mean_std([h, 2 * h])
    assert np.allclose(mean, 1.5 * h) and np.allclose(std, 0.5 * h)


def test_heatmap_bins_put_certainty_in_the_top_corner():
    ev = metrics.Evaluation(np.array([1.0, 0.1]), np.array([1.0, 0.1]), 0.0, 1.0,
                            np.array([0.1, -0.1]))
    h = ev.heatmap()
    assert h[4, 4] == 50 and h[0, 0] == 50


def _loss_float64(p, spec, batch, alpha):
    """Cross-entropy under fixed attention ``alpha``, straight from the model, in float64."""
    p64 = {k: v.double() for k, v in p.items()}
    logits, _ = models.count_logits(p64, batch.counts.double(), batch.classes, alpha)
    return torch.nn.functional.cross_entropy(logits, batch.targets).item()


@pytest.mark.parametrize("parameterization, seed, alpha", [("CACO", 1, 0.4), ("CAFO", 2, 0.8)])
def test_sharpening_probe_matches_the_model_in_float64(held_out, parameterization, seed, alpha):
    spec = models.ModelConfig(parameterization, ov_bias=parameterization == "CACO",
                            fixed_alpha=alpha)
    p = models.init_parameters(spec, torch.Generator().manual_seed(seed))
    d = 0.005
    here, there = (_loss_float64(p, spec, held_out, a) for a in (alpha, alpha + d))
    loss, pressure = metrics.SharpeningProbe(held_out, chunk=256)(p, alpha, d)
    assert loss == pytest.approx(here, rel=1e-6)
    # The float32 difference of the two mean losses was off by parts in a thousand here.
    assert pressure == pytest.approx((here - there) / d, rel=1e-5, abs=1e-7)
    # Stacked members with their own alphas give each member's own values.
    stacked = {"W_OV": torch.stack([effective(p)[1]] * 2), "b": torch.stack([p["b"]] * 2)}
    both = metrics.loss_sensitivity(stacked, held_out, np.array([alpha, 1.0]), d)
    assert both[0] == pytest.approx([loss, pressure], rel=1e-6)
    assert both[1, 1] == 0.0 and both[1, 0] == pytest.approx(
        _loss_float64(p, spec, held_out, 1.0), rel=1e-6)


def test_trained_ov_circuit_feels_pressure_to_sharpen(held_out):
    config = T.RunConfig("ov", models.ModelConfig("CACO", ov_bias=True, fixed_alpha=0.4), 1234,
                         epochs=2, batches_per_epoch=100, lr_ov=1.0, per_class_batches=True)
    result = T.train([config], progress=False)[0]
    loss, pressure = metrics.loss_sensitivity(result.params, held_out, 0.4)
    assert loss < np.log(50) and pressure > 0
    assert metrics.loss_sensitivity(result.params, held_out, 1.0)[1] == 0.0


def test_separability_on_a_hand_made_sequence():
    # Class 0: distinct tokens 10-19. Tokens 0 (x2), 5 (x1), 10 (x1), 11 (x2) are present.
    counts = torch.zeros(1, tasks.VOCAB)
    counts[0, [0, 5, 10, 11]] = torch.tensor([2.0, 1.0, 1.0, 2.0])
    attention = torch.zeros(1, tasks.VOCAB)  # mass per token, shared by its positions
    attention[0, [0, 5, 10, 11]] = torch.tensor([0.2, 0.1, 0.3, 0.4])
    # per position: token 0 -> 0.1, 5 -> 0.1, 10 -> 0.3, 11 -> 0.2; max distinct 0.3 - min common 0.1
    value = metrics.separability(attention, counts, torch.tensor([0]))
    assert value.item() == pytest.approx(0.2)
    assert torch.isnan(metrics.separability(attention, counts, torch.tensor([1]))).all()


def test_class_identifying_attention_adds_the_query_token():
    attention = torch.zeros(2, tasks.VOCAB)
    attention[:, 5] = 0.25  # query token of class 0
    attention[:, 6] = 0.5  # query token of class 1
    attention[:, 12] = 0.25  # a distinct token of class 0
    value = metrics.attention_on_class_identifying(attention, torch.tensor([0, 1]))
    assert value.tolist() == pytest.approx([0.5, 0.5])


def test_batched_measures_equal_one_model_at_a_time(held_out):
    specs = [models.ModelConfig("CACO"), models.ModelConfig("FAFO", qk_init="default")]
    ensemble = models.Ensemble(specs, [torch.Generator().manual_seed(s) for s in (1, 2)])
    ensemble.params["W_K"][0, :, 10:] += 30.0  # CACO: all queries attend to tokens 10-49
    batched = metrics.learned_attention_measures(ensemble.circuits(), held_out.counts,
                                                 held_out.classes)
    for k, spec in enumerate(specs):
        one = metrics.evaluate(ensemble.member(k), spec, held_out)
        _, attention = models.count_logits(ensemble.member(k), held_out.counts,
                                           held_out.classes)
        identifying = metrics.attention_on_class_identifying(attention, held_out.classes)
        assert batched[k] == pytest.approx([one.loss, one.attention.mean(),
                                            identifying.mean().item()], rel=1e-5)
    assert batched[0, 1] > 0.9 and batched[1, 1] < 0.5  # the two models differ


def test_fixed_attention_without_distinct_tokens_is_uniform_for_every_alpha():
    from qkov.synthetic import models

    counts = torch.zeros(2, 50)
    counts[0, [0, 3, 5]] = torch.tensor([2.0, 1.0, 1.0])  # common tokens only
    counts[1, [0, 20, 21]] = torch.tensor([1.0, 2.0, 1.0])  # class 1: two distinct tokens
    classes = torch.tensor([1, 1])
    for alpha in (0.0, 0.3, 1.0):
        a = models.fixed_attention(counts, classes, alpha)
        assert torch.equal(a[0], counts[0] / 4)
        assert a[1, 20] + a[1, 21] == pytest.approx(alpha) and a[1, 0] == pytest.approx(1 - alpha)
