"""Metrics of Figs. 2 and 3."""

import numpy as np
import pytest
import torch

from qkov import metrics, models, tasks
from qkov import train as T


@pytest.fixture(scope="module")
def held_out():
    return metrics.held_out_batches(1234, 64, 20)


def test_fixed_attention_puts_alpha_on_distinct_tokens(held_out):
    spec = models.ModelSpec("CACO", fixed_alpha=0.3)
    p = models.init_parameters(spec, torch.Generator().manual_seed(0))
    result = metrics.evaluate(p, spec, held_out)
    assert np.allclose(result.attention, 0.3, atol=1e-6)


def test_heatmap_is_a_percentage_table(held_out):
    spec = models.ModelSpec("CACO")
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
    ev = metrics.Evaluation(np.array([1.0, 0.1]), np.array([1.0, 0.1]), 0.0, 1.0)
    h = ev.heatmap()
    assert h[4, 4] == 50 and h[0, 0] == 50


def test_fixed_attention_losses_match_the_model(held_out):
    spec = models.ModelSpec("CACO", ov_bias=True, fixed_alpha=0.4)
    p = models.init_parameters(spec, torch.Generator().manual_seed(1))
    direct = metrics.evaluate(p, spec, held_out).loss
    fast = metrics.fixed_attention_losses(p, held_out, [0.4])[0]
    assert fast == pytest.approx(direct, rel=1e-5)


def test_trained_ov_circuit_feels_pressure_to_sharpen(held_out):
    config = T.RunConfig("ov", models.ModelSpec("CACO", ov_bias=True, fixed_alpha=0.4), 1234,
                         epochs=2, batches_per_epoch=100, lr_ov=1.0, per_class_batches=True)
    result = T.train([config], progress=False)[0]
    loss, pressure = metrics.loss_sensitivity(result.params, held_out, 0.4)
    assert loss < np.log(50) and pressure > 0
    assert metrics.loss_sensitivity(result.params, held_out, 1.0)[1] == 0.0
