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
An :class:`Ensemble` holds many models, of any of the four parameterizations, as stacked
tensors (leading axis = member) and takes an SGD step of all of them in one batched pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..circuits import check_parameterization, effective
from ..circuits import circuit_kinds as circuits
from . import tasks

FIXED_ATTENTION = "fixed"  # the QK "circuit" of a fixed-attention model
V = tasks.VOCAB
SCALE = 1.0 / math.sqrt(V)
QUERY_ROWS = slice(tasks.query_token(0), tasks.query_token(tasks.N_CLASSES))  # rows 5..8
QUERIES = tasks.N_CLASSES  # query tokens, one per class
INITS = ("default", "identity")


@dataclass(frozen=True)
class ModelConfig:
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


def init_parameters(config: ModelConfig, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The model's parameters, drawn from ``generator`` in a fixed order.

    Names: ``W_QK`` or ``W_Q, W_K``; ``W_OV`` or ``W_O, W_V``; ``b`` (zeros without bias).
    Matrices act as in nn.Linear: ``W_QK[q, v]`` scores key token v for query token q, and
    ``logits = W_OV @ h``.
    """
    p = {}
    if config.qk == "collapsed":
        p["W_QK"] = _init_matrix(config.qk_init, config.init_scale, generator)
    elif config.qk == "factorized":
        p["W_Q"] = _init_matrix(config.qk_init, config.init_scale, generator)
        p["W_K"] = _init_matrix(config.qk_init, config.init_scale, generator)
    if config.ov == "collapsed":
        p["W_OV"] = _init_matrix(config.ov_init, config.init_scale, generator)
    else:
        p["W_V"] = _init_matrix(config.ov_init, config.init_scale, generator)
        p["W_O"] = _init_matrix(config.ov_init, config.init_scale, generator)
    bound = 1.0 / math.sqrt(V)
    p["b"] = ((torch.rand(V, generator=generator) * 2 - 1) * bound if config.ov_bias
              else torch.zeros(V))
    return p


@dataclass
class FixedAttentionParts:
    """What fixed attention takes from the data alone, for any alpha: with ``off`` the
    attention spread uniformly over the positions of non-distinct tokens and ``step`` the
    change to spreading it over the distinct ones, attention at alpha is ``off + alpha *
    step`` (one addcmul per alpha). A sequence without distinct tokens (probability
    ~1e-12 at T = 64) has ``step`` 0: it attends uniformly, whatever alpha.
    """

    off: torch.Tensor
    step: torch.Tensor

    @classmethod
    def of(cls, counts: torch.Tensor, classes: torch.Tensor) -> FixedAttentionParts:
        """counts (..., B, V), classes (..., B)."""
        distinct = tasks.distinct_mask()[classes].to(counts.dtype)
        on = counts * distinct
        off = counts - on
        n_on = on.sum(-1, keepdim=True)
        n_off = off.sum(-1, keepdim=True)
        spread_off = off / n_off.clamp_min(1)
        step = (on / n_on.clamp_min(1) - spread_off).masked_fill_(n_on == 0, 0.0)
        return cls(spread_off, step)

    def at(self, alpha, out: torch.Tensor | None = None) -> torch.Tensor:
        """Attention at ``alpha`` (a number, or broadcastable against the parts)."""
        alpha = torch.as_tensor(alpha, dtype=self.off.dtype)
        return torch.addcmul(self.off, alpha, self.step, out=out)


def fixed_attention(counts: torch.Tensor, classes: torch.Tensor, alpha) -> torch.Tensor:
    """Attention over tokens: ``alpha`` uniform over distinct-token positions, the rest uniform.

    counts (..., B, V), classes (..., B), alpha broadcastable to (..., B, 1).
    """
    return FixedAttentionParts.of(counts, classes).at(alpha)


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


def dense_logits(p, tokens, fixed_alpha=None, classes=None, cut: str = "none"):
    """(logits, attention over positions) on dense sequences ``tokens`` (B, T-1).

    The straightforward computation on one-hot (B, T-1, 50) tensors, for checking the
    counts path and as the benchmark's baseline shape. With a ``cut`` of the query-token
    shortcut (:mod:`qkov.synthetic.tasks`), the query (the last position) does not attend to
    itself: its own attention weight is 0 (learned attention only).
    """
    x = torch.nn.functional.one_hot(tokens, V).float()
    if fixed_alpha is not None and tasks.check_cut(cut) != "none":
        raise ValueError("dense_logits: a cut of the shortcut needs learned attention; fixed "
                         "attention (fixed_alpha) spreads over every position")
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
        if tasks.check_cut(cut) != "none":
            scores = scores.masked_fill(torch.arange(scores.shape[1]) == scores.shape[1] - 1,
                                        -math.inf)
        a = torch.softmax(scores, dim=-1)
    h = torch.einsum("bt,btv->bv", a, x)
    _, w_ov = effective(p)
    return h @ w_ov.T + p["b"], a


# --- what the factors say -------------------------------------------------------------------

# The tokens a circuit's gradient reaches. Rows: the QK circuit's gradient lives on the query
# tokens' rows of W_QK, the OV circuit's on the target tokens' rows of W_OV (with the
# attended mix of tokens as input). Columns: the class-identifying tokens (every class's
# distinct tokens and the query tokens), where training moves both circuits.
RATE_ROWS = {"qk": tasks.query_token(torch.arange(tasks.N_CLASSES)),
             "ov": tasks.target_token(torch.arange(tasks.N_CLASSES))}
RATE_COLUMNS = torch.cat([tasks.distinct_mask().any(0).nonzero().flatten(),
                          tasks.query_token(torch.arange(tasks.N_CLASSES))])


def factor_measures(p: dict, configs: list[ModelConfig]) -> dict[str, torch.Tensor]:
    """Per member (stacked parameters ``p`` in the ensemble's all-factorized storage) and
    circuit, float64 (E,):

    * ``rate_qk``, ``rate_ov``: the factor of the circuit's effective learning rate. Gradient
      flow on ``W = A B`` moves ``W`` as ``-eta (A A^T G + G B^T B)`` (the theory chapter's
      eq-theory-product-flow): the gradient is scaled by ``A A^T`` on its rows and
      ``B^T B`` on its columns. The rate factor is the mean diagonal of ``A A^T`` over the
      rows the gradient reaches (:data:`RATE_ROWS`) plus the mean diagonal of ``B^T B`` over
      the class-identifying columns (:data:`RATE_COLUMNS`): ``phi^2 + psi^2`` of the theory's
      one-direction model. 1 for a collapsed circuit; about 2/3 for a pair at PyTorch's
      default initialisation; 2e-12 for a pair at 1e-6 I.
    * ``conserved_qk``, ``conserved_ov``: the authors' measure of the conserved quantity
      ``A^T A - B B^T`` (their notebooks, Fig. 2 row 1, CAFO): its Frobenius norm over the
      larger norm of its two terms (0 for balanced factors; gradient flow keeps the
      quantity, not this ratio). NaN for a collapsed circuit.
    """
    E = len(configs)
    out = {}
    # (A, B) of W = A B: QK: A = W_Q^T, B = W_K; OV: A = W_O, B = W_V.
    for circuit, a_name, b_name, transpose_a in (("qk", "W_Q", "W_K", True),
                                                 ("ov", "W_O", "W_V", False)):
        factorized = torch.tensor([config.qk == "factorized" if circuit == "qk"
                                   else config.ov == "factorized" for config in configs])
        rate = torch.ones(E, dtype=torch.float64)
        conserved = torch.full((E,), math.nan, dtype=torch.float64)
        if a_name in p and factorized.any():
            a = p[a_name][factorized].double()
            a = a.transpose(1, 2) if transpose_a else a
            b = p[b_name][factorized].double()
            rows = (a[:, RATE_ROWS[circuit]] ** 2).sum(-1).mean(-1)  # diag(A A^T) on the rows
            columns = (b[:, :, RATE_COLUMNS] ** 2).sum(1).mean(-1)  # diag(B^T B), columns
            rate[factorized] = rows + columns
            ata, bbt = a.transpose(1, 2) @ a, b @ b.transpose(1, 2)
            norm = torch.linalg.matrix_norm
            conserved[factorized] = norm(ata - bbt) / torch.maximum(
                torch.maximum(norm(ata), norm(bbt)), torch.tensor(1e-300))
        out[f"rate_{circuit}"], out[f"conserved_{circuit}"] = rate, conserved
    return out


# --- ensembles -----------------------------------------------------------------------------


@dataclass
class EnsembleBatch:
    """One step's data for every member of an :class:`Ensemble` (leading axis = member).

    log_counts: (E, B, V) log of the token counts (-inf for absent tokens); class_onehot:
    (E, B, 4); targets: (E, B, 1) index of the correct next token; attention: (E, B, V), only
    for fixed-attention members (their attention does not depend on the parameters).
    """

    log_counts: torch.Tensor | None
    class_onehot: torch.Tensor | None
    targets: torch.Tensor
    attention: torch.Tensor | None = None

    @classmethod
    def from_counts(cls, counts: torch.Tensor, classes: torch.Tensor,
                    fixed_alpha: torch.Tensor | None = None) -> EnsembleBatch:
        """From counts (..., B, V) and classes (..., B); ``fixed_alpha`` broadcastable to
        (..., B, 1) for fixed-attention members."""
        targets = tasks.target_token(classes).unsqueeze(-1)
        if fixed_alpha is not None:
            return cls(None, None, targets, fixed_attention(counts, classes, fixed_alpha))
        onehot = torch.nn.functional.one_hot(classes, tasks.N_CLASSES).to(counts.dtype)
        return cls(log_counts(counts), onehot, targets)

    def select(self, index) -> EnsembleBatch:
        """The same data for the members at ``index`` of the leading axes."""
        return EnsembleBatch(*(None if x is None else x[index] for x in
                               (self.log_counts, self.class_onehot, self.targets,
                                self.attention)))


def log_counts(counts: torch.Tensor) -> torch.Tensor:
    """log of token counts, -inf for absent tokens (they get no attention)."""
    # log is slow on zeros, so they are masked
    return torch.log(counts.clamp_min(1)).masked_fill_(counts == 0, -math.inf)


_IDENTITY = torch.eye(V)


def mean_losses(p_target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the last axis from the probabilities of the correct token."""
    return -torch.log(p_target).mean(-1)


def ensemble_order(configs: list[ModelConfig]) -> list[int]:
    """The order an :class:`Ensemble` stores members in: collapsed OV circuits first.

    With the two OV kinds in two blocks, the block of collapsed circuits skips the products
    with its identity factor (views of contiguous blocks cost nothing).
    """
    return sorted(range(len(configs)), key=lambda i: configs[i].ov == "factorized")


class Ensemble:
    """Many models stacked on a leading axis (members), trained by one batched step.

    Every member is stored in the fully factorized form ``W_QK = W_Q^T W_K``,
    ``W_OV = W_O W_V``: a collapsed circuit is a factorized one whose first factor is the
    identity and never moves. Products with the identity and additions of zero are exact in
    floating point, so a collapsed member computes exactly its own model while all four
    parameterizations run through the same operations: one ensemble, one set of kernels
    per step however the members are mixed. Members are stored collapsed-OV first
    (:func:`ensemble_order`) so that the identity ``W_V`` is skipped, not multiplied.
    Fixed-attention members (paper Fig. 3) have no QK circuit and form ensembles of their own.

    :meth:`step` computes each member's mean cross-entropy on its own batch and takes one
    SGD step, with gradients written out by hand: only the four query columns of ``W_Q``
    (the rows of ``W_QK`` the query tokens read) ever receive gradient, a factorized OV
    circuit is applied as ``W_O (W_V h)`` without forming the product, and the updates of
    ``W_O``, ``W_V`` and ``W_K`` are folded into their gradient's matrix product. The
    test suite checks it against autograd, step after step.
    """

    def __init__(self, configs: list[ModelConfig], generators: list[torch.Generator]):
        if len({s.qk == FIXED_ATTENTION for s in configs}) != 1:
            raise ValueError("an Ensemble holds fixed-attention members or none; got both")
        if ensemble_order(configs) != list(range(len(configs))):
            raise ValueError("an Ensemble stores collapsed-OV members first: "
                             "order the configs by models.ensemble_order")
        self.configs = list(configs)
        self.fixed = configs[0].qk == FIXED_ATTENTION
        stored = []
        for config, generator in zip(configs, generators):
            own = init_parameters(config, generator)  # the draws of a model trained alone
            stored.append({
                "W_Q": own.get("W_Q", _IDENTITY), "W_K": own.get("W_K", own.get("W_QK")),
                "W_V": own.get("W_V", _IDENTITY), "W_O": own.get("W_O", own.get("W_OV")),
                "b": own["b"],
            })
        names = (() if self.fixed else ("W_Q", "W_K")) + ("W_V", "W_O", "b")
        self.params = {k: torch.stack([m[k] for m in stored]) for k in names}
        self.qk_factorized = torch.tensor([float(s.qk == "factorized") for s in configs])
        self.has_bias = torch.tensor([float(s.ov_bias) for s in configs])
        self._refresh()

    def _refresh(self):
        """Views the step reads and updates in place, made once per membership: on these
        small tensors every operation, even a view, costs microseconds."""
        k = self.n_collapsed_ov = sum(s.ov == "collapsed" for s in self.configs)
        self.any_bias = any(s.ov_bias for s in self.configs)
        self.any_qk_factorized = any(s.qk == "factorized" for s in self.configs)
        self.fixed_alpha = (torch.tensor([s.fixed_alpha for s in self.configs]).view(-1, 1, 1)
                            if self.fixed else None)
        p = self.params
        v = {"W_O_c": p["W_O"][:k], "W_O_f": p["W_O"][k:], "W_V_f": p["W_V"][k:],
             "b_c": p["b"][:k].unsqueeze(1), "b_f": p["b"][k:].unsqueeze(1),
             "bias_mask": self.has_bias.view(-1, 1), "qk_mask": self.qk_factorized.view(-1, 1, 1)}
        v |= {"W_O_c_T": v["W_O_c"].transpose(1, 2), "W_O_f_T": v["W_O_f"].transpose(1, 2),
              "W_V_f_T": v["W_V_f"].transpose(1, 2)}
        if not self.fixed:
            v["W_Q_q"] = p["W_Q"][:, :, QUERY_ROWS]  # (E, V, 4): the columns queries read
            v["W_Q_q_T"] = v["W_Q_q"].transpose(1, 2)
        self._views = v
        self._buffers = None  # the step's work space, made for a batch size by the first step
        self._ov_rate_cache = None  # ((lr_ov, its version, batch size), rates) of the last step

    def _work_space(self, n_seq: int) -> dict[str, torch.Tensor]:
        """Every tensor the step writes, made once per batch size: a fresh tensor of a few
        hundred kB per operation would cost an allocation (and page faults) each step."""
        if self._buffers is None or self._buffers["n_seq"] != n_seq:
            E, k = len(self), self.n_collapsed_ov
            b = {name: torch.empty(E, n_seq, V)
                 for name in ("scores", "a", "z", "dz", "da", "a_rate", "a_da")}
            b |= {name: torch.empty(E - k, n_seq, V) for name in ("hidden", "dhidden",
                                                                   "hidden_rate")}
            for name in ("a", "z", "dz", "da", "a_rate"):
                b[f"{name}_c"], b[f"{name}_f"] = b[name][:k], b[name][k:]
            b |= {"dz_c_T": b["dz_c"].transpose(1, 2), "dz_f_T": b["dz_f"].transpose(1, 2),
                  "dhidden_T": b["dhidden"].transpose(1, 2),
                  "minus_one": torch.full((E, n_seq, 1), -1.0), "n_seq": n_seq,
                  "rows": torch.empty(E, QUERIES, V), "dz_sum": torch.empty(E, V),
                  "da_dot": torch.empty(E, n_seq, 1), "g_rows": torch.empty(E, QUERIES, V),
                  "g_q": torch.empty(E, V, QUERIES), "lr_qk": torch.empty(E),
                  "W_Q_rate": torch.empty(E, V, QUERIES), "qk_rate": torch.empty(E, 1, 1)}
            b["g_rows_T"] = b["g_rows"].transpose(1, 2)
            self._buffers = b
        return self._buffers

    def _ov_rates(self, lr_ov: torch.Tensor, n_seq: int) -> dict[str, torch.Tensor]:
        """Per-member OV rates over ``n_seq`` in the shapes the step reads, computed once
        for as long as ``lr_ov`` is the same tensor, unchanged (the trainer passes one
        tensor from step to step)."""
        key = lr_ov, lr_ov._version, n_seq
        cached = self._ov_rate_cache
        if cached is None or cached[0][0] is not key[0] or cached[0][1:] != key[1:]:
            k = self.n_collapsed_ov
            rate = (lr_ov / n_seq).view(-1, 1, 1)
            cached = self._ov_rate_cache = key, {
                "c": rate[:k], "f": rate[k:], "bias": rate.view(-1, 1) * self._views["bias_mask"]}
        return cached[1]

    def __len__(self) -> int:
        return len(self.configs)

    def keep(self, index: torch.Tensor) -> None:
        """Keep only the members at ``index`` (increasing, so that the order stays)."""
        self.configs = [self.configs[i] for i in index.tolist()]
        self.params = {k: v[index] for k, v in self.params.items()}
        self.qk_factorized = self.qk_factorized[index]
        self.has_bias = self.has_bias[index]
        self._refresh()

    def member(self, i: int) -> dict[str, torch.Tensor]:
        """Member ``i``'s own parameters (the names its parameterization has)."""
        config, p = self.configs[i], self.params
        own = {}
        if config.qk == "collapsed":
            own["W_QK"] = p["W_K"][i].clone()
        elif config.qk == "factorized":
            own["W_Q"], own["W_K"] = p["W_Q"][i].clone(), p["W_K"][i].clone()
        if config.ov == "collapsed":
            own["W_OV"] = p["W_O"][i].clone()
        else:
            own["W_V"], own["W_O"] = p["W_V"][i].clone(), p["W_O"][i].clone()
        own["b"] = p["b"][i].clone()
        return own

    def circuits(self, index=None) -> dict[str, torch.Tensor]:
        """The effective circuits of the members at ``index`` (all by default), stacked:
        ``W_QK`` (absent for fixed attention), ``W_OV`` and ``b``; and per member and
        circuit (``qk``, ``ov``) what its factors say about its training
        (:func:`factor_measures`): ``rate_qk``, ``rate_ov`` and ``conserved_qk``,
        ``conserved_ov``, float64 (E,)."""
        p = {k: v if index is None else v[index] for k, v in self.params.items()}
        w_qk, w_ov = effective(p)
        positions = range(len(self)) if index is None else \
            torch.arange(len(self))[index].view(-1).tolist()  # ints, slices, masks, positions
        configs = [self.configs[i] for i in positions]
        measures = factor_measures(p, configs)
        return ({} if w_qk is None else {"W_QK": w_qk}) | {"W_OV": w_ov, "b": p["b"].clone()} \
            | measures

    def batch(self, counts: torch.Tensor, classes: torch.Tensor) -> EnsembleBatch:
        """Data for :meth:`step` from counts (..., E, B, V) and classes (..., E, B)."""
        return EnsembleBatch.from_counts(counts, classes, self.fixed_alpha)

    def step(self, batch: EnsembleBatch, lr_qk: torch.Tensor, lr_ov: torch.Tensor | float
             ) -> torch.Tensor:
        """One SGD step of every member, as batched PyTorch operations.

        lr_qk: per-member QK learning rates (E,); lr_ov: per-member OV rates (E,), or one
        number for all (which saves passes over the data). Returns the probability each
        member gave the correct next token of each sequence, before the step: (E, B); its
        :func:`mean_losses` are the members' losses. (The log and mean are left to the
        caller, who can take them for many steps at once: every operation counts here.)
        """
        p, v, k = self.params, self._views, self.n_collapsed_ov
        n_seq = batch.targets.shape[1]
        w = self._work_space(n_seq)
        softmax = torch.ops.aten._softmax.out
        if self.fixed:
            a = batch.attention
            a_c, a_f = a[:k], a[k:]
        else:
            rows = torch.bmm(v["W_Q_q_T"], p["W_K"], out=w["rows"])  # (E, 4, V): W_QK[query]
            torch.baddbmm(batch.log_counts, batch.class_onehot, rows, alpha=SCALE,
                          out=w["scores"])
            a, a_c, a_f = softmax(w["scores"], -1, False, out=w["a"]), w["a_c"], w["a_f"]
        # Collapsed-OV members (the first k) read h itself where W_V h stands: W_V = I.
        # An operation on an empty block (no member of that kind) is skipped, not run: it
        # would change nothing and cost its fixed overhead.
        collapsed, factorized = k > 0, k < len(self)
        if factorized:
            hidden = torch.bmm(a_f, v["W_V_f_T"], out=w["hidden"])
            torch.baddbmm(v["b_f"], hidden, v["W_O_f_T"], out=w["z_f"])
        if collapsed:
            torch.baddbmm(v["b_c"], a_c, v["W_O_c_T"], out=w["z_c"])
        dz = softmax(w["z"], -1, False, out=w["dz"])
        p_target = torch.gather(dz, -1, batch.targets)  # a new tensor: the caller keeps it
        dz.scatter_add_(-1, batch.targets, w["minus_one"])  # n_seq x dLoss/dlogits
        if factorized:
            dhidden = torch.bmm(w["dz_f"], v["W_O_f"], out=w["dhidden"])
        if not self.fixed:  # n_seq x dLoss/da, read before W_O and W_V move
            if collapsed:
                torch.bmm(w["dz_c"], v["W_O_c"], out=w["da_c"])
            if factorized:
                torch.bmm(dhidden, v["W_V_f"], out=w["da_f"])
        # SGD, each learning rate folded into the gradient's product (alpha, or an operand).
        mul = torch.mul
        if isinstance(lr_ov, torch.Tensor):
            rate = self._ov_rates(lr_ov, n_seq)
            if collapsed:
                v["W_O_c"].baddbmm_(w["dz_c_T"], mul(a_c, rate["c"], out=w["a_rate_c"]),
                                    alpha=-1.0)
            if factorized:
                v["W_O_f"].baddbmm_(w["dz_f_T"], mul(hidden, rate["f"], out=w["hidden_rate"]),
                                    alpha=-1.0)
                v["W_V_f"].baddbmm_(w["dhidden_T"], mul(a_f, rate["f"], out=w["a_rate_f"]),
                                    alpha=-1.0)
            if self.any_bias:
                p["b"].addcmul_(rate["bias"], torch.sum(dz, 1, out=w["dz_sum"]), value=-1.0)
        else:
            rate = lr_ov / n_seq
            if collapsed:
                v["W_O_c"].baddbmm_(w["dz_c_T"], a_c, alpha=-rate)
            if factorized:
                v["W_O_f"].baddbmm_(w["dz_f_T"], hidden, alpha=-rate)
                v["W_V_f"].baddbmm_(w["dhidden_T"], a_f, alpha=-rate)
            if self.any_bias:
                p["b"].addcmul_(v["bias_mask"], torch.sum(dz, 1, out=w["dz_sum"]), value=-rate)
        if not self.fixed:
            # n_seq/SCALE x dLoss/dscores, in place of dLoss/da (read no more)
            da = w["da"]
            dot = torch.sum(mul(a, da, out=w["a_da"]), -1, keepdim=True, out=w["da_dot"])
            dscores = da.sub_(dot).mul_(a)
            g_rows = torch.bmm(batch.class_onehot.transpose(1, 2), dscores,
                               out=w["g_rows"])  # (E, 4, V)
            # W_QK = W_Q^T W_K with gradient G on the query rows: dW_Q = W_K G^T, dW_K = W_Q G.
            rate = mul(lr_qk, SCALE / n_seq, out=w["lr_qk"]).view(-1, 1, 1)
            if self.any_qk_factorized:  # (W_Q of a collapsed circuit is I and stays so)
                g_q = torch.bmm(p["W_K"], w["g_rows_T"], out=w["g_q"])
            p["W_K"].baddbmm_(mul(v["W_Q_q"], rate, out=w["W_Q_rate"]), g_rows, alpha=-1.0)
            if self.any_qk_factorized:
                v["W_Q_q"].addcmul_(mul(rate, v["qk_mask"], out=w["qk_rate"]), g_q, value=-1.0)
        return p_target.squeeze(-1)
