"""The stylized full-matrix model and the identities the theory chapter states about it."""


import numpy as np
import pytest
import torch

from qkov.checks import ParameterError
from qkov.circuits import effective
from qkov.theory import reduced
from qkov.theory import stylized as S

PAPER = S.StylizedModel(reduced.Setting(m=5, n=50, b=50, M=20))
SMALL = S.StylizedModel(reduced.Setting(m=2, n=7, b=3.5, M=4))
POINTS = [(0.0, 0.0), (3.0, 0.5), (40.0, 2.0), (80.0, -1.0), (12.0, 6.0)]


def test_directions_have_the_norms_that_give_the_odes_constants():
    for model in (PAPER, SMALL):
        M = model.M
        assert float((model.direction_ov ** 2).sum()) == pytest.approx(M - 1, rel=1e-14)
        assert float((model.direction_qk ** 2).sum()) == pytest.approx(M, rel=1e-14)
        assert model.s**-2 == pytest.approx(model.setting.b, rel=1e-14)


@pytest.mark.parametrize("model", [PAPER, SMALL], ids=["paper", "small"])
def test_on_the_set_loss_and_attention_are_the_reduced_models(model):
    for mu_ov, mu_qk in POINTS:
        p = model.on_set(mu_ov, mu_qk)
        assert model.coordinates(p) == pytest.approx((mu_ov, mu_qk), rel=1e-13, abs=1e-13)
        assert float(model.loss(p)) == pytest.approx(
            float(reduced.loss(mu_ov, mu_qk, model.setting)), rel=1e-12)
        assert model.attention_mass(p) == pytest.approx(
            float(reduced.attention_mass(mu_qk, model.setting)), rel=1e-12)


@pytest.mark.parametrize("model", [PAPER, SMALL], ids=["paper", "small"])
def test_full_matrix_gradients_are_the_odes_right_hand_sides(model):
    """Autograd on W_QK, W_OV: the gradient is parallel to (V, U) and -eta grad, read in the
    coordinates (mu_ov, mu_qk), is the paper's right-hand side."""
    eta_ov, eta_qk = 0.7, 3.0
    u, v = model.direction_ov, model.direction_qk
    # rel 1e-6: where the loss is ~1e-8, softmax probabilities next to 1 carry ~8 digits;
    # points with a smaller loss carry too few to compare.
    for mu_ov, mu_qk in POINTS:
        if reduced.loss(mu_ov, mu_qk, model.setting) < 1e-8:
            continue
        _, g = S.gradients(model, model.on_set(mu_ov, mu_qk))
        along_ov = float((g["W_OV"] * u).sum()) / (model.M - 1)
        along_qk = float((g["W_QK"] * v).sum()) / model.M
        assert torch.linalg.norm(g["W_OV"] - along_ov * u) <= 1e-6 * torch.linalg.norm(g["W_OV"])
        assert torch.linalg.norm(g["W_QK"] - along_qk * v) <= 1e-6 * torch.linalg.norm(g["W_QK"])
        d_ov, d_qk = reduced.rhs(mu_ov, mu_qk, model.setting, eta_ov, eta_qk)
        assert model.s * -eta_ov * along_ov == pytest.approx(d_ov, rel=1e-6, abs=1e-300)
        assert model.s**2 * -eta_qk * along_qk == pytest.approx(d_qk, rel=1e-6, abs=1e-300)


def test_full_batch_descent_follows_the_ode_and_keeps_the_invariant():
    run = S.descend(SMALL, "CACO", 1.0, 2.0, target_loss=0.05, step_fraction=2e-4)
    tr = reduced.integrate_until(SMALL.setting, 1.0, 2.0, 0.05)
    ode = tr.sample(np.minimum(run.t, tr.tau[-1]))
    assert run.distance.max() < 1e-12
    for name in ("mu_ov", "mu_qk"):
        assert np.max(np.abs(getattr(run, name) - ode[name])) < 1e-2 * np.max(ode[name])
    for name in ("alpha", "loss"):
        assert np.max(np.abs(getattr(run, name) / ode[name] - 1)) < 1e-2
    # The conserved relation of the closed form holds along the descent: its drift is small
    # against the size of its terms (kappa mu_ov^2).
    drift = reduced.invariant(run.mu_ov, run.mu_qk, SMALL.setting, 2.0)
    size = np.abs(reduced.invariant(run.mu_ov, 0.0, SMALL.setting, 2.0)).max()
    assert np.abs(drift).max() < 1e-3 * size


def test_minibatch_descent_leaves_the_set_but_stays_near_the_ode():
    run = S.descend(SMALL, "CACO", 1.0, 2.0, target_loss=0.05, batch_size=2, seed=3)
    tr = reduced.integrate_until(SMALL.setting, 1.0, 2.0, 0.05)
    ode = tr.sample(np.minimum(run.t, tr.tau[-1]))
    assert run.distance[-1] > 1e-6  # random batches break the symmetry ...
    assert np.max(np.abs(run.alpha / ode["alpha"] - 1)) < 0.1  # ... a little


def random_factors(model, seed):
    g = torch.Generator().manual_seed(seed)
    d, M = model.d, model.M
    shapes = {"W_Q": (d, d), "W_K": (d, d), "W_O": (M, d), "W_V": (d, d)}
    return {k: 0.5 * torch.randn(*shape, generator=g, dtype=S.DTYPE) for k, shape in shapes.items()}


def conserved(p):
    return (p["W_O"].T @ p["W_O"] - p["W_V"] @ p["W_V"].T,
            p["W_Q"] @ p["W_Q"].T - p["W_K"] @ p["W_K"].T)


def test_factor_imbalances_are_conserved_under_small_step_descent():
    """A^T A - B B^T of W = A B (here W_O^T W_O - W_V W_V^T and, for W_QK = W_Q^T W_K,
    W_Q W_Q^T - W_K W_K^T) is constant under gradient flow: relative drift < 1e-3."""
    p = random_factors(SMALL, 0)
    start = conserved(p)
    for _ in range(400):
        _, g = S.gradients(SMALL, p)
        p = {k: w - 1e-3 * g[k] for k, w in p.items()}
    moved = torch.linalg.norm(effective(p)[1] - effective(random_factors(SMALL, 0))[1])
    assert moved > 1e-2  # the weights did move
    for before, after in zip(start, conserved(p)):
        assert torch.linalg.norm(after - before) < 1e-3 * torch.linalg.norm(before)


def test_effective_rate_of_a_product_matches_measured_dw_dt():
    """dW/dt = -eta (G B^T B + A A^T G) for W = A B, measured by a tiny step."""
    p = random_factors(SMALL, 1)
    eta, h = 0.8, 1e-7
    _, g = S.gradients(SMALL, p)
    w_qk, w_ov = effective(p)
    # Gradient with respect to the collapsed matrices at the same point.
    _, gc = S.gradients(SMALL, {"W_QK": w_qk, "W_OV": w_ov})
    stepped = {k: w - h * eta * g[k] for k, w in p.items()}
    new_qk, new_ov = effective(stepped)
    A, B = p["W_O"], p["W_V"]
    predicted_ov = -eta * (gc["W_OV"] @ B.T @ B + A @ A.T @ gc["W_OV"])
    Q, K = p["W_Q"], p["W_K"]  # W_QK = Q^T K: A = Q^T, B = K
    predicted_qk = -eta * (gc["W_QK"] @ K.T @ K + Q.T @ Q @ gc["W_QK"])
    assert torch.allclose((new_ov - w_ov) / h, predicted_ov, rtol=1e-5, atol=1e-9)
    assert torch.allclose((new_qk - w_qk) / h, predicted_qk, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("a, c", [(0.6, 0.6), (1.5, 0.4), (0.2, 1.1)])
def test_factorized_rate_on_the_set_is_the_factor_rate_times_the_collapsed_rate(a, c):
    """On the set, factors (a, c) move mu as sqrt(4 w^2 + (a^2 - c^2)^2) times the collapsed
    rate, w = a c: balanced factors give 2|w|, an offset adds a floor."""
    model, h, eta = SMALL, 1e-7, 1.0
    for qk_factors, ov_factors in [((a, c), (0.9, 0.9)), ((0.9, 0.9), (a, c))]:
        p = model.factors_on_set(ov_factors, qk_factors)
        mu_ov, mu_qk = model.coordinates(p)
        _, g = S.gradients(model, p)
        stepped = {k: w - h * eta * g[k] for k, w in p.items()}
        new_ov, new_qk = model.coordinates(stepped)
        offsets = (ov_factors[0] ** 2 - ov_factors[1] ** 2, qk_factors[0] ** 2 - qk_factors[1] ** 2)
        k_ov, k_qk = reduced.rate_multipliers(mu_ov, mu_qk, model.setting, "FAFO", offsets)
        d_ov, d_qk = reduced.rhs(mu_ov, mu_qk, model.setting, eta, eta)
        assert (new_ov - mu_ov) / h == pytest.approx(k_ov * d_ov, rel=1e-5)
        assert (new_qk - mu_qk) / h == pytest.approx(k_qk * d_qk, rel=1e-5)
        w_ov = mu_ov * reduced.matrix_scale(model.setting, "ov")
        assert w_ov == pytest.approx(ov_factors[0] * ov_factors[1], rel=1e-12)


@pytest.mark.parametrize("parameterization", ["FAFO", "FACO", "CAFO"])
def test_factorized_descent_follows_the_reduced_dynamics(parameterization):
    run = S.descend(SMALL, parameterization, 1.0, 1.0, target_loss=0.1, init_scale=0.3)
    tr = reduced.integrate_until(SMALL.setting, 1.0, 1.0, 0.1, parameterization=parameterization,
                           init_scale=0.3)
    ode = tr.sample(np.minimum(run.t, tr.tau[-1]))
    assert run.distance.max() < 1e-12
    assert np.max(np.abs(run.alpha / ode["alpha"] - 1)) < 2e-2
    assert np.max(np.abs(run.loss / ode["loss"] - 1)) < 2e-2


def test_whole_numbers_of_positions_are_required():
    with pytest.raises(ParameterError, match="parameter 'm'.*whole number"):
        S.StylizedModel(reduced.Setting(m=2.5, n=7, b=3.5, M=4))


def test_factorized_start_needs_a_nonzero_scale():
    with pytest.raises(ParameterError, match="parameter 'init_scale'"):
        reduced.integrate_until(SMALL.setting, 1.0, 1.0, 0.1, parameterization="FACO", init_scale=0.0)
