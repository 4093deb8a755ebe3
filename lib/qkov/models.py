"""The four single-layer attention models of the paper and their ensembles.

One attention layer with one-hot embeddings (``V = 50``); the last read position (the query
token) attends over all read positions with scores scaled by ``1/sqrt(50)``; no positions,
residual, MLP or LayerNorm. With one-hot inputs ``x``:

    score(query q, key token v) = W_QK[q, v] / sqrt(50),   W_QK = W_Q^T W_K (factorized)
    logits = W_OV h (+ b),   h = sum_pos a_pos x_pos,       W_OV = W_O W_V   (factorized)

FAFO, FACO, CAFO, CACO name the (attention, output) circuits: Factorized or Collapsed. A
*fixed-attention* model (paper Fig. 3) replaces the QK circuit by attention mass ``alpha``
spread uniformly over the class's distinct-token positions and ``1 - alpha`` over the rest.

Two code paths compute the same logits: :func:`dense_logits` on token sequences (B, T-1),
and :func:`count_logits` on the bag of token counts - positions with the same token get the
same score, so attention over positions equals attention over tokens weighted by counts.
An :class:`Ensemble` holds many models of one parameterization as stacked tensors (leading
axis = member) and computes loss and gradients of all of them in one batched pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import tasks
# The four names and their circuits are shared with the reduced dynamics of qkov.theory.
from .theory import PARAMETERIZATIONS, check_parameterization  # noqa: F401 (re-exported)
from .theory import circuit_kinds as circuits

FIXED_ATTENTION = "fixed"  # the QK "circuit" of a fixed-attention model
V = tasks.VOCAB
SCALE = 1.0 / math.sqrt(V)
QUERY_ROWS = slice(tasks.query_token(0), tasks.query_token(tasks.N_CLASSES))  # rows 5..8
INITS = ("default", "identity")


@dataclass(frozen=True)
class ModelSpec:
    """Architecture and initialisation of one model.

    parameterization: FAFO, FACO, CAFO or CACO (for fixed attention: the OV part counts).
    qk_init, ov_init: "default" (PyTorch's nn.Linear init, U(-1/sqrt(50), 1/sqrt(50))) or
        "identity" (``init_scale`` times the identity, for every matrix of the circuit).
    ov_bias: a bias on the logits (default-initialised when present).
    fixed_alpha: attention frozen at this mass on distinct tokens (the QK circuit is unused).
    """

    parameterization: str
    qk_init: str = "default"
    ov_init: str = "default"
    init_scale: float = 1e-6
    ov_bias: bool = False
    fixed_alpha: float | None = None

    def __post_init__(self):
        check_parameterization(self.parameterization)
        for name in ("qk_init", "ov_init"):
            if getattr(self, name) not in INITS:
                raise ValueError(f"parameter {name!r}: expected one of {INITS}, "
                                 f"got {getattr(self, name)!r}")
        if self.fixed_alpha is not None and not 0.0 <= self.fixed_alpha <= 1.0:
            raise ValueError(f"parameter 'fixed_alpha': expected a mass in [0, 1], "
                             f"got {self.fixed_alpha!r}")

    @property
    def qk(self) -> str:
        return FIXED_ATTENTION if self.fixed_alpha is not None else circuits(self.parameterization)[0]

    @property
    def ov(self) -> str:
        return circuits(self.parameterization)[1]

    @property
    def group(self) -> tuple[bool, str]:
        """Members with the same group share one :class:`Ensemble` (one batched code path)."""
        return self.qk == FIXED_ATTENTION, self.ov


def _init_matrix(kind: str, scale: float, generator: torch.Generator) -> torch.Tensor:
    if kind == "identity":
        return scale * torch.eye(V)
    bound = 1.0 / math.sqrt(V)  # nn.Linear(50, 50): kaiming_uniform(a=sqrt(5)) = 1/sqrt(fan_in)
    return (torch.rand(V, V, generator=generator) * 2 - 1) * bound


def init_parameters(spec: ModelSpec, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The model's parameters, drawn from ``generator`` in a fixed order.

    Names: ``W_QK`` or ``W_Q, W_K``; ``W_OV`` or ``W_O, W_V``; ``b`` (zeros without bias).
    Matrices act as in nn.Linear: ``W_QK[q, v]`` scores key token v for query token q, and
    ``logits = W_OV @ h``.
    """
    p = {}
    if spec.qk == "collapsed":
        p["W_QK"] = _init_matrix(spec.qk_init, spec.init_scale, generator)
    elif spec.qk == "factorized":
        p["W_Q"] = _init_matrix(spec.qk_init, spec.init_scale, generator)
        p["W_K"] = _init_matrix(spec.qk_init, spec.init_scale, generator)
    if spec.ov == "collapsed":
        p["W_OV"] = _init_matrix(spec.ov_init, spec.init_scale, generator)
    else:
        p["W_V"] = _init_matrix(spec.ov_init, spec.init_scale, generator)
        p["W_O"] = _init_matrix(spec.ov_init, spec.init_scale, generator)
    bound = 1.0 / math.sqrt(V)
    p["b"] = ((torch.rand(V, generator=generator) * 2 - 1) * bound if spec.ov_bias
              else torch.zeros(V))
    return p


def effective(p: dict[str, torch.Tensor]) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(W_QK, W_OV) of a model (W_QK is None for fixed attention); works on stacked members."""
    if "W_QK" in p:
        w_qk = p["W_QK"]
    elif "W_Q" in p:
        w_qk = p["W_Q"].transpose(-1, -2) @ p["W_K"]
    else:
        w_qk = None
    w_ov = p["W_OV"] if "W_OV" in p else p["W_O"] @ p["W_V"]
    return w_qk, w_ov


def fixed_attention(counts: torch.Tensor, classes: torch.Tensor, alpha) -> torch.Tensor:
    """Attention over tokens: ``alpha`` uniform over distinct-token positions, the rest uniform.

    counts (..., B, V), classes (..., B), alpha broadcastable to (..., B, 1).
    """
    distinct = tasks.distinct_mask()[classes].to(counts.dtype)
    on = counts * distinct
    off = counts - on
    n_on = on.sum(-1, keepdim=True)
    n_off = off.sum(-1, keepdim=True)
    # A sequence without distinct tokens (probability ~1e-12 at T = 64) attends uniformly.
    uniform = counts / (n_on + n_off)
    alpha = torch.as_tensor(alpha, dtype=counts.dtype)
    spread = alpha * on / n_on.clamp_min(1) + (1 - alpha) * off / n_off.clamp_min(1)
    return torch.where(n_on > 0, spread, uniform)


def count_attention(p, counts, classes, fixed_alpha=None) -> torch.Tensor:
    """Attention mass per token (..., B, V) from the query position, on the counts path."""
    if fixed_alpha is not None:
        return fixed_attention(counts, classes, fixed_alpha)
    w_qk, _ = effective(p)
    rows = _query_rows(w_qk, classes)
    scores = rows * SCALE + torch.log(counts)  # log 0 = -inf: absent tokens get no mass
    return torch.softmax(scores, dim=-1)


def _query_rows(w_qk: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    """Row W_QK[query(c)] for each sequence: (..., B, V)."""
    queries = tasks.query_token(classes)
    index = queries.unsqueeze(-1).expand(*queries.shape, V)
    return torch.gather(w_qk, -2, index)


def count_logits(p, counts, classes, fixed_alpha=None):
    """(logits, attention over tokens) on the counts path."""
    a = count_attention(p, counts, classes, fixed_alpha)
    _, w_ov = effective(p)
    return a @ w_ov.transpose(-1, -2) + p["b"].unsqueeze(-2), a


def dense_logits(p, tokens, fixed_alpha=None, classes=None):
    """(logits, attention over positions) on dense sequences ``tokens`` (B, T-1).

    The straightforward computation on one-hot (B, T-1, 50) tensors, for checking the
    counts path and as the benchmark's baseline shape.
    """
    x = torch.nn.functional.one_hot(tokens, V).float()
    if fixed_alpha is not None:
        distinct = tasks.distinct_mask()[classes]
        on = torch.gather(distinct, 1, tokens).float()
        off = 1 - on
        a = (fixed_alpha * on / on.sum(1, keepdim=True).clamp_min(1)
             + (1 - fixed_alpha) * off / off.sum(1, keepdim=True).clamp_min(1))
    else:
        w_qk, _ = effective(p)
        query = x[:, -1] @ w_qk  # (B, V): the query's row of W_QK
        scores = torch.einsum("bv,btv->bt", query, x) * SCALE
        a = torch.softmax(scores, dim=-1)
    h = torch.einsum("bt,btv->bv", a, x)
    _, w_ov = effective(p)
    return h @ w_ov.T + p["b"], a


# --- ensembles -----------------------------------------------------------------------------


class Ensemble:
    """Many models with the same OV circuit kind, stacked on a leading axis (members).

    ``params[name]`` has shape (E, ...). Collapsed- and factorized-QK members share one
    ensemble: every member carries ``W_QK`` and ``W_Q, W_K``; the ones its parameterization
    does not have stay zero (their learning rate is masked to zero), so the member computes
    exactly its own model while all members run through the same batched operations.
    Fixed-attention members form ensembles of their own.

    :meth:`loss_and_grads` computes, for all members at once, the mean cross-entropy on each
    member's own batch and its gradients, written out by hand: only the four query rows of
    W_QK ever receive gradient, and a factorized OV circuit is applied as W_O (W_V h)
    without forming W_O W_V. The test suite checks these gradients against autograd.
    """

    def __init__(self, specs: list[ModelSpec], generators: list[torch.Generator]):
        kinds = {(s.qk == FIXED_ATTENTION, s.ov) for s in specs}
        if len(kinds) != 1:
            raise ValueError(f"an Ensemble holds one OV kind, attention fixed or not; got {kinds}")
        self.specs = list(specs)
        self.ov = specs[0].ov
        self.fixed = specs[0].qk == FIXED_ATTENTION
        members = [init_parameters(s, g) for s, g in zip(specs, generators)]
        names = (() if self.fixed else ("W_QK", "W_Q", "W_K")) + (
            ("W_OV",) if self.ov == "collapsed" else ("W_V", "W_O")) + ("b",)
        zero = torch.zeros(V, V)
        self.params = {k: torch.stack([m.get(k, zero) for m in members]) for k in names}
        self.has_bias = torch.tensor([s.ov_bias for s in specs], dtype=torch.float32)
        self.qk_collapsed = torch.tensor([s.qk == "collapsed" for s in specs],
                                         dtype=torch.float32)
        self.fixed_alpha = (torch.tensor([s.fixed_alpha for s in specs]).view(-1, 1, 1)
                            if self.fixed else None)
        self._refresh()

    def _refresh(self):
        self.any_qk_collapsed = bool(self.qk_collapsed.any()) and not self.fixed
        self.any_qk_factorized = bool((1 - self.qk_collapsed).any()) and not self.fixed

    def __len__(self) -> int:
        return len(self.specs)

    def keep(self, index: torch.Tensor) -> None:
        """Keep only the members at ``index`` (in that order)."""
        self.specs = [self.specs[i] for i in index.tolist()]
        self.params = {k: v[index] for k, v in self.params.items()}
        self.has_bias = self.has_bias[index]
        self.qk_collapsed = self.qk_collapsed[index]
        if self.fixed_alpha is not None:
            self.fixed_alpha = self.fixed_alpha[index]
        self._refresh()

    def member(self, i: int) -> dict[str, torch.Tensor]:
        """Member ``i``'s own parameters (the names its parameterization has)."""
        own = init_parameters(self.specs[i], torch.Generator())
        return {k: self.params[k][i].clone() for k in own}

    def query_rows(self) -> torch.Tensor:
        """(E, 4, V): the rows of W_QK for the four query tokens."""
        p = self.params
        rows4 = None
        if self.any_qk_collapsed:
            rows4 = p["W_QK"][:, QUERY_ROWS]
        if self.any_qk_factorized:
            product = p["W_Q"][:, :, QUERY_ROWS].transpose(1, 2) @ p["W_K"]
            rows4 = product if rows4 is None else rows4 + product
        return rows4

    def attention(self, counts, classes, log_counts=None):
        """(E, B, V) attention over tokens for each member's batch."""
        if self.fixed:
            return fixed_attention(counts, classes, self.fixed_alpha)
        index = classes.unsqueeze(-1).expand(*classes.shape, V)
        scores = torch.gather(self.query_rows(), 1, index).mul_(SCALE)
        scores += torch.log(counts) if log_counts is None else log_counts
        return torch.softmax(scores, dim=-1)

    def logits(self, a):
        p = self.params
        bias = p["b"].unsqueeze(1)
        if self.ov == "collapsed":
            return torch.baddbmm(bias, a, p["W_OV"].transpose(1, 2)), None
        hidden = a @ p["W_V"].transpose(1, 2)  # (E, B, d): W_V h
        return torch.baddbmm(bias, hidden, p["W_O"].transpose(1, 2)), hidden

    def loss_and_grads(self, counts, classes, log_counts=None):
        """Per-member mean loss (E,) and gradients {name: (E, ...)} on batches (E, B, V).

        Gradients of parameters a member does not have (its unused QK form, an absent bias)
        are returned as computed; :meth:`learning_rate_masks` zeroes their updates.
        """
        p = self.params
        a = self.attention(counts, classes, log_counts)
        z, hidden = self.logits(a)
        targets = tasks.target_token(classes).unsqueeze(-1)
        probs = torch.softmax(z, dim=-1)
        losses = -torch.log(torch.gather(probs, -1, targets)).squeeze(-1)
        dz = probs.scatter_add_(-1, targets, torch.full(targets.shape, -1.0))
        dz /= z.shape[1]
        grads = {"b": dz.sum(1)}
        dz_t = dz.transpose(1, 2)
        if self.ov == "collapsed":
            grads["W_OV"] = dz_t @ a
            da = None if self.fixed else dz @ p["W_OV"]
        else:
            grads["W_O"] = dz_t @ hidden
            dhidden = dz @ p["W_O"]
            grads["W_V"] = dhidden.transpose(1, 2) @ a
            da = None if self.fixed else dhidden @ p["W_V"]
        if not self.fixed:
            dscores = (da - (a * da).sum(-1, keepdim=True)).mul_(a).mul_(SCALE)
            index = classes.unsqueeze(-1).expand_as(dscores)
            g_rows4 = torch.zeros(len(self), tasks.N_CLASSES, V).scatter_add_(1, index, dscores)
            grads["query_rows"] = g_rows4  # W_QK's gradient lives in the query rows only
            if self.any_qk_factorized:
                # W_QK = W_Q^T W_K with gradient G: dW_Q = W_K G^T, dW_K = W_Q G.
                grads["W_Q_query_columns"] = p["W_K"] @ g_rows4.transpose(1, 2)
                grads["W_K"] = p["W_Q"][:, :, QUERY_ROWS] @ g_rows4
        return losses.mean(1), grads

    def apply(self, grads, lr_qk: torch.Tensor, lr_ov: torch.Tensor) -> None:
        """One SGD step with per-member learning rates (E,) for the QK and the OV circuit."""
        p = self.params
        ov3 = lr_ov.view(-1, 1, 1)
        for name in ("W_OV", "W_O", "W_V"):
            if name in grads:
                p[name].addcmul_(ov3, grads[name], value=-1.0)
        p["b"].addcmul_((lr_ov * self.has_bias).view(-1, 1), grads["b"], value=-1.0)
        if self.fixed:
            return
        if self.any_qk_collapsed:
            p["W_QK"][:, QUERY_ROWS].addcmul_((lr_qk * self.qk_collapsed).view(-1, 1, 1),
                                              grads["query_rows"], value=-1.0)
        if self.any_qk_factorized:
            lr_f = (lr_qk * (1 - self.qk_collapsed)).view(-1, 1, 1)
            p["W_Q"][:, :, QUERY_ROWS].addcmul_(lr_f, grads["W_Q_query_columns"], value=-1.0)
            p["W_K"].addcmul_(lr_f, grads["W_K"], value=-1.0)
