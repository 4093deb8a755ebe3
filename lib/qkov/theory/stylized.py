r"""The stylized model behind the reduced ODE: full matrices whose gradient flow is exactly it.

This is the companion's own reconstruction (the paper's public material gives the reduced
ODE but not the model behind it); the book's theory chapter derives it.

Data. ``M`` classes, drawn uniformly. Class ``y`` has a *relevant* token ``r_y``, a *query*
token ``q_y`` and a shared *blank* token. A sequence holds ``m`` copies of ``r_y`` and ``n``
blanks in its context (order is irrelevant: there are no positions), then the query ``q_y``;
the target is class ``y`` (one of ``M`` next tokens).

Model. Tokens are embedded as ``s`` times one-hot vectors of size ``d = 2M`` with
``s = b^{-1/2}``; the blank is embedded as the zero vector. The query attends over the
context only, with scores ``x_q^T W_QK x_i``; ``h = sum_i a_i x_i`` and ``logits = W_OV h``.
``W_QK`` is ``(d, d)``, ``W_OV`` is ``(M, d)``; factorized circuits use ``W_Q^T W_K`` and
``W_O W_V`` with square inner factors (hidden size ``d``).

The two-dimensional set. With ``V = sum_y e_{q_y} e_{r_y}^T`` and
``U = sum_{j,y} (delta_jy - 1/M) e_j e_{r_y}^T`` (the centred class map),

    W_QK = (mu_qk / s^2) V,    W_OV = (mu_ov / s) U

give scores ``mu_qk`` on relevant tokens and 0 on blanks, hence ``alpha`` and ``L`` of
:mod:`qkov.theory.reduced`; the population gradient is parallel to ``V`` and ``U`` there, and
gradient flow with matrix learning rates ``eta_qk, eta_ov`` moves ``(mu_ov, mu_qk)`` exactly
by the paper's ODE: ``|U|_F^2 = M - 1`` and ``|V|_F^2 = M`` give the constants
``b (M - 1)`` and ``M b^2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from .. import seeding
from ..checks import ParameterError, number
from ..circuits import circuit_kinds, circuit_of, effective
from ..processes import map_in_processes
from . import reduced as theory

DTYPE = torch.float64
DEFAULT_SIZE = 20**2 * (5 + 50)  # M^2 (m + n) at the theory chapter's setting
# The largest M^2 (m + n): the embedded population then takes 160 MB per process, and a
# descent step ~0.1 s where the default's takes 0.46 ms.
MAX_SIZE = 10_000_000
FACTORS = ("W_Q", "W_K", "W_O", "W_V")


@dataclass(frozen=True)
class StylizedModel:
    """The data model and architecture for one :class:`qkov.theory.reduced.Setting`.

    ``m`` and ``n`` count positions here, so they must be whole numbers.
    """

    setting: theory.Setting

    def __post_init__(self):
        for name in ("m", "n"):
            value = getattr(self.setting, name)
            if float(value) != int(value):
                raise ParameterError(name, f"the stylized model counts positions: expected "
                                             f"a whole number, got {value!r}")
        if self.size > MAX_SIZE:
            raise ParameterError("M", f"M^2 (m + n) = {self.size:,.0f}: expected at most "
                                      f"{MAX_SIZE:,} (the embedded population takes 16 bytes "
                                      "each, and a descent step grows with it)")

    @property
    def size(self) -> float:
        """M^2 (m + n): the embedded population (M sequences of m + n tokens of size 2M) has
        2 M^2 (m + n) numbers, and a descent step's work grows with it."""
        return float(self.setting.M) ** 2 * (self.setting.m + self.setting.n)

    @property
    def step_weight(self) -> float:
        """A descent step's cost in steps at the default setting (M = 20, m + n = 55): by
        size, past it (an upper bound: measured, 0.46 ms a step at the default size, 13 ms
        at 64 times it, 60 ms at 256 times it)."""
        return max(1.0, self.size / DEFAULT_SIZE)

    @property
    def M(self) -> int:
        return int(self.setting.M)

    @property
    def d(self) -> int:
        return 2 * self.M

    @property
    def s(self) -> float:
        """Norm of a token embedding: the paper's ``b`` is ``1 / s^2``."""
        return 1.0 / math.sqrt(self.setting.b)

    # --- data -------------------------------------------------------------------------------

    @cached_property
    def embeddings(self) -> torch.Tensor:
        """(2M + 1, d): rows r_0..r_{M-1}, q_0..q_{M-1}, blank (zero)."""
        e = torch.zeros(2 * self.M + 1, self.d, dtype=DTYPE)
        e[: self.d] = self.s * torch.eye(self.d, dtype=DTYPE)
        return e

    def sequences(self, classes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids of the contexts ``(B, m + n)`` and of the queries ``(B,)``."""
        m, n = int(self.setting.m), int(self.setting.n)
        blank = 2 * self.M
        context = torch.cat([classes.unsqueeze(1).expand(-1, m),
                             torch.full((len(classes), n), blank)], dim=1)
        return context, classes + self.M

    @cached_property
    def _population_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Embedded contexts (M, m + n, d) and queries (M, d) of every class's sequence,
        made once: indexing the embeddings took a fifth of a descent's step."""
        context, queries = self.sequences(self.all_classes())
        return self.embeddings[context], self.embeddings[queries]

    def all_classes(self) -> torch.Tensor:
        """One sequence per class: the population, since a class fixes its sequence."""
        return torch.arange(self.M)

    # --- the two directions -------------------------------------------------------------------

    @cached_property
    def direction_qk(self) -> torch.Tensor:
        """V = sum_y e_{q_y} e_{r_y}^T: (d, d), |V|_F^2 = M."""
        v = torch.zeros(self.d, self.d, dtype=DTYPE)
        y = torch.arange(self.M)
        v[y + self.M, y] = 1.0
        return v

    @cached_property
    def direction_ov(self) -> torch.Tensor:
        """U = sum_{j,y} (delta_jy - 1/M) e_j e_{r_y}^T: (M, d), |U|_F^2 = M - 1."""
        u = torch.zeros(self.M, self.d, dtype=DTYPE)
        u[:, : self.M] = torch.eye(self.M, dtype=DTYPE) - 1.0 / self.M
        return u

    def on_set(self, mu_ov: float, mu_qk: float) -> dict[str, torch.Tensor]:
        """Collapsed matrices at the point (mu_ov, mu_qk) of the two-dimensional set."""
        return {"W_QK": mu_qk / self.s**2 * self.direction_qk,
                "W_OV": mu_ov / self.s * self.direction_ov}

    def factors_on_set(self, ov: tuple[float, float] | None, qk: tuple[float, float] | None):
        """Factor matrices on the set: ``ov = (a, c)`` gives ``W_O = a U``, ``W_V = c U^T U``
        (so ``W_OV = a c U``); ``qk = (a, c)`` gives ``W_Q = a V V^T``, ``W_K = c V`` (so
        ``W_QK = a c V``). ``None`` leaves that circuit out. ``U^T U`` and ``V V^T`` are the
        projectors onto the row space of ``U`` and the column space of ``V``."""
        p = {}
        if ov is not None:
            u = self.direction_ov
            p["W_O"], p["W_V"] = ov[0] * u, ov[1] * (u.T @ u)
        if qk is not None:
            v = self.direction_qk
            p["W_Q"], p["W_K"] = qk[0] * (v @ v.T), qk[1] * v
        return p

    def initial_parameters(self, parameterization: str, init_scale: float):
        """The symmetric start: collapsed circuits at zero, factorized circuits as balanced
        factors with singular value ``init_scale`` along their direction (a = c)."""
        qk, ov = circuit_kinds(parameterization)
        p = self.factors_on_set((init_scale, init_scale) if ov == "factorized" else None,
                                (init_scale, init_scale) if qk == "factorized" else None)
        if qk == "collapsed":
            p["W_QK"] = torch.zeros(self.d, self.d, dtype=DTYPE)
        if ov == "collapsed":
            p["W_OV"] = torch.zeros(self.M, self.d, dtype=DTYPE)
        return p

    def coordinates(self, p: dict[str, torch.Tensor]) -> tuple[float, float]:
        """(mu_ov, mu_qk): the projections of a model's W_OV, W_QK onto U and V."""
        return self._coordinates(*effective(p))

    def _coordinates(self, w_qk, w_ov) -> tuple[float, float]:
        u, v = self.direction_ov, self.direction_qk
        mu_ov = self.s * float((w_ov * u).sum()) / (self.M - 1)
        mu_qk = self.s**2 * float((w_qk * v).sum()) / self.M
        return mu_ov, mu_qk

    def distance_from_set(self, p: dict[str, torch.Tensor]) -> float:
        """Relative Frobenius distance of (W_QK, W_OV) from their projections onto (V, U)."""
        return self.place(p)[2]

    def place(self, p: dict[str, torch.Tensor]) -> tuple[float, float, float]:
        """(mu_ov, mu_qk, distance from the set): what a descent records at every step."""
        w_qk, w_ov = effective(p)
        mu_ov, mu_qk = self._coordinates(w_qk, w_ov)
        on = self.on_set(mu_ov, mu_qk)
        off = torch.linalg.norm(w_qk - on["W_QK"])**2 + torch.linalg.norm(w_ov - on["W_OV"])**2
        size = torch.linalg.norm(w_qk)**2 + torch.linalg.norm(w_ov)**2
        return mu_ov, mu_qk, float(torch.sqrt(off / size)) if size > 0 else 0.0

    # --- the forward pass ---------------------------------------------------------------------

    def forward(self, p: dict[str, torch.Tensor], classes: torch.Tensor | None = None):
        """(logits (B, M), attention (B, m + n)) on full one-hot sequences of ``classes``
        (default: the population, every class once)."""
        w_qk, w_ov = effective(p)
        x, x_q = self._population_inputs
        if classes is not None:  # a class fixes its sequence
            x, x_q = x[classes], x_q[classes]
        scores = (x @ (x_q @ w_qk).unsqueeze(-1)).squeeze(-1)  # x_q^T W_QK x_i
        attention = torch.softmax(scores, dim=-1)
        h = (attention.unsqueeze(1) @ x).squeeze(1)
        return h @ w_ov.T, attention

    def loss(self, p: dict[str, torch.Tensor], classes: torch.Tensor | None = None):
        """Mean cross-entropy over ``classes`` (default: the population, every class once)."""
        return self.loss_and_attention(p, classes)[0]

    def loss_and_attention(self, p, classes: torch.Tensor | None = None):
        """(mean cross-entropy, mean attention mass on the relevant tokens) over ``classes``."""
        logits, attention = self.forward(p, classes)
        mass = attention[:, : int(self.setting.m)].sum(-1).mean()
        targets = self.all_classes() if classes is None else classes
        return torch.nn.functional.cross_entropy(logits, targets), mass

    def attention_mass(self, p: dict[str, torch.Tensor]) -> float:
        """Mean attention on the relevant tokens over the population."""
        return float(self.loss_and_attention(p)[1])


def gradients(model: StylizedModel, p: dict[str, torch.Tensor], classes=None):
    """Gradients of the loss with respect to every parameter (autograd)."""
    return _loss_mass_gradients(model, p, classes)[::2]


def _loss_mass_gradients(model: StylizedModel, p, classes=None):
    """(loss, attention mass, gradients) from one forward and one backward pass."""
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in p.items()}
    value, mass = model.loss_and_attention(leaves, classes)
    grads = torch.autograd.grad(value, list(leaves.values()))
    return float(value.detach()), float(mass.detach()), dict(zip(leaves, grads))


@dataclass
class Descent:
    """A gradient-descent run of the full matrices, recorded at every step.

    ``t`` is the time of gradient flow that the steps approximate (the sum of step sizes);
    ``mu_ov``, ``mu_qk`` are the projections onto U and V, ``loss`` and ``alpha`` are
    population values, ``distance`` is the relative distance of (W_QK, W_OV) from the set.
    """

    parameterization: str
    eta_ov: float
    eta_qk: float
    batch_size: int | None
    t: np.ndarray
    mu_ov: np.ndarray
    mu_qk: np.ndarray
    loss: np.ndarray
    alpha: np.ndarray
    distance: np.ndarray
    params: dict

    def at_loss(self, level: float) -> dict[str, float]:
        """The state where the population loss first falls to ``level`` (linear interpolation
        between the two steps around it)."""
        below = np.flatnonzero(self.loss <= level)
        if len(below) == 0 or below[0] == 0:
            raise ValueError(f"the run never crossed loss {level:g} after its start")
        k = below[0]
        w = (self.loss[k - 1] - level) / (self.loss[k - 1] - self.loss[k])
        return {name: float((1 - w) * getattr(self, name)[k - 1] + w * getattr(self, name)[k])
                for name in ("t", "mu_ov", "mu_qk", "alpha")}


# The smallest loss a descent may run to. It records and stops on the population
# cross-entropy in float64, log(1 + sum_j e^{z_j - z_y}) computed as a logsumexp: its rounding
# error is about 1e-16 absolute, so a loss below ~1e-16 reads as 0 and the run stops early at
# the wrong place (at the default setting and r = 1, a target of 1e-18 stopped at a true
# loss of 2.6e-16; 1e-14 was recorded 1.5% off). At 1e-10 the recorded loss is within 2e-6
# (relative) of the one its state gives.
DESCENT_LOSS_FLOOR = 1e-10
MAX_STEPS = 200_000  # descend's default: it gives up (RuntimeError) after this many steps
FIRST_TIME = 1e3  # descend's default first_time


def check_descent_loss(name: str, value, setting: theory.Setting) -> float:
    """A target loss of a descent: a loss threshold of the reduced flow
    (:func:`qkov.theory.reduced.check_loss_threshold`), and at least DESCENT_LOSS_FLOOR."""
    value = theory.check_loss_threshold(name, value, setting)
    if value < DESCENT_LOSS_FLOOR:
        raise ParameterError(name, f"expected a loss >= {DESCENT_LOSS_FLOOR:g} for a descent "
                                   "(float64 reads the population cross-entropy below ~1e-16 "
                                   f"as 0), got {value:g}")
    return value


def descent_steps(setting: theory.Setting, eta_ov: float, eta_qk: float, target_loss: float,
                  step_fraction: float, first_time: float = FIRST_TIME) -> int:
    """The steps a CACO descent from 0 takes to ``target_loss`` (full batch; a minibatch run
    takes as many, give or take a few), counted before any: the step is
    ``step_fraction * max(t, first_time)``, and the reduced flow (a coarse integration)
    gives the flow time ``t`` at which the loss reaches the target. Exact to a step at the
    theory figures' settings (the descent follows the flow to ``step_fraction``)."""
    end = theory.integrate_until(setting, eta_ov, eta_qk, target_loss, rtol=1e-8,
                                 atol=1e-10).t[-1]
    early = first_time * step_fraction  # the step while t < first_time
    if end <= first_time:
        return math.ceil(end / early)
    steps = math.ceil(first_time / early)
    return steps + math.ceil(math.log(end / (steps * early)) / math.log1p(step_fraction))


def check_descent_steps(name: str, setting: theory.Setting, eta_ov: float, ratios,
                        target_loss: float, step_fraction: float) -> list[int]:
    """Per ratio r (QK rate r * eta_ov), the steps of the descent (:func:`descent_steps`);
    a ParameterError naming ``name`` where one would exceed MAX_STEPS, at which
    :func:`descend` gives up after doing them all."""
    steps = [descent_steps(setting, eta_ov, r * eta_ov, target_loss, step_fraction)
             for r in ratios]
    worst = max(range(len(steps)), key=steps.__getitem__)
    if steps[worst] > MAX_STEPS:
        raise ParameterError(name, f"{step_fraction:g}: the descent at r = {ratios[worst]:g} "
                                   f"to loss {target_loss:g} would take {steps[worst]:,} steps, "
                                   f"more than the {MAX_STEPS:,} after which it gives up; "
                                   "choose a larger step_fraction or target loss")
    return steps


def descend(model: StylizedModel, parameterization: str, eta_ov: float, eta_qk: float,
            target_loss: float, init_scale: float = 0.0, step_fraction: float = 1e-3,
            first_time: float = FIRST_TIME, max_step: float = math.inf,
            batch_size: int | None = None, seed: int = 0, max_steps: int = MAX_STEPS
            ) -> Descent:
    """Gradient descent on the full matrices until the population loss reaches ``target_loss``.

    The update of a circuit's matrices is ``- h eta grad``, with the step ``h`` growing with
    the flow time, ``h <= step_fraction * max(t, first_time)`` (and ``h <= max_step``): the
    reduced dynamics slow down like log t, so the relative discretisation error stays near
    ``step_fraction`` with a few thousand steps per decade. Factors (``W_Q, W_K, W_O, W_V``)
    grow exponentially from a small start, so ``h`` also keeps their relative change per step
    at most ``step_fraction``.
    ``batch_size=None`` uses the population (every class once); otherwise each step draws
    ``batch_size`` classes uniformly with replacement (stochastic gradient descent).
    """
    check_descent_loss("target_loss", target_loss, model.setting)
    p = model.initial_parameters(parameterization, init_scale)
    eta = {"qk": number("eta_qk", eta_qk, above=0), "ov": number("eta_ov", eta_ov, above=0)}
    generator = seeding.generator(seed)
    record = {k: [] for k in ("t", "loss", "alpha", "mu_ov", "mu_qk", "distance")}
    t = 0.0
    for _ in range(max_steps):
        classes = (None if batch_size is None
                   else torch.randint(model.M, (batch_size,), generator=generator))
        value, mass, grads = _loss_mass_gradients(model, p, classes)
        with torch.no_grad():
            if batch_size is not None:  # record population values, not the batch's
                value, mass = map(float, model.loss_and_attention(p))
            for key, x in zip(record, (t, value, mass, *model.place(p))):
                record[key].append(x)
            if value <= target_loss:
                break
            moves = {k: eta[circuit_of(k)] * g for k, g in grads.items()}
            h = min(max_step, step_fraction * min(
                [max(t, first_time)] + [float(torch.linalg.norm(p[k]) / torch.linalg.norm(v))
                                        for k, v in moves.items()
                                        if k in FACTORS and torch.any(v != 0)]))
            p = {k: w - h * moves[k] for k, w in p.items()}
            t += h
    else:
        raise RuntimeError(f"gradient descent ({parameterization}, eta_qk={eta_qk:g}) did not "
                           f"reach loss {target_loss:g} in {max_steps} steps")
    return Descent(parameterization, eta_ov, eta_qk, batch_size,
                   **{k: np.array(v) for k, v in record.items()}, params=p)


def _descend(kw: dict) -> Descent:  # for map_in_processes: one argument, picklable
    return descend(**kw)


def descents(calls: list[dict], workers: int) -> list[Descent]:
    """``descend(**kw)`` for every ``kw`` in ``calls``, spread over ``workers`` processes
    (each descent is one long chain of small steps: processes, not threads, speed it up)."""
    return map_in_processes(_descend, [(kw,) for kw in calls], workers)
