"""The trainer's earlier, two-ensemble step (qkov 0.1.0, commit a4cb0ba), kept
verbatim as the reference the new step is tested against (tests/test_models.py).

It holds one ensemble per OV kind, computes the gradients as separate tensors and applies
them with per-member learning-rate masks; it is slower, not different.
"""

from __future__ import annotations

import math

import torch

from qkov.synthetic import tasks
from qkov.synthetic.models import FIXED_ATTENTION, ModelSpec, fixed_attention, init_parameters

V = tasks.VOCAB
SCALE = 1.0 / math.sqrt(V)
QUERY_ROWS = slice(tasks.query_token(0), tasks.query_token(tasks.N_CLASSES))


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
        are returned as computed; :meth:`apply` zeroes their updates by masked learning rates.
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
