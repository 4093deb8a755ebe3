"""What the language figures measure.

* Attention on rationale tokens from the readout position: :func:`attention_rollout`
  (Abnar & Zuidema 2020) and the per-layer mean / max in :func:`rationale_attention_mass`.
* ERASER faithfulness (DeYoung et al. 2020), :func:`eraser`, the one definition every
  language figure uses: comprehensiveness = p(y|x) - p(y|x without r_k) and sufficiency =
  p(y|x) - p(y|r_k only), where the rationale r_k is the top ``fraction`` (default 5%) of
  the tokens ranked by attention rollout from the readout position
  (:func:`eraser_rationale`): by rollout, as the authors' notebooks rank them, though they
  read it from the padded row's last slot. As in ERASER, tokens are
  *removed*: the remaining tokens close up in their original order and the row is padded on
  the right again (so positions shift, as they do when words are deleted from a text).
* Plausibility (ERASER's agreement with human rationales), :func:`plausibility`: token F1
  and IOU F1 of the top-k tokens by attention, AUPRC of the attention itself.
* :func:`attention_probability_heatmap`: the 2-D histogram of attention on the rationale
  against the predicted probability of the true class.
* :func:`accuracy`; SQuAD's :func:`normalize_answer`, :func:`token_f1`, :func:`exact_match`
  and :func:`squad_scores` (the official v2 evaluation: the best over the gold answers).
"""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Callable, Sequence

import numpy as np
import torch

ATTENTION_METHODS = ("rollout", "layer_mean", "layer_max")


# --- attention on rationales --------------------------------------------------------------


def _check_attentions(attentions) -> list[torch.Tensor]:
    if isinstance(attentions, torch.Tensor):
        attentions = [attentions]
    if not attentions or any(a.dim() != 4 or a.shape[0] != attentions[0].shape[0]
                             or a.shape[2:] != attentions[0].shape[2:] for a in attentions):
        raise ValueError("attentions: expected a non-empty list of [B, H, T, T] tensors "
                         "(one B and T for all layers)")
    return list(attentions)


def attention_rollout(attentions: Sequence[torch.Tensor],
                      attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention rollout, [B, T, T]: row t is how much of position t's final representation
    flows from each input position.

    Per layer the heads are averaged and the identity added for the residual connection,
    rows renormalised (A' = (mean_h A + I) / 2), and the layers multiplied, the last on the
    left: R = A'_L ... A'_1. With ``attention_mask``, the flow into padding positions (the
    readout's own pad slot, say) is dropped and each row renormalised over the real tokens.
    """
    attentions = _check_attentions(attentions)
    B, _, T, _ = attentions[0].shape
    eye = torch.eye(T, dtype=attentions[0].dtype, device=attentions[0].device)
    rollout = eye.expand(B, T, T)
    for layer in attentions:
        mixed = layer.mean(1) + eye
        mixed = mixed / mixed.sum(-1, keepdim=True)
        rollout = mixed @ rollout
    if attention_mask is not None:
        if attention_mask.shape != (B, T):
            raise ValueError(f"attention_mask: expected shape {(B, T)}, got {tuple(attention_mask.shape)}")
        rollout = rollout * attention_mask[:, None, :]
        rollout = rollout / rollout.sum(-1, keepdim=True).clamp_min(1e-30)
    return rollout


def rationale_attention_mass(attentions: Sequence[torch.Tensor], rationale_mask: torch.Tensor,
                             readout_index: torch.Tensor, attention_mask: torch.Tensor | None = None,
                             method: str = "rollout") -> torch.Tensor:
    """Attention mass from the readout position on the rationale tokens, [B].

    "rollout": the readout row of :func:`attention_rollout` (padding dropped if
    ``attention_mask`` is given); "layer_mean": each layer's head-averaged attention from
    the readout position summed over the rationale, then averaged over layers; "layer_max":
    the same, the largest over layers.
    """
    attentions = _check_attentions(attentions)
    if method not in ATTENTION_METHODS:
        raise ValueError(f"method: expected one of {ATTENTION_METHODS}, got {method!r}")
    B, _, T, _ = attentions[0].shape
    if rationale_mask.shape != (B, T):
        raise ValueError(f"rationale_mask: expected shape {(B, T)}, got {tuple(rationale_mask.shape)}")
    if readout_index.shape != (B,):
        raise ValueError(f"readout_index: expected shape {(B,)}, got {tuple(readout_index.shape)}")
    rows = torch.arange(B, device=readout_index.device)
    weight = rationale_mask.to(attentions[0].dtype)
    if method == "rollout":
        return (attention_rollout(attentions, attention_mask)[rows, readout_index] * weight).sum(-1)
    per_layer = torch.stack([(a.mean(1)[rows, readout_index] * weight).sum(-1) for a in attentions])
    return per_layer.mean(0) if method == "layer_mean" else per_layer.max(0).values


# --- ERASER comprehensiveness and sufficiency --------------------------------------------

ERASER_FRACTION = 0.05  # the authors' notebooks: the top 5% of the tokens
ERASER_MEASURES = ("comprehensiveness", "sufficiency")


def top_fraction_mask(scores: torch.Tensor, attention_mask: torch.Tensor,
                      fraction: float = ERASER_FRACTION) -> torch.Tensor:
    """[B, T] bool: per row, the ceil(``fraction`` x real tokens) real tokens with the highest
    ``scores`` (at least one; ties broken towards the earlier position)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction: expected a number in (0, 1], got {fraction!r}")
    k = torch.ceil(fraction * attention_mask.sum(1).to(torch.float64)).long().clamp(min=1)
    return top_k_mask(scores, attention_mask, k)


def top_k_mask(scores: torch.Tensor, attention_mask: torch.Tensor, k) -> torch.Tensor:
    """[B, T] bool: per row, the ``k`` (an int, or [B] ints) real tokens with the highest
    ``scores`` (all of them where a row has fewer; ties broken towards the earlier position -
    ERASER's scripts, through sklearn, group tied scores instead, which matters only where
    attention is flat)."""
    if scores.shape != attention_mask.shape:
        raise ValueError(f"scores: expected shape {tuple(attention_mask.shape)}, got "
                         f"{tuple(scores.shape)}")
    B, T = scores.shape
    k = torch.as_tensor(k, device=scores.device)
    if k.dim() > 1 or k.numel() not in (1, B) or (k < 1).any():
        raise ValueError(f"k: expected an integer >= 1 or {B} of them, got {k.tolist()}")
    k = k.expand(B)
    # Stable descending order over real tokens; padding sorts last.
    masked = scores.to(torch.float64).masked_fill(~attention_mask, -math.inf)
    order = torch.sort(masked, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(T, device=scores.device).expand(B, T))
    return (rank < k[:, None]) & attention_mask


def keep_tokens(tokens: torch.Tensor, attention_mask: torch.Tensor, keep: torch.Tensor,
                pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Remove every real token where ``keep`` is False: the kept tokens close up in order and
    the rows are padded with ``pad_id`` on the right (width unchanged). Returns
    (tokens, attention_mask)."""
    keep = keep & attention_mask
    order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices  # kept first, in order
    new_tokens = tokens.gather(1, order)
    new_mask = keep.gather(1, order)
    return new_tokens.masked_fill(~new_mask, pad_id), new_mask


ProbabilityFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def ranked_tokens(attention_mask: torch.Tensor, readout_index: torch.Tensor) -> torch.Tensor:
    """[B, T] bool: the tokens a rationale is ranked from - the real tokens, less the
    readout position where that is a real token (a readout at the last token keeps half of
    its own rollout weight through the identity, so it would always rank first)."""
    rows = torch.arange(len(readout_index), device=readout_index.device)
    ranked = attention_mask.clone()
    ranked[rows, readout_index] = False
    return ranked


def eraser_rationale(attentions: Sequence[torch.Tensor], readout_index: torch.Tensor,
                     attention_mask: torch.Tensor, fraction: float = ERASER_FRACTION
                     ) -> torch.Tensor:
    """[B, T] bool: the rationale r_k that :func:`eraser` scores, per row the top
    ``fraction`` of the ranked tokens (:func:`top_fraction_mask` over :func:`ranked_tokens`:
    the real tokens but a real readout) ranked by the readout position's row of
    :func:`attention_rollout`, padding dropped."""
    rows = torch.arange(len(readout_index), device=readout_index.device)
    scores = attention_rollout(attentions, attention_mask)[rows, readout_index]
    return top_fraction_mask(scores, ranked_tokens(attention_mask, readout_index), fraction)


def _true_class_probability(predict_proba: ProbabilityFn, tokens, mask, labels) -> torch.Tensor:
    probs = predict_proba(tokens, mask)
    return probs.gather(1, labels[:, None]).squeeze(1)


def eraser(predict_proba: ProbabilityFn, tokens: torch.Tensor, attention_mask: torch.Tensor,
           labels: torch.Tensor, attentions: Sequence[torch.Tensor], readout_index: torch.Tensor,
           fraction: float = ERASER_FRACTION, pad_id: int = 0) -> dict[str, torch.Tensor]:
    """ERASER comprehensiveness and sufficiency, [B] each (keys :data:`ERASER_MEASURES`):

        comprehensiveness = p(y|x) - p(y|x without r_k)   (higher: r_k mattered)
        sufficiency       = p(y|x) - p(y|r_k only)         (lower: r_k suffices)

    r_k is :func:`eraser_rationale`: the top ``fraction`` of each row's real tokens by
    attention rollout from the readout position, computed from ``attentions`` (the model's
    per-layer attention on the input, [B, H, T, T]) and ``readout_index`` ([B]).
    ``predict_proba(tokens, attention_mask)`` returns class probabilities [B, C];
    ``labels`` is the class y scored (the true class)."""
    rationale = eraser_rationale(attentions, readout_index, attention_mask, fraction)
    full = _true_class_probability(predict_proba, tokens, attention_mask, labels)
    without = keep_tokens(tokens, attention_mask, ~rationale, pad_id)
    only = keep_tokens(tokens, attention_mask, rationale, pad_id)
    return {"comprehensiveness": full - _true_class_probability(predict_proba, *without, labels),
            "sufficiency": full - _true_class_probability(predict_proba, *only, labels)}


# --- plausibility: agreement with human rationales ----------------------------------------

PLAUSIBILITY_MEASURES = ("token_f1", "iou_f1", "auprc")
IOU_THRESHOLD = 0.5  # ERASER's: a predicted span matches a human one at this overlap


def spans(marks) -> list[tuple[int, int]]:
    """The runs of consecutive True in a sequence of marks, as [start, end) pairs."""
    out, start = [], None
    for i, mark in enumerate(list(marks) + [False]):
        if mark and start is None:
            start = i
        elif not mark and start is not None:
            out.append((start, i))
            start = None
    return out


def iou_f1(predicted, human, threshold: float = IOU_THRESHOLD) -> float:
    """ERASER's IOU F1 of one example: a predicted span (a run of consecutive marked
    tokens) counts as right if its intersection over union with some human span is at least
    ``threshold``, a human span as found if some predicted span overlaps it so; F1 of the
    two shares. 0 where either side has no span."""
    predicted, human = spans(predicted), spans(human)
    if not predicted or not human:
        return 0.0

    def iou(a, b):
        overlap = max(0, min(a[1], b[1]) - max(a[0], b[0]))
        return overlap / (max(a[1], b[1]) - min(a[0], b[0]))

    precision = np.mean([max(iou(p, h) for h in human) >= threshold for p in predicted])
    recall = np.mean([max(iou(p, h) for p in predicted) >= threshold for h in human])
    return 0.0 if precision + recall == 0 else float(2 * precision * recall / (precision + recall))


def average_precision(scores: torch.Tensor, human: torch.Tensor, attention_mask: torch.Tensor
                      ) -> torch.Tensor:
    """[B]: per row, the area under the precision-recall curve of ``scores`` as a ranking of
    the real tokens against the ``human`` marks, as average precision (the mean, over the
    human tokens, of the precision at its rank; ties broken towards the earlier position).
    NaN for a row without human marks."""
    _check_marks(scores, human, attention_mask)
    masked = scores.to(torch.float64).masked_fill(~attention_mask, -math.inf)
    order = torch.sort(masked, dim=1, descending=True, stable=True).indices
    hits = (human & attention_mask).gather(1, order).to(torch.float64)
    ranks = torch.arange(1, scores.shape[1] + 1, dtype=torch.float64, device=scores.device)
    precision = hits.cumsum(1) / ranks
    found = hits.sum(1)
    return torch.where(found > 0, (precision * hits).sum(1) / found.clamp_min(1),
                       torch.full_like(found, math.nan))


def _check_marks(scores, human, attention_mask) -> None:
    for name, value in (("human", human), ("attention_mask", attention_mask)):
        if value.shape != scores.shape or value.dtype != torch.bool:
            raise ValueError(f"{name}: expected a bool tensor of shape {tuple(scores.shape)} "
                             f"(as scores), got {value.dtype} {tuple(value.shape)}")


def plausibility(scores: torch.Tensor, human: torch.Tensor, attention_mask: torch.Tensor,
                 k) -> dict[str, torch.Tensor]:
    """How far a model's token scores agree with human rationales (ERASER's plausibility
    measures, DeYoung et al. 2020), [B] each, NaN for rows without human marks
    (keys :data:`PLAUSIBILITY_MEASURES`):

    * token F1: of the hard rationale - the top ``k`` real tokens by ``scores``
      (:func:`top_k_mask`; ``k`` an int or [B] ints) - against the human tokens;
    * IOU F1: the same hard rationale, matched span by span (:func:`iou_f1`);
    * AUPRC: of the soft ``scores`` (:func:`average_precision`).

    ``attention_mask``: the tokens that are ranked (with a real readout,
    :func:`ranked_tokens`)."""
    _check_marks(scores, human, attention_mask)
    human = human & attention_mask
    hard = top_k_mask(scores, attention_mask, k)
    right = (hard & human).sum(1).to(torch.float64)
    precision = right / hard.sum(1).clamp_min(1)
    recall = right / human.sum(1).clamp_min(1)
    f1 = torch.where(right > 0, 2 * precision * recall / (precision + recall).clamp_min(1e-30),
                     torch.zeros_like(right))
    has = human.any(1)
    nan = torch.full_like(f1, math.nan)
    iou = torch.tensor([iou_f1(h, g) for h, g in zip(hard.cpu().tolist(), human.cpu().tolist())],
                       dtype=torch.float64, device=f1.device)
    return {"token_f1": torch.where(has, f1, nan), "iou_f1": torch.where(has, iou, nan),
            "auprc": average_precision(scores, human, attention_mask)}


# --- heatmaps and accuracy ----------------------------------------------------------------


def attention_probability_heatmap(attention_mass, probability, bins=5) -> np.ndarray:
    """[bins, bins] percent of examples; rows: probability of the true class (low to high),
    columns: attention mass on the rationale (low to high); both binned on [0, 1] (``bins``
    equal bins, or the bin edges). A value of exactly 1.0 falls in the last bin."""
    attention = np.asarray(attention_mass, dtype=float).ravel()
    probability = np.asarray(probability, dtype=float).ravel()
    if attention.shape != probability.shape or attention.size == 0:
        raise ValueError(f"attention_mass and probability: expected equal non-empty lengths, got "
                         f"{attention.size} and {probability.size}")
    edges = np.linspace(0.0, 1.0, bins + 1) if np.isscalar(bins) else np.asarray(bins, float)
    counts, _, _ = np.histogram2d(probability, attention, bins=[edges, edges])
    return 100.0 * counts / attention.size


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of rows whose largest logit is at the label."""
    if logits.shape[:1] != labels.shape or labels.numel() == 0:
        raise ValueError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)}: "
                         "expected one non-empty row per label")
    return float((logits.argmax(-1) == labels).double().mean())


# --- SQuAD --------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """The official SQuAD normalisation: lower case, punctuation removed, the articles a /
    an / the removed, whitespace collapsed."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """F1 of the normalised tokens (bag of words). As SQuAD v2's script: if either side is
    empty (no answer), 1 when both are, else 0."""
    pred, true = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not true:
        return float(pred == true)
    common = collections.Counter(pred) & collections.Counter(true)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(true)
    return 2 * precision * recall / (precision + recall)


def squad_scores(prediction: str, gold_answers: Sequence[str]) -> tuple[float, float]:
    """(exact match, F1) of one prediction: the best over its gold answers (SQuAD's
    ``metric_max_over_ground_truths``; no gold answer counts as the empty answer)."""
    golds = list(gold_answers) or [""]
    return (max(exact_match(prediction, g) for g in golds),
            max(token_f1(prediction, g) for g in golds))
