"""Training the language decoders: a classifier read at one position (HateXplain, agreement)
and a next-token model trained on answer tokens only (generative QA).

One model at a time (unlike ``qkov.synthetic.train``, which batches many small models):
the language models differ in shape from run to run, and a GPU, where there is one, is
better used by one larger model. On a CPU a run is deterministic for its seed: the batch
order comes from ``qkov.seeding`` (the model's initial weights from the caller, e.g.
``Decoder(config, generator=seeding.init_generator(seed))``).

With ``progress`` a run shows a tqdm bar of its optimizer steps on stderr, refreshed at most
every :data:`PROGRESS_INTERVAL_S` seconds (a notebook's training cell, tagged
``remove-stderr``, does not store it); ``desc`` and ``position`` name the bar and give it a
line of its own where several processes train at once (as ``qkov.synthetic.train``). The
bar draws no random numbers and changes no computation: a run is the same with it or
without.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from .. import seeding
from .batches import TokenBatch
from .models import OPTIMIZERS, SCHEDULES, make_optimizer, make_schedule

DEVICES = ("cpu", "cuda", "auto")
PROGRESS_INTERVAL_S = 2.0  # the least time between two refreshes of a progress bar

# The learning-rate conditions the language figures compare, spelt once for all of them
# (they are the "condition" values of the printed and stored tables): every parameter at
# the base learning rate; W_Q, W_K (and, where the figure says so, the embeddings) at a
# multiple of it; and language-agreement's three controls, W_Q, W_K alone at the multiple,
# every parameter at it, and the QK circuit at the base rate with every other parameter at
# the base rate divided by the multiple (the ratio of faster QK at matched's QK rate).
MATCHED = "matched"
FASTER_QK = "faster QK"
FASTER_QK_ONLY = "faster QK only"
ALL_FASTER = "all faster"
SLOW_OV = "slow OV"


@dataclass(frozen=True)
class TrainingSetup:
    """How a model is trained; ``qk_multiplier`` and ``embedding_multiplier`` make the
    faster-QK runs (both 1: matched learning rates)."""

    optimizer: str = "adamw"  # "adamw" or "sgd"
    lr: float = 5e-5  # base learning rate
    weight_decay: float = 0.0
    momentum: float = 0.0  # SGD only
    qk_multiplier: float = 1.0  # W_Q, W_K learn at lr * qk_multiplier
    embedding_multiplier: float = 1.0  # token and position embeddings at lr * this
    # The position embedding at lr * this instead (None: with the token embedding; the
    # authors' HateXplain and SQuAD notebooks keep it at the base rate, their agreement
    # notebook raises it with the token embedding)
    position_multiplier: float | None = None
    embedding_weight_decay: float | None = None  # the embeddings' own (None: weight_decay)
    # b_Q, b_K learn with W_Q, W_K (the authors' agreement and SQuAD notebooks); False: at
    # the base rate (their HateXplain notebooks)
    qk_bias: bool = False
    label_smoothing: float = 0.0  # of the next-token loss (the authors' SQuAD: 0.1)
    accumulation_steps: int = 1  # batches per optimizer step (the authors' SQuAD: 2)
    epochs: int = 1
    batch_size: int = 32
    schedule: str = "cosine"  # "cosine", "one_cycle" or "constant", stepped per batch
    warmup_fraction: float = 0.1
    grad_clip: float | None = 1.0  # max global gradient norm; None: no clipping
    seed: int = 1234  # batch order (the model's initialisation is the caller's)
    # Cut each batch to its longest row plus the readout slot (TokenBatch.trimmed): the same
    # model, less padding computed, where lengths vary widely (real sentences)
    trim_padding: bool = False

    def __post_init__(self):
        def fail(name, expected):
            raise ValueError(f"TrainingSetup.{name}: expected {expected}, got {getattr(self, name)!r}")

        def is_number(value):
            return not isinstance(value, bool) and isinstance(value, (int, float)) \
                and math.isfinite(value)

        def is_int(value):
            return not isinstance(value, bool) and isinstance(value, int)

        if self.optimizer not in OPTIMIZERS:
            fail("optimizer", f"one of {OPTIMIZERS}")
        if self.schedule not in SCHEDULES:
            fail("schedule", f"one of {SCHEDULES}")
        for name in ("lr", "qk_multiplier", "embedding_multiplier"):
            if not is_number(getattr(self, name)) or not getattr(self, name) > 0:
                fail(name, "a finite number > 0")
        if self.position_multiplier is not None and not (
                is_number(self.position_multiplier) and self.position_multiplier > 0):
            fail("position_multiplier", "None or a finite number > 0")
        if not isinstance(self.qk_bias, bool):
            fail("qk_bias", "True or False")
        if self.embedding_weight_decay is not None and not (
                is_number(self.embedding_weight_decay) and self.embedding_weight_decay >= 0):
            fail("embedding_weight_decay", "None or a number >= 0")
        if not is_number(self.label_smoothing) or not 0 <= self.label_smoothing < 1:
            fail("label_smoothing", "a number in [0, 1)")
        if not is_int(self.accumulation_steps) or self.accumulation_steps < 1:
            fail("accumulation_steps", "an integer >= 1")
        if not is_number(self.weight_decay) or self.weight_decay < 0:
            fail("weight_decay", "a number >= 0")
        if not is_number(self.momentum) or not 0 <= self.momentum < 1:
            fail("momentum", "a number in [0, 1)")
        if not is_number(self.warmup_fraction) or not 0 <= self.warmup_fraction < 1:
            fail("warmup_fraction", "a number in [0, 1)")
        for name in ("epochs", "batch_size"):
            if not is_int(getattr(self, name)) or getattr(self, name) < 1:
                fail(name, "an integer >= 1")
        if self.grad_clip is not None and (not is_number(self.grad_clip) or not self.grad_clip > 0):
            fail("grad_clip", "None or a number > 0")
        if not is_int(self.seed) or self.seed < 0:
            fail("seed", "a non-negative integer")

    def circuit_rates(self) -> tuple[float, float, float]:
        """The rates the run's circuits learn at: W_Q and W_K, the embeddings, every other
        parameter (to 12 significant digits, so that 1e-4 * 30 and 3e-3 are one rate)."""
        return tuple(float(f"{x:.12g}") for x in (self.lr * self.qk_multiplier,
                                                 self.lr * self.embedding_multiplier, self.lr))


@dataclass
class TrainingHistory:
    """Per epoch: the mean training loss and what ``eval_fn`` returned (if given)."""

    loss: list[float] = field(default_factory=list)
    eval: list[Any] = field(default_factory=list)
    steps: int = 0
    device: str = "cpu"
    seconds: float = 0.0


def resolve_device(device: str) -> torch.device:
    """"cpu", "cuda", or "auto" (cuda when available, else cpu)."""
    if device not in DEVICES:
        raise ValueError(f"device: expected one of {DEVICES}, got {device!r}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda': no CUDA device is available; use 'cpu' or 'auto'")
    return torch.device(device)


def optimizer_steps(rows: int, setup: TrainingSetup) -> int:
    """The optimizer steps of a run on ``rows`` examples: per epoch one every
    ``accumulation_steps`` batches, and one after the epoch's last batch."""
    batches = math.ceil(rows / setup.batch_size)
    return setup.epochs * math.ceil(batches / setup.accumulation_steps)


def classification_loss(model, batch: TokenBatch, readout: str) -> torch.Tensor:
    logits = model(batch.tokens, batch.attention_mask, readout=readout).logits
    return F.cross_entropy(logits, batch.labels)


def answer_loss(model, batch: TokenBatch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Next-token cross-entropy on the positions ``loss_mask`` marks: the logits at t-1
    predict token t, counted where ``loss_mask[:, t]`` (e.g. the answer after "A:")."""
    targets = batch.loss_mask[:, 1:] & batch.attention_mask[:, 1:]
    if not targets.any():
        raise ValueError("loss_mask: no target token in this batch")
    hidden, _ = model.features(batch.tokens, batch.attention_mask)
    # The head only where a target is: at every position it would be [B, T, vocabulary].
    return F.cross_entropy(model.head(hidden[:, :-1][targets]), batch.tokens[:, 1:][targets],
                           label_smoothing=label_smoothing)


def _train(model, data: TokenBatch, setup: TrainingSetup, device, eval_fn, progress,
           loss_fn: Callable, desc: str = "training", position: int | None = None
           ) -> TrainingHistory:
    if not isinstance(setup, TrainingSetup):
        raise TypeError(f"setup: expected a TrainingSetup, got {type(setup).__name__}")
    if len(data) == 0:
        raise ValueError("training data: no rows")
    device = resolve_device(device)
    model.to(device)
    data = data.to(device) if device.type != "cpu" else data
    optimizer = make_optimizer(model, setup.optimizer, lr=setup.lr, weight_decay=setup.weight_decay,
                               momentum=setup.momentum, qk_multiplier=setup.qk_multiplier,
                               embedding_multiplier=setup.embedding_multiplier,
                               position_multiplier=setup.position_multiplier,
                               embedding_weight_decay=setup.embedding_weight_decay,
                               qk_bias=setup.qk_bias)
    batches_per_epoch = math.ceil(len(data) / setup.batch_size)
    steps_per_epoch = optimizer_steps(len(data), setup) // setup.epochs
    schedule = make_schedule(optimizer, setup.schedule, total_steps=setup.epochs * steps_per_epoch,
                             warmup_fraction=setup.warmup_fraction)
    order = seeding.generator(seeding.derived_seed(setup.seed, "data"))
    history = TrainingHistory(device=str(device))
    started = time.perf_counter()
    bar = tqdm(total=setup.epochs * steps_per_epoch, desc=desc, disable=not progress,
               leave=False, mininterval=PROGRESS_INTERVAL_S, unit="step", position=position,
               file=sys.stderr)
    for _ in range(setup.epochs):
        model.train()
        total, rows = 0.0, 0
        accumulate = setup.accumulation_steps
        optimizer.zero_grad(set_to_none=True)  # nothing left from an earlier use of the model
        for number, batch in enumerate(data.batches(setup.batch_size, order), 1):
            if setup.trim_padding:
                batch = batch.trimmed()
            loss = loss_fn(model, batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"training loss became {loss.item()} at step "
                                         f"{history.steps}; lower the learning rate")
            if accumulate == 1:
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            else:
                # the mean over the group's batches (the epoch's last group may be smaller)
                first = (number - 1) // accumulate * accumulate + 1
                (loss / min(accumulate, batches_per_epoch - first + 1)).backward()
                if number % accumulate and number < batches_per_epoch:
                    total += loss.item() * len(batch)
                    rows += len(batch)
                    continue
            if setup.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), setup.grad_clip)
            optimizer.step()
            schedule.step()
            if accumulate > 1:
                optimizer.zero_grad(set_to_none=True)
            history.steps += 1
            total += loss.item() * len(batch)
            rows += len(batch)
            bar.update()
        history.loss.append(total / rows)
        if eval_fn is not None:
            model.eval()
            with torch.no_grad():
                history.eval.append(eval_fn(model))
        bar.set_postfix(loss=f"{history.loss[-1]:.4g}", refresh=False)  # shown at the next refresh
    bar.close()
    model.eval()
    history.seconds = time.perf_counter() - started
    return history


def train_classifier(model, data: TokenBatch, setup: TrainingSetup, device: str = "cpu",
                     eval_fn: Callable | None = None, progress: bool = True,
                     readout: str = "first_pad", desc: str = "training",
                     position: int | None = None) -> TrainingHistory:
    """Train a classifier decoder (``config.n_classes`` set) on ``data.labels`` with
    cross-entropy at the ``readout`` position; ``eval_fn(model)`` runs after every epoch
    (without gradients) and its results are kept in the history. ``progress``, ``desc``,
    ``position``: the progress bar (see the module's docstring)."""
    if data.labels is None:
        raise ValueError("training data: labels are required to train a classifier")
    if setup.label_smoothing:
        raise ValueError("TrainingSetup.label_smoothing: applies to the next-token loss only; "
                         "expected 0 for a classifier")
    if model.config.n_classes is None:
        raise ValueError("model: expected a classifier (DecoderConfig.n_classes set)")
    if int(data.labels.max()) >= model.config.n_classes or int(data.labels.min()) < 0:
        raise ValueError(f"labels: expected class ids in [0, {model.config.n_classes}), got "
                         f"{int(data.labels.min())}..{int(data.labels.max())}")
    return _train(model, data, setup, device, eval_fn, progress,
                  lambda m, b: classification_loss(m, b, readout), desc, position)


def train_language_model(model, data: TokenBatch, setup: TrainingSetup, device: str = "cpu",
                         eval_fn: Callable | None = None, progress: bool = True,
                         desc: str = "training", position: int | None = None
                         ) -> TrainingHistory:
    """Train a next-token decoder (``config.n_classes`` None) on the tokens ``data.loss_mask``
    marks (the answers of generative QA prompts), see :func:`answer_loss`. ``progress``,
    ``desc``, ``position``: the progress bar (see the module's docstring)."""
    if data.loss_mask is None:
        raise ValueError("training data: loss_mask is required to train a language model")
    if model.config.n_classes is not None:
        raise ValueError("model: expected a next-token model (DecoderConfig.n_classes None)")
    if not (data.loss_mask[:, 1:] & data.attention_mask[:, 1:]).any():
        raise ValueError("loss_mask: marks no real token after the first position")
    return _train(model, data, setup, device, eval_fn, progress,
                  lambda m, b: answer_loss(m, b, setup.label_smoothing), desc, position)
