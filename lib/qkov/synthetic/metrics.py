"""What the figures measure: attention on distinct tokens, probability of the correct token,
the 2-D heatmap over held-out sequences, loss and accuracy, the separability of attention,
and for fixed attention the loss sensitivity to sharper attention (paper Fig. 3). Intervals
over seeds are :mod:`qkov.stats`'s."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..circuits import effective
from ..seeding import derived_seed
from . import models, tasks

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
                     per_class: bool = False, cut: str = "none"):
    """Held-out sequences of a run: a stream of their own (not the training stream)."""
    stream = tasks.DataStream(derived_seed(seed, "eval"), T, batch_size, per_class, cut)
    batches = [stream.batch_at(k) for k in range(n_batches)]
    return tasks.CountBatch(torch.cat([b.classes for b in batches]),
                            torch.cat([b.counts for b in batches]))


@torch.no_grad()
def evaluate(weights: dict, config: models.ModelConfig, batch: tasks.CountBatch) -> Evaluation:
    """Attention mass, probability of the correct token, loss and accuracy of one model."""
    logits, attention = models.count_logits(weights, batch.counts, batch.classes,
                                            config.fixed_alpha)
    targets = batch.targets
    loss = torch.nn.functional.cross_entropy(logits, targets).item()
    accuracy = (logits.argmax(-1) == targets).float().mean().item()
    return Evaluation(attention_on_distinct(attention, batch.classes).numpy(),
                      probability_correct(logits, batch.classes).numpy(), loss, accuracy,
                      separability(attention, batch.counts, batch.classes).numpy())


@dataclass
class RunMeasures:
    """One trained run (learned attention) on its held-out sequences: the mean attention on
    distinct and on class-identifying tokens, on the query token 5+c (its own position and
    its copies in the context), on the other classes' query tokens, and on the target token
    1+c (a common token that occurs in most contexts: an OV circuit that copies its input to
    the same logit could read the answer off it); the held-out loss, the epochs trained and
    whether it stopped early (reached its early-stop loss)."""

    distinct: float
    class_identifying: float
    query_token: float
    other_queries: float
    target: float
    loss: float
    epochs: int
    reached: bool


@torch.no_grad()
def measure_run(result, eval_batches: int) -> RunMeasures:
    """:class:`RunMeasures` of a ``qkov.synthetic.train.RunResult`` on ``eval_batches``
    held-out batches of its own (seed, T, task)."""
    c = result.config
    batch = held_out_batches(c.seed, c.T, eval_batches, cut=c.cut)
    logits, attention = models.count_logits(result.params, batch.counts, batch.classes,
                                            c.model.fixed_alpha)
    loss = torch.nn.functional.cross_entropy(logits, batch.targets).item()
    def on(tokens):  # mean attention mass on one token per sequence
        return float(attention.gather(-1, tokens.unsqueeze(-1)).numpy().mean())

    queries = attention[:, tasks.query_token(0):tasks.query_token(tasks.N_CLASSES)].sum(-1)
    return RunMeasures(float(attention_on_distinct(attention, batch.classes).numpy().mean()),
                       float(attention_on_class_identifying(attention, batch.classes
                                                            ).numpy().mean()),
                       on(batch.queries), float(queries.numpy().mean()) - on(batch.queries),
                       on(batch.targets), loss, result.epochs_run, result.early_stopped)


@torch.no_grad()
def learned_attention_measures(circuits: dict, counts: torch.Tensor, classes: torch.Tensor
                               ) -> np.ndarray:
    """Held-out loss, mean attention on distinct tokens and mean attention on
    class-identifying tokens of E models at once: (E, 3).

    ``circuits``: effective ``W_QK``, ``W_OV``, ``b`` stacked as
    :meth:`qkov.synthetic.models.Ensemble.circuits` gives them (learned attention only); ``counts``
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


class SharpeningProbe:
    """Held-out sequences prepared for measuring, under fixed attention ``alpha``, the loss
    and the pressure to sharpen, ``(L(alpha), (L(alpha) - L(alpha + d)) / d)``, of many OV
    circuits at once and again every epoch (paper Fig. 3).

    The hidden state is linear in alpha, h(alpha) = h_off + alpha s with s = h_on - h_off,
    so the logits are z = h_off W_OV^T + b + alpha D with D = s W_OV^T, the sharper
    attention's are z + d D, and per sequence

        L(alpha) - L(alpha + d) = d D[target] - log sum_i softmax(z)_i exp(d D_i),

    evaluated with log1p and expm1. Taking the difference of two nearly equal mean losses
    instead loses most of float32's digits: near L = log 50 an error of up to 1e-4 on a
    pressure of about 0.04.
    h_off is non-zero on the 10 common tokens only, and s on the sequence's class support
    (common and distinct tokens, 20), so sequences are grouped by class and the products
    read those rows of W_OV^T only. They go through in chunks of ``chunk`` so that the work
    space stays in cache.
    """

    def __init__(self, batch: tasks.CountBatch, chunk: int = 2000):
        self.n = len(batch.classes)
        self.chunks = []
        support = tasks.support_tokens()
        for start in range(0, self.n, chunk):
            counts, classes = batch.counts[start:start + chunk], batch.classes[start:start + chunk]
            parts = models.FixedAttentionParts.of(counts, classes)
            for c in classes.unique().tolist():
                rows = (classes == c).nonzero().squeeze(1)
                self.chunks.append((c, parts.off[rows][:, :tasks.N_COMMON].contiguous(),
                                    parts.step[rows][:, support[c]].contiguous(),
                                    tasks.target_token(classes[rows]).view(1, -1, 1)))

    @torch.no_grad()
    def __call__(self, params: dict, alpha, d: float = 0.005) -> np.ndarray:
        """One model (``params`` as :func:`qkov.synthetic.models.init_parameters` gives them, ``alpha``
        a number; returns (2,)) or E stacked as :meth:`qkov.synthetic.models.Ensemble.circuits` gives
        them (``alpha`` (E,); returns (E, 2)). Where alpha + d > 1 (no sharper attention
        exists) the pressure is 0."""
        _, w_ov = effective(params)
        single = w_ov.dim() == 2
        w_ov, bias = (w_ov[None], params["b"][None]) if single else (w_ov, params["b"])
        E = len(w_ov)
        alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (E,))
        a_step = np.minimum(alpha + d, 1.0) - alpha  # 0 where alpha = 1
        losses, drops = self._sums(w_ov, bias, torch.tensor(alpha, dtype=torch.float32),
                                   torch.tensor(a_step, dtype=torch.float32))
        losses, drops = losses.numpy() / self.n, drops.numpy() / self.n
        out = np.stack([losses, np.where(alpha + d > 1.0, 0.0, drops / d)], -1)
        return out[0] if single else out

    def _sums(self, w_ov, bias, alpha, a_step):
        """The loss and drop summed over all sequences (E,), by batched PyTorch operations."""
        E = len(w_ov)
        a, a_step = alpha.view(-1, 1, 1), a_step.view(-1, 1, 1)
        w_t, bias = w_ov.transpose(1, 2), bias.unsqueeze(1)
        common = w_t[:, :tasks.N_COMMON].contiguous()  # (E, 10, V): rows h_off reads
        support = {c: w_t[:, rows].contiguous()  # (E, 20, V): rows s reads, per class
                   for c, rows in enumerate(tasks.support_tokens())}
        losses = torch.zeros(E, dtype=torch.float64)
        drops = torch.zeros(E, dtype=torch.float64)
        for c, off, step, targets in self.chunks:
            targets = targets.expand(E, -1, 1)
            D = torch.matmul(step, support[c])  # (E, n, V)
            z = torch.baddbmm(bias, off.expand(E, -1, -1), common).addcmul_(a, D)
            step_logits = D.mul_(a_step)  # d D
            log_p = torch.log_softmax(z, -1)
            drop = step_logits.gather(-1, targets).squeeze(-1) - torch.log1p(
                step_logits.expm1_().mul_(log_p.exp()).sum(-1))
            losses -= log_p.gather(-1, targets).squeeze(-1).double().sum(1)
            drops += drop.double().sum(1)
        return losses, drops


def loss_sensitivity(params: dict, batch: tasks.CountBatch, alpha, d: float = 0.005
                     ) -> np.ndarray:
    """(L(alpha), (L(alpha) - L(alpha + d)) / d) on ``batch``: see :class:`SharpeningProbe`
    (which prepares the sequences once, for measuring every epoch)."""
    return SharpeningProbe(batch)(params, alpha, d)


def attention_at_loss(trajectory: np.ndarray, loss: float) -> tuple[float, float] | None:
    """(attention on distinct, on class-identifying tokens) when a run's held-out loss first
    reaches ``loss`` (:func:`at_loss`); None if the run never reached it."""
    return at_loss(trajectory, loss, (2, 3))


def attention_at_loss_per_seed(trajectories: list[np.ndarray], loss: float,
                               measure: int = 0) -> list[float] | None:
    """Per run (one per seed), the attention (``measure`` 0: on distinct tokens, 1: on
    class-identifying ones) when its held-out loss first reached ``loss``; None if some run
    never did."""
    values = [attention_at_loss(t, loss) for t in trajectories]
    return None if any(v is None for v in values) else [v[measure] for v in values]


def at_loss(trajectory: np.ndarray, loss: float, columns) -> tuple[float, ...] | None:
    """The trajectory's ``columns`` (rows: epoch, held-out loss, measures) when the run's
    held-out loss first reaches ``loss``, interpolated linearly in log loss between the two
    measured epochs around that moment; None if the run never reached it."""
    losses = trajectory[:, 1]
    below = np.flatnonzero(losses <= loss)
    if len(below) == 0:
        return None
    k = below[0]
    if k == 0:
        return tuple(float(trajectory[0, j]) for j in columns)
    w = (np.log(losses[k - 1]) - np.log(loss)) / (np.log(losses[k - 1]) - np.log(losses[k]))
    return tuple(float((1 - w) * trajectory[k - 1, j] + w * trajectory[k, j]) for j in columns)
