r"""The reduced gradient-flow dynamics of the paper (paper Fig. 4) and their closed form.

Two scalars describe the model: the query-key strength ``mu_qk`` and the output-value
strength ``mu_ov``. With ``m`` relevant and ``n`` irrelevant tokens in the context and ``M``
possible next tokens,

    alpha = m e^{mu_qk} / (m e^{mu_qk} + n)                 attention mass on relevant tokens
    L     = log(1 + (M - 1) e^{-alpha mu_ov})               next-token loss
    d mu_ov/dt = eta_ov alpha / (b [e^{alpha mu_ov} + M - 1])
    d mu_qk/dt = eta_qk (M - 1) alpha (1 - alpha) mu_ov / (M b^2 [e^{alpha mu_ov} + M - 1])

The right-hand sides are gradient flow on ``L`` with the constant preconditioners
``eta_ov / (b (M - 1))`` and ``eta_qk / (M b^2)`` (:func:`preconditioners`). Dividing the
two equations and integrating from ``mu = 0`` gives the conserved relation

    mu_qk + (m/n) (e^{mu_qk} - 1) = r (M - 1) mu_ov^2 / (2 M b),      r = eta_qk / eta_ov,

so ``mu_ov`` is an explicit function of ``mu_qk`` and, through the Lambert W function,
``mu_qk`` and ``alpha`` are explicit functions of ``mu_ov`` (:func:`closed_form_mu_qk`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import integrate, optimize, special

from ..checks import ParameterError, integer, number
from ..circuits import circuit_kinds


@dataclass(frozen=True)
class Setting:
    """The constants of the reduced model.

    m: relevant tokens in the context; n: irrelevant tokens; b: the model constant of the
    paper's equations (the public material does not define it; its simulation uses the
    embedding size 50); M: number of possible next tokens (M >= 2).

    The defaults are the paper's setting (its Fig. 4), written here only: the figures'
    parameters and the book take them from here.
    """

    m: float = 5
    n: float = 50
    b: float = 50.0
    M: int = 20

    def __post_init__(self):
        number("m", self.m, above=0)
        number("n", self.n, above=0)
        number("b", self.b, above=0)
        integer("M", self.M, minimum=2)

    @property
    def initial_loss(self) -> float:
        """The loss at mu = 0: alpha * mu_ov = 0, so every next token is equally likely."""
        return math.log(self.M)


# --- the model -----------------------------------------------------------------------------


def attention_mass(mu_qk, setting: Setting):
    """alpha = m e^{mu_qk} / (m e^{mu_qk} + n), computed without overflow."""
    return special.expit(np.asarray(mu_qk, dtype=float) + math.log(setting.m / setting.n))


def loss(mu_ov, mu_qk, setting: Setting):
    """L = log(1 + (M - 1) e^{-alpha mu_ov}), computed without overflow."""
    margin = attention_mass(mu_qk, setting) * np.asarray(mu_ov, dtype=float)
    return np.logaddexp(0.0, math.log(setting.M - 1) - margin)


def preconditioners(setting: Setting, eta_ov: float, eta_qk: float) -> tuple[float, float]:
    """The constant factors that turn -grad L into the paper's right-hand sides."""
    return eta_ov / (setting.b * (setting.M - 1)), eta_qk / (setting.M * setting.b**2)


def rhs(mu_ov, mu_qk, setting: Setting, eta_ov: float, eta_qk: float):
    """(d mu_ov/dt, d mu_qk/dt) of the reduced ODE."""
    mu_ov = np.asarray(mu_ov, dtype=float)
    alpha = attention_mass(mu_qk, setting)
    M, b = setting.M, setting.b
    # 1 / (e^{x} + M - 1) written as e^{-x} / (1 + (M - 1) e^{-x}): no overflow for large x.
    decay = np.exp(-alpha * mu_ov)
    inv = decay / (1.0 + (M - 1) * decay)
    d_ov = eta_ov * alpha * inv / b
    d_qk = eta_qk * (M - 1) * alpha * (1.0 - alpha) * mu_ov * inv / (M * b**2)
    return d_ov, d_qk


# --- factorized circuits: the implicit rescaling of the learning rate ----------------------


def matrix_scale(setting: Setting, circuit: str) -> float:
    """``w = mu * matrix_scale``: the singular value of a circuit's matrix in the stylized model
    (:mod:`qkov.theory.stylized`), whose token embeddings have norm ``b^{-1/2}``. The OV circuit
    reads one embedding (``mu_ov = w / sqrt(b)``), the QK circuit two (``mu_qk = w / b``)."""
    return {"ov": math.sqrt(setting.b), "qk": float(setting.b)}[circuit]


def factor_rate(w, offset=0.0):
    """``a^2 + c^2`` for factors with ``a c = w`` and conserved ``a^2 - c^2 = offset``:
    gradient flow on ``W = A B`` moves ``w`` this many times faster than on ``W`` itself.
    Balanced factors (offset 0) give ``2 |w|``."""
    return np.sqrt(4.0 * np.asarray(w, dtype=float) ** 2 + offset**2)


def rate_multipliers(mu_ov, mu_qk, setting: Setting, parameterization: str, offsets=(0.0, 0.0)):
    """(kappa_ov, kappa_qk): each circuit's effective learning rate over its nominal one
    (1 when collapsed). ``offsets``: the conserved ``a^2 - c^2`` of the OV and QK factors."""
    qk, ov = circuit_kinds(parameterization)
    k_ov = (factor_rate(np.asarray(mu_ov, dtype=float) * matrix_scale(setting, "ov"), offsets[0])
            if ov == "factorized" else np.ones_like(np.asarray(mu_ov, dtype=float)))
    k_qk = (factor_rate(np.asarray(mu_qk, dtype=float) * matrix_scale(setting, "qk"), offsets[1])
            if qk == "factorized" else np.ones_like(np.asarray(mu_qk, dtype=float)))
    return k_ov, k_qk


def initial_state(setting: Setting, parameterization: str, init_scale: float,
                  offsets=(0.0, 0.0)):
    """(mu_ov, mu_qk) at the symmetric start: collapsed circuits at 0, factorized circuits at
    ``w = init_scale^2`` (balanced factors of singular value ``init_scale`` when the offset is
    0). Factors with ``w = 0`` and no offset sit on a saddle and never move."""
    qk, ov = circuit_kinds(parameterization)
    number("init_scale", init_scale, at_least=0)
    for kind, offset, name in ((ov, offsets[0], "OV"), (qk, offsets[1], "QK")):
        if kind == "factorized" and init_scale == 0 and offset == 0:
            raise ParameterError("init_scale", f"the factorized {name} circuit needs a "
                                   "positive init_scale or offset: zero factors never move")
    start = {"factorized": init_scale**2, "collapsed": 0.0}
    return (start[ov] / matrix_scale(setting, "ov"), start[qk] / matrix_scale(setting, "qk"))


# --- the closed form -----------------------------------------------------------------------


def _lambertw_exp(x):
    """W(e^x), the principal branch, also where e^x overflows (solves w + log w = x)."""
    x = np.asarray(x, dtype=float)
    small = x < 500.0
    w = np.empty_like(x)
    w[small] = special.lambertw(np.exp(x[small])).real
    if np.any(~small):
        big = x[~small]
        v = big - np.log(big)
        for _ in range(50):  # Newton on f(w) = w + log w - x; converges in a few steps here
            step = (v + np.log(v) - big) / (1.0 + 1.0 / v)
            v = v - step
            if np.all(np.abs(step) <= 1e-15 * v):
                break
        w[~small] = v
    return w


def invariant(mu_ov, mu_qk, setting: Setting, r: float):
    """mu_qk + (m/n)(e^{mu_qk} - 1) - r (M - 1) mu_ov^2 / (2 M b): zero along the flow from 0."""
    a = setting.m / setting.n
    mu_ov, mu_qk = np.asarray(mu_ov, dtype=float), np.asarray(mu_qk, dtype=float)
    return mu_qk + a * np.expm1(mu_qk) - _kappa(setting, r) * mu_ov**2


def _kappa(setting: Setting, r: float) -> float:
    return r * (setting.M - 1) / (2.0 * setting.M * setting.b)


def closed_form_mu_ov(mu_qk, setting: Setting, r: float):
    """mu_ov on the trajectory from mu = 0 at the moment it passes through ``mu_qk``."""
    a = setting.m / setting.n
    mu_qk = np.asarray(mu_qk, dtype=float)
    return np.sqrt((mu_qk + a * np.expm1(mu_qk)) / _kappa(setting, r))


def closed_form_mu_qk(mu_ov, setting: Setting, r: float):
    """mu_qk on the trajectory from mu = 0 as a function of mu_ov.

    With a = m/n and c = a + kappa mu_ov^2, the relation mu_qk + a e^{mu_qk} = c is solved by
    mu_qk = c - W(a e^c); the same W gives alpha = W / (1 + W) (see :func:`closed_form_alpha`).
    """
    a = setting.m / setting.n
    c = a + _kappa(setting, r) * np.asarray(mu_ov, dtype=float) ** 2
    return c - _lambertw_exp(math.log(a) + c)


def closed_form_alpha(mu_ov, setting: Setting, r: float):
    """alpha on the trajectory as a function of mu_ov: W / (1 + W), W = W(a e^c)."""
    a = setting.m / setting.n
    c = a + _kappa(setting, r) * np.asarray(mu_ov, dtype=float) ** 2
    w = _lambertw_exp(math.log(a) + c)
    return w / (1.0 + w)


def state_at_loss(target: float, setting: Setting, r: float) -> tuple[float, float, float]:
    """(mu_ov, mu_qk, alpha) where the trajectory from 0 first reaches loss ``target``.

    No integration: the loss fixes the margin alpha mu_ov = log((M - 1) / expm1(L)), and the
    closed form fixes mu_ov as a function of mu_qk; a 1-D root in mu_ov remains.
    """
    check_loss_threshold("target", target, setting)
    margin = math.log((setting.M - 1) / math.expm1(target))

    def gap(mu_ov):  # increasing in mu_ov
        return float(closed_form_alpha(mu_ov, setting, r)) * mu_ov - margin

    hi = margin / float(attention_mass(0.0, setting))  # alpha >= alpha(0) along the flow
    mu_ov = optimize.brentq(gap, 0.0, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps)
    mu_qk = float(closed_form_mu_qk(mu_ov, setting, r))
    return mu_ov, mu_qk, float(attention_mass(mu_qk, setting))


# --- integration ---------------------------------------------------------------------------


# The smallest loss a threshold may ask for. Late in the flow alpha -> 1 and
# e^{mu_ov} ~ eta_ov t / b, so the loss falls only like (M - 1) b / (eta_ov t): the loss
# reached at the solver's horizon (t = 1e40 / min(eta), see integrate_until) is about
# (M - 1) b 1e-40. At the default setting a target of 1e-30 is reached and 1e-50 is not
# (the solver runs to its horizon and fails). 1e-20 and 1e-25 were reached at every point
# of a grid of m in {1, 5, 100}, n in {1, 50, 1e4}, b in {0.1, 50, 1e4}, M in {2, 20, 1000},
# r and eta_ov each in {1e-3, 1, 1e3} (CACO), and by FAFO, FACO, CAFO, CACO from 1e-6 and
# 1e-3 at the default setting: 1e-20 leaves five decades of margin there (seventeen at the
# default setting). Settings far outside that grid ((M - 1) b near 1e20) may still not reach
# it; the solver then says so.
LOSS_FLOOR = 1e-20


# The largest learning-rate ratio r = eta_qk / eta_ov of the theory figures (CACO). The flow
# grows stiff for the explicit solver as r grows: an integration to loss 1e-4 takes 0.04 s at
# r = 1e6, 1.6 s at 1e10 and 28 s at 1e20 (the paper's ratios: 0.01 to 100). The
# stylized descents follow the flow at 1e6 still (4,188 steps, alpha within 1e-6).
MAX_RATIO = 1e6


def check_loss_threshold(name: str, value, setting: Setting) -> float:
    """A loss threshold must lie in [LOSS_FLOOR, log M): the flow starts at L = log M and
    L -> 0, but only like 1/t, and the integration stops at a horizon (see LOSS_FLOOR)."""
    value = number(name, value, above=0.0, below=setting.initial_loss)
    if value < LOSS_FLOOR:
        raise ParameterError(name, f"expected a loss >= {LOSS_FLOOR:g} (the reduced flow's "
                                   f"loss falls like 1/t; below that it is not reached "
                                   f"reliably in float64), got {value:g}")
    return value


@dataclass
class Trajectory:
    """One solution of the reduced ODE from mu = 0, stopped when the loss reaches ``target_loss``.

    ``t`` is the solver's own time; ``tau = min(eta_ov, eta_qk) * t`` is the normalised time of
    the paper's plots. ``crossings`` maps each threshold to the state at the moment the loss
    first fell to it, located by the solver's event detection (not read off a grid).
    """

    setting: Setting
    eta_ov: float
    eta_qk: float
    target_loss: float
    t: np.ndarray
    mu_ov: np.ndarray
    mu_qk: np.ndarray
    crossings: dict[float, dict[str, float]] = field(default_factory=dict)
    _dense: object = field(default=None, repr=False)
    parameterization: str = "CACO"
    offsets: tuple[float, float] = (0.0, 0.0)

    @property
    def r(self) -> float:
        return self.eta_qk / self.eta_ov

    @property
    def time_scale(self) -> float:
        return min(self.eta_ov, self.eta_qk)

    @property
    def tau(self) -> np.ndarray:
        return self.time_scale * self.t

    @property
    def alpha(self) -> np.ndarray:
        return attention_mass(self.mu_qk, self.setting)

    @property
    def loss(self) -> np.ndarray:
        return loss(self.mu_ov, self.mu_qk, self.setting)

    @property
    def r_eff(self) -> np.ndarray:
        """eta_qk,eff / eta_ov,eff along the trajectory (``r`` when both are collapsed)."""
        return self.r_eff_at(self.mu_ov, self.mu_qk)

    def r_eff_at(self, mu_ov, mu_qk) -> np.ndarray:
        """eta_qk,eff / eta_ov,eff at states of this trajectory (e.g. from :meth:`sample`)."""
        k_ov, k_qk = rate_multipliers(mu_ov, mu_qk, self.setting, self.parameterization,
                                      self.offsets)
        return self.eta_qk * k_qk / (self.eta_ov * k_ov)

    def sample(self, tau) -> dict[str, np.ndarray]:
        """The state at normalised times ``tau`` (the solver's dense output, same accuracy)."""
        tau = np.asarray(tau, dtype=float)
        if np.any(tau < 0) or np.any(tau > self.tau[-1] * (1 + 1e-12)):
            raise ValueError(f"tau must lie in [0, {self.tau[-1]:.6g}]")
        mu_ov, mu_qk = self._dense(tau / self.time_scale)
        return {
            "tau": tau,
            "mu_ov": mu_ov,
            "mu_qk": mu_qk,
            "alpha": attention_mass(mu_qk, self.setting),
            "loss": loss(mu_ov, mu_qk, self.setting),
        }


def integrate_until(
    setting: Setting,
    eta_ov: float,
    eta_qk: float,
    target_loss: float,
    thresholds=(),
    rtol: float = 1e-11,
    atol: float = 1e-13,
    parameterization: str = "CACO",
    init_scale: float = 0.0,
    offsets: tuple[float, float] = (0.0, 0.0),
) -> Trajectory:
    """Integrate the reduced ODE from mu = 0 until the loss first reaches ``target_loss``.

    ``parameterization`` other than CACO multiplies each factorized circuit's rate by
    :func:`factor_rate`: factors start at ``w = init_scale^2`` with conserved imbalances
    ``offsets`` (OV, QK; 0 for balanced factors).

    The loss decreases monotonically along the flow (it is preconditioned gradient flow), so
    each threshold is crossed exactly once; each is an event of the solver, and the target is
    the terminal event. No time grid or horizon needs guessing.
    """
    eta_ov = number("eta_ov", eta_ov, above=0)
    eta_qk = number("eta_qk", eta_qk, above=0)
    target_loss = check_loss_threshold("target_loss", target_loss, setting)
    thresholds = sorted(
        {check_loss_threshold("thresholds", x, setting) for x in thresholds}, reverse=True
    )
    if thresholds and thresholds[-1] < target_loss:
        raise ParameterError(
            "thresholds",
            f"every threshold must be >= target_loss={target_loss:g}, got {thresholds[-1]:g}",
        )

    offsets = tuple(number("offsets", x, at_least=0) for x in offsets)
    start = initial_state(setting, parameterization, init_scale, offsets)
    factorized = parameterization != "CACO"
    if factorized:  # the state starts as small as init_scale**2: keep its digits
        atol = min([atol, *(1e-6 * x for x in start if x > 0)])

    def fun(_t, y):
        d_ov, d_qk = rhs(y[0], y[1], setting, eta_ov, eta_qk)
        if factorized:
            k_ov, k_qk = rate_multipliers(y[0], y[1], setting, parameterization, offsets)
            d_ov, d_qk = d_ov * k_ov, d_qk * k_qk
        return np.array([d_ov, d_qk])

    def crossing(level):
        log_level = math.log(level)

        def event(_t, y):
            return math.log(float(loss(y[0], y[1], setting))) - log_level

        event.direction = -1
        return event

    stop = crossing(target_loss)
    stop.terminal = True
    events = [crossing(level) for level in thresholds] + [stop]

    # The loss decays like log(t): the horizon is only a guard; the terminal event ends the run.
    horizon = 1e40 / min(eta_ov, eta_qk)
    sol = integrate.solve_ivp(
        fun, (0.0, horizon), list(start), method="DOP853", rtol=rtol, atol=atol,
        events=events, dense_output=True,
    )
    if sol.status != 1:
        raise RuntimeError(
            f"reduced ODE ({parameterization}, eta_ov={eta_ov:g}, eta_qk={eta_qk:g}) did not reach "
            f"loss {target_loss:g}: {sol.message}"
        )
    crossings = {}
    for level, t_events, y_events in zip(thresholds, sol.t_events, sol.y_events):
        t_hit, (mu_ov, mu_qk) = t_events[0], y_events[0]
        crossings[level] = {
            "tau": min(eta_ov, eta_qk) * t_hit,
            "mu_ov": mu_ov,
            "mu_qk": mu_qk,
            "alpha": float(attention_mass(mu_qk, setting)),
        }
    return Trajectory(
        setting, eta_ov, eta_qk, target_loss, sol.t, sol.y[0], sol.y[1], crossings,
        _dense=sol.sol, parameterization=parameterization, offsets=offsets,
    )


def threshold_count(loss_max: float, loss_min: float, per_decade: int) -> int:
    """How many thresholds :func:`loss_thresholds` gives, without making them."""
    hi, lo = math.log10(loss_max), math.log10(loss_min)
    return math.floor((hi - lo) * per_decade + 1e-9) + 1


def loss_thresholds(loss_max: float, loss_min: float, per_decade: int) -> np.ndarray:
    """Log-spaced thresholds from ``loss_max`` down to ``loss_min``, ``per_decade`` a decade.

    Every power of ten in the range is hit exactly (10.0 ** -k), so summary rows at 1, 1e-2,
    1e-4 are found by value. A ``loss_min`` off the grid ends the list at the last grid value
    above it (rounding would step below it, past where a run stops).
    """
    hi = math.log10(loss_max)
    steps = threshold_count(loss_max, loss_min, per_decade) - 1
    exponents = hi - np.arange(steps + 1) / per_decade
    return np.array([10.0 ** round(e, 12) for e in exponents])
