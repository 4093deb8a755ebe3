"""Numerical checks of the reduced dynamics (paper Fig. 4) and of the closed form."""

import math

import numpy as np
import pytest
import torch

from qkov.checks import ParameterError
from qkov.theory import reduced

SETTING = reduced.Setting(m=5, n=50, b=50, M=20)
RATIOS = [0.01, 0.1, 1.0, 10.0, 100.0]


def torch_loss(mu_ov, mu_qk, s):
    alpha = s.m * torch.exp(mu_qk) / (s.m * torch.exp(mu_qk) + s.n)
    return torch.log1p((s.M - 1) * torch.exp(-alpha * mu_ov))


@pytest.mark.parametrize("setting", [SETTING, reduced.Setting(m=2, n=7, b=3.5, M=4)])
def test_rhs_is_preconditioned_gradient_flow(setting):
    """d mu/dt = -P grad L with P = diag(eta_ov / (b (M-1)), eta_qk / (M b^2)) (autograd)."""
    rng = np.random.default_rng(0)
    eta_ov, eta_qk = 0.7, 3.0
    p_ov, p_qk = reduced.preconditioners(setting, eta_ov, eta_qk)
    for mu_ov, mu_qk in rng.uniform([0, -2], [60, 8], size=(50, 2)):
        o = torch.tensor(mu_ov, dtype=torch.float64, requires_grad=True)
        q = torch.tensor(mu_qk, dtype=torch.float64, requires_grad=True)
        g_ov, g_qk = torch.autograd.grad(torch_loss(o, q, setting), (o, q))
        d_ov, d_qk = reduced.rhs(mu_ov, mu_qk, setting, eta_ov, eta_qk)
        assert d_ov == pytest.approx(-p_ov * g_ov.item(), rel=1e-12, abs=1e-300)
        assert d_qk == pytest.approx(-p_qk * g_qk.item(), rel=1e-12, abs=1e-300)


def test_loss_and_alpha_match_their_definitions():
    o, q = np.array([0.0, 3.0, 40.0]), np.array([0.0, 1.5, 6.0])
    alpha = 5 * np.exp(q) / (5 * np.exp(q) + 50)
    assert np.allclose(reduced.attention_mass(q, SETTING), alpha, rtol=1e-14)
    assert np.allclose(reduced.loss(o, q, SETTING), np.log(1 + 19 * np.exp(-alpha * o)), rtol=1e-14)
    assert reduced.loss(0.0, 0.0, SETTING) == pytest.approx(math.log(20))
    # no overflow far out: the loss is positive and tiny, the rates finite
    assert 0 < reduced.loss(1e4, 50.0, SETTING) < 1e-300 or reduced.loss(1e4, 50.0, SETTING) == 0
    assert all(np.isfinite(reduced.rhs(1e4, 50.0, SETTING, 1.0, 1.0)))


@pytest.fixture(scope="module")
def sweep():
    thresholds = reduced.loss_thresholds(1.0, 1e-4, 10)
    return thresholds, [reduced.integrate_until(SETTING, 1.0, r, 1e-4, thresholds) for r in RATIOS]


def test_closed_form_matches_integration(sweep):
    _, trajectories = sweep
    for tr in trajectories:
        assert np.max(np.abs(reduced.invariant(tr.mu_ov, tr.mu_qk, SETTING, tr.r))) < 1e-6
        assert np.allclose(reduced.closed_form_mu_qk(tr.mu_ov, SETTING, tr.r), tr.mu_qk,
                           rtol=1e-6, atol=1e-9)
        assert np.allclose(reduced.closed_form_alpha(tr.mu_ov, SETTING, tr.r), tr.alpha,
                           rtol=1e-6, atol=1e-9)
        inside = tr.mu_qk > 1e-3  # mu_ov(mu_qk) is ill-conditioned right at the origin
        assert np.allclose(reduced.closed_form_mu_ov(tr.mu_qk[inside], SETTING, tr.r),
                           tr.mu_ov[inside], rtol=1e-6)


def test_threshold_events_match_the_closed_form(sweep):
    thresholds, trajectories = sweep
    for tr in trajectories:
        assert sorted(tr.crossings) == sorted(thresholds)
        for level, c in tr.crossings.items():
            assert reduced.loss(c["mu_ov"], c["mu_qk"], SETTING) == pytest.approx(level, rel=1e-8)
            exact = reduced.state_at_loss(level, SETTING, tr.r)
            assert [c["mu_ov"], c["mu_qk"], c["alpha"]] == pytest.approx(exact, rel=1e-6)
        assert tr.loss[-1] == pytest.approx(1e-4, rel=1e-8)


def test_loss_decreases_along_the_flow(sweep):
    _, trajectories = sweep
    for tr in trajectories:
        dense = tr.sample(np.geomspace(1e-3, tr.tau[-1], 2000))
        assert np.all(np.diff(dense["loss"]) <= 1e-15)
        assert np.all(np.diff(dense["mu_ov"]) >= 0) and np.all(np.diff(dense["mu_qk"]) >= 0)


def test_dense_samples_agree_with_solver_steps(sweep):
    _, trajectories = sweep
    tr = trajectories[2]
    s = tr.sample(tr.tau[1:-1])
    assert np.allclose(s["mu_ov"], tr.mu_ov[1:-1], rtol=1e-10)
    with pytest.raises(ValueError, match="tau must lie"):
        tr.sample([tr.tau[-1] * 2])


@pytest.mark.parametrize("level", [1.0, 1e-2, 1e-4])
def test_alpha_rises_with_r_at_fixed_loss(sweep, level):
    _, trajectories = sweep
    alphas = [tr.crossings[level]["alpha"] for tr in trajectories]
    mu_ovs = [tr.crossings[level]["mu_ov"] for tr in trajectories]
    assert np.all(np.diff(alphas) > 0), alphas
    assert np.all(np.diff(mu_ovs) < 0), mu_ovs
    # and finer in r, from the closed form alone
    fine = [reduced.state_at_loss(level, SETTING, r)[2] for r in np.geomspace(1e-3, 1e3, 25)]
    assert np.all(np.diff(fine) > 0)


def test_limits_of_the_ratio():
    """r -> 0 keeps attention at m/(m+n); r -> infinity drives it towards 1."""
    alpha0 = 5 / 55
    assert reduced.state_at_loss(1e-2, SETTING, 1e-8)[2] == pytest.approx(alpha0, rel=1e-5)
    assert reduced.state_at_loss(1e-2, SETTING, 1e8)[2] > 0.999


def test_lambert_w_of_exp_is_accurate_beyond_overflow():
    x = np.array([-5.0, 0.0, 3.0, 499.0, 501.0, 1e4, 1e8])
    w = reduced._lambertw_exp(x)
    assert np.allclose(w + np.log(w), x, rtol=1e-14, atol=1e-12)


def test_thresholds_hit_every_decade_exactly():
    th = reduced.loss_thresholds(1.0, 1e-4, 10)
    assert len(th) == 41 and {1.0, 1e-1, 1e-2, 1e-3, 1e-4} <= set(th)
    assert np.all(np.diff(th) < 0)


@pytest.mark.parametrize("loss_min", [0.02, 0.05, 0.015])
def test_thresholds_never_step_below_an_off_grid_minimum(loss_min):
    # 0.02 sits just above the grid value 10**-1.7; rounding the step count went below it.
    th = reduced.loss_thresholds(1.0, loss_min, 10)
    assert th[-1] >= loss_min and th[-1] / 10 ** 0.1 < loss_min


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"M": 1}, "M"),
        ({"M": 2.5}, "M"),
        ({"m": 0}, "m"),
        ({"n": -3}, "n"),
        ({"b": float("nan")}, "b"),
    ],
)
def test_bad_settings_name_the_parameter(kwargs, name):
    with pytest.raises(ParameterError, match=f"parameter '{name}'"):
        reduced.Setting(**kwargs)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.log(20), 5.0])
def test_target_loss_outside_the_range_is_refused(bad):
    with pytest.raises(ParameterError, match=r"parameter 'target_loss'.*"):
        reduced.integrate_until(SETTING, 1.0, 1.0, bad)


def test_thresholds_below_the_target_are_refused():
    with pytest.raises(ParameterError, match="parameter 'thresholds'"):
        reduced.integrate_until(SETTING, 1.0, 1.0, 1e-2, thresholds=[1e-3])


@pytest.mark.parametrize("eta", [0.0, -1.0])
def test_learning_rates_must_be_positive(eta):
    with pytest.raises(ParameterError, match="parameter 'eta_qk'"):
        reduced.integrate_until(SETTING, 1.0, eta, 1e-2)
