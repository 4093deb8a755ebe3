"""What the figures measure: attention on distinct tokens, probability of the correct token,
the 2-D heatmap over held-out sequences, loss and accuracy, the separability of attention,
seed intervals, and for fixed attention the loss sensitivity to sharper attention (paper
Fig. 3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.stats
import torch

from . import models, tasks
from .train import derived_seed

HEATMAP_BINS = np.linspace(0.0, 1.0, 6)  # bins of 0.2 on both axes


def attention_on_distinct(attention: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    """Attention mass (from the query position) on the class's distinct tokens: (..., B)."""
    return (attention * tasks.distinct_mask()[classes]).sum(-1)


def attention_on_class_identifying(attention: torch.Tensor, classes: torch.Tensor
                                    ) -> torch.Tensor:
    """Attention mass on the tokens that identify the class: its distinct tokens and the
    query token 5+c, which is a common token and also occurs in the context: (..., B)."""
    query = tasks.query_token(classes).unsqueeze(-1).expand(*attention.shape[:-1], 1)
    return attention_on_distinct(attention, classes) + attention.gather(-1, query).squeeze(-1)


def separability(attention: torch.Tensor, counts: torch.Tensor, classes: torch.Tensor
                 ) -> torch.Tensor:
    """The authors' separability diagnostic per sequence: the largest attention weight of a
    position holding a distinct token minus the smallest weight of a position holding a
    common token (positions, not tokens: a token's mass is shared by its occurrences).

    Positive where at least one distinct-token position outweighs the least-attended common
    one; NaN for a sequence without distinct tokens. attention, counts (..., B, V).
    """
    present = counts > 0
    per_position = attention / counts.clamp_min(1)
    distinct = tasks.distinct_mask()[classes] & present
    common = ~tasks.distinct_mask()[classes] & present
    top = torch.where(distinct, per_position, -torch.inf).amax(-1)
    bottom = torch.where(common, per_position, torch.inf).amin(-1)
    return torch.where(distinct.any(-1), top - bottom, torch.nan)


def seed_interval(values, level: float = 0.95) -> tuple[float, float]:
    """Mean over seeds and the half-width of its ``level`` Student-t interval (ddof = 1);
    the half-width is NaN for a single seed."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, float("nan")
    t = scipy.stats.t.ppf(0.5 + level / 2, len(values) - 1)
    return mean, float(t * values.std(ddof=1) / np.sqrt(len(values)))


def probability_correct(logits: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    targets = tasks.target_token(classes).unsqueeze(-1)
    return torch.softmax(logits, -1).gather(-1, targets).squeeze(-1)


@dataclass
class Evaluation:
    """One model on held-out sequences: per-sequence values and their summaries."""

    attention: np.ndarray  # mass on distinct tokens, per sequence
    probability: np.ndarray  # probability of the correct next token, per sequence
    loss: float
    accuracy: float
    separability: np.ndarray  # per sequence, see :func:`separability`

    def heatmap(self) -> np.ndarray:
        """(5, 5) percent of sequences; rows: probability bins (low to high), columns:
        attention bins (low to high). Values of exactly 1.0 fall in the last bin."""
        counts, _, _ = np.histogram2d(self.probability, self.attention,
                                      bins=[HEATMAP_BINS, HEATMAP_BINS])
        return 100.0 * counts / len(self.attention)


def held_out_batches(seed: int, T: int, n_batches: int, batch_size: int = 32,
                     per_class: bool = False):
    """Held-out sequences of a run: a stream of their own (not the training stream)."""
    stream = tasks.DataStream(derived_seed(seed, "eval"), T, batch_size, per_class)
    batches = [stream.batch_at(k) for k in range(n_batches)]
    return tasks.CountBatch(torch.cat([b.classes for b in batches]),
                            torch.cat([b.counts for b in batches]))


@torch.no_grad()
def evaluate(params: dict, spec: models.ModelSpec, batch: tasks.CountBatch) -> Evaluation:
    """Attention mass, probability of the correct token, loss and accuracy of one model."""
    logits, attention = models.count_logits(params, batch.counts, batch.classes,
                                            spec.fixed_alpha)
    targets = batch.targets
    loss = torch.nn.functional.cross_entropy(logits, targets).item()
    accuracy = (logits.argmax(-1) == targets).float().mean().item()
    return Evaluation(attention_on_distinct(attention, batch.classes).numpy(),
                      probability_correct(logits, batch.classes).numpy(), loss, accuracy,
                      separability(attention, batch.counts, batch.classes).numpy())


@torch.no_grad()
def learned_attention_measures(circuits: dict, counts: torch.Tensor, classes: torch.Tensor
                               ) -> np.ndarray:
    """Held-out loss, mean attention on distinct tokens and mean attention on
    class-identifying tokens of E models at once: (E, 3).

    ``circuits``: effective ``W_QK``, ``W_OV``, ``b`` stacked as
    :meth:`qkov.models.Ensemble.circuits` gives them (learned attention only); ``counts``
    (N, V) and ``classes`` (N,) for all models, or (E, N, V) and (E, N), one set per model.
    """
    E = len(circuits["W_QK"])
    counts, classes = counts.expand(E, *counts.shape[-2:]), classes.expand(E, classes.shape[-1])
    queries = tasks.query_token(classes).unsqueeze(-1).expand(*classes.shape, models.V)
    rows = torch.gather(circuits["W_QK"], 1, queries)  # (E, N, V): each query's row
    attention = torch.softmax(rows * models.SCALE + torch.log(counts), -1)
    logits = attention @ circuits["W_OV"].transpose(1, 2) + circuits["b"].unsqueeze(1)
    targets = tasks.target_token(classes).unsqueeze(-1)
    loss = (torch.logsumexp(logits, -1) - logits.gather(-1, targets).squeeze(-1)).mean(1)
    return torch.stack([loss, attention_on_distinct(attention, classes).mean(1),
                        attention_on_class_identifying(attention, classes).mean(1)],
                       1).double().numpy()


def heatmap_mean_std(heatmaps: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (over seeds, ddof=0) of per-seed percentage heatmaps."""
    stack = np.stack(heatmaps)
    return stack.mean(0), stack.std(0)


@torch.no_grad()
def fixed_attention_losses(params: dict, batch: tasks.CountBatch, alphas) -> np.ndarray:
    """Loss of OV circuits under fixed attention ``alpha``, for each alpha, same sequences.

    ``params``: one model's parameters (returns (n,) for n alphas), or circuits of E models
    stacked as :meth:`qkov.models.Ensemble.circuits` gives them (returns (E, n)); ``alphas``
    (n,) for every model or (E, n), one row per model.

    The hidden state is linear in alpha, h = alpha u_on + (1 - alpha) u_off, so the two
    OV products are computed once and every alpha costs only a softmax: this makes the
    finite-difference sensitivity (L(alpha) - L(alpha + d)) / d cheap and free of sampling
    noise (both losses see the same sequences).
    """
    _, w_ov = models.effective(params)
    single = w_ov.dim() == 2
    w_ov, bias = (w_ov[None], params["b"][None]) if single else (w_ov, params["b"])
    on = models.fixed_attention(batch.counts, batch.classes, 1.0)
    off = models.fixed_attention(batch.counts, batch.classes, 0.0)
    z_on, z_off = on @ w_ov.transpose(1, 2), off @ w_ov.transpose(1, 2)  # (E, N, V)
    targets = batch.targets.view(1, -1, 1).expand(len(w_ov), -1, 1)
    alphas = torch.as_tensor(np.asarray(alphas, dtype=np.float32)).expand(len(w_ov), -1)
    losses = []
    for alpha in alphas.T:
        alpha = alpha.view(-1, 1, 1)
        z = alpha * z_on + (1 - alpha) * z_off + bias.unsqueeze(1)
        losses.append((torch.logsumexp(z, -1) - z.gather(-1, targets).squeeze(-1)).mean(1))
    losses = torch.stack(losses, 1).double().numpy()
    return losses[0] if single else losses


def loss_sensitivity(params: dict, batch: tasks.CountBatch, alpha, d: float = 0.005
                     ) -> np.ndarray:
    """(L(alpha), (L(alpha) - L(alpha + d)) / d): the loss and the pressure to sharpen.

    One model (``alpha`` a number; returns (2,)) or E stacked (``alpha`` (E,); returns
    (E, 2)), as for :func:`fixed_attention_losses`. Where alpha + d > 1 (no sharper
    attention exists) the pressure is 0.
    """
    alpha = np.asarray(alpha, dtype=float)
    sharper = np.minimum(alpha + d, 1.0)
    losses = fixed_attention_losses(params, batch, np.stack([alpha, sharper], -1))
    here, there = losses[..., 0], losses[..., 1]
    pressure = np.where(alpha + d > 1.0, 0.0, (here - there) / d)
    return np.stack([here, pressure], -1)
