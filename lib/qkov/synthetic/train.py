"""Training many models as one batched computation: plain SGD with a learning rate per circuit.

A :class:`RunConfig` describes one model's training: its architecture (:class:`ModelConfig`),
its seed, the learning rates of the QK and the OV circuit, a constant multiplier or linear
ramp on the QK rate, epochs of ``batches_per_epoch`` fresh batches, an optional early stop
at a mean epoch loss (by the companion's rule or the authors', :data:`EARLY_STOP_RULES`).
:func:`train` trains a list of them together:

* all members (all four parameterizations; fixed-attention members apart) are stacked
  into one :class:`~qkov.synthetic.models.Ensemble` and updated by one call per step, a
  few dozen batched PyTorch operations;
* data are drawn for all streams once every ``tasks.DataStream.CHUNK`` steps, prepared
  once per stream and laid out per member, so a step has no Python loop over members;
* every member's data come from the stream of its own (seed, T, batch size): members with
  the same seed see the same batches (configurations are compared on paired data), and a
  member's result depends only on its own seed and configuration, not on the ensemble;
* members leave the ensemble when they finish or stop early; a non-finite loss stops
  training with a message naming the run and the step.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from ..processes import map_in_processes
from ..seeding import derived_seed, init_generator
from . import models, tasks
from .models import Ensemble, ModelConfig


class TrainingDiverged(RuntimeError):
    """A run's loss became NaN or infinite."""


# When a run with ``early_stop_loss`` stops:
#   "epoch":   after the first epoch whose mean training loss is at most early_stop_loss;
#   "authors": as the authors' notebooks do (Fig. 2): they add each epoch's mean loss to a
#              running sum that is reset only every AUTHORS_RESET_EPOCHS epochs (after the
#              test), and stop once the sum is at most early_stop_loss. Right after a reset
#              the sum is one epoch's mean, and within a window it only grows (losses are
#              positive), so the stop can fire only at epochs 1, 101, 201, ...
EARLY_STOP_RULES = ("epoch", "authors")
AUTHORS_RESET_EPOCHS = 100


@dataclass(frozen=True)
class RunConfig:
    """One model's training run.

    qk_ramp: multiplier on ``lr_qk`` going linearly from ``qk_ramp[0]`` at the first step to
    ``qk_ramp[1]`` at the end of training (per step: ``start + (end - start) * t / steps``);
    ``(1, 1)`` is a constant rate. ``per_class_batches``: each batch holds ``batch_size``
    sequences of every class (paper Fig. 3) instead of ``batch_size`` uniform draws.
    """

    name: str
    model: ModelConfig
    seed: int
    epochs: int
    batches_per_epoch: int
    lr_qk: float = 1e-2
    lr_ov: float = 1e-2
    qk_ramp: tuple[float, float] = (1.0, 1.0)
    batch_size: int = 32
    T: int = 64
    early_stop_loss: float | None = None
    per_class_batches: bool = False
    cut: str = "none"  # of the query-token shortcut: "none" (the paper's task), "self", "context"
    early_stop_rule: str = "epoch"  # see EARLY_STOP_RULES

    def __post_init__(self):
        if self.early_stop_rule not in EARLY_STOP_RULES:
            raise ValueError(f"run {self.name!r}: parameter 'early_stop_rule': expected one "
                             f"of {EARLY_STOP_RULES}, got {self.early_stop_rule!r}")
        for name in ("epochs", "batches_per_epoch", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"run {self.name!r}: parameter {name!r}: expected an "
                                 f"integer >= 1, got {value!r}")
        for name in ("lr_qk", "lr_ov"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"run {self.name!r}: parameter {name!r}: expected a "
                                 f"finite learning rate >= 0, got {value!r}")
        tasks.check_length(self.T)
        tasks.check_cut(self.cut)

    @property
    def steps(self) -> int:
        return self.epochs * self.batches_per_epoch

    @property
    def rows_per_batch(self) -> int:
        return self.batch_size * (tasks.N_CLASSES if self.per_class_batches else 1)

    @property
    def stream_key(self) -> tuple:
        return self.seed, self.T, self.batch_size, self.per_class_batches, self.cut


@dataclass
class RunResult:
    """What training left: the loss of every epoch, why it stopped, the final parameters."""

    config: RunConfig
    epoch_losses: np.ndarray
    early_stopped: bool
    params: dict[str, torch.Tensor] = field(repr=False)
    epoch_callback_values: list = field(default_factory=list, repr=False)

    @property
    def epochs_run(self) -> int:
        return len(self.epoch_losses)

    @property
    def final_loss(self) -> float:
        return float(self.epoch_losses[-1])


class _Group:
    """The live members of one ensemble and their per-member training state."""

    def __init__(self, configs: list[RunConfig], ids: list[int]):
        order = models.ensemble_order([c.model for c in configs])
        self.configs = [configs[i] for i in order]
        self.ids = torch.tensor([ids[i] for i in order])
        generators = [init_generator(c.seed) for c in self.configs]
        self.ensemble = Ensemble([c.model for c in self.configs], generators)
        self.lr_qk = torch.tensor([c.lr_qk for c in self.configs])
        self.ramp_start = torch.tensor([float(c.qk_ramp[0]) for c in self.configs])
        self.ramp_slope = torch.tensor([(c.qk_ramp[1] - c.qk_ramp[0]) / c.steps
                                        for c in self.configs])
        self.lr_ov = torch.tensor([c.lr_ov for c in self.configs])
        self.chunk = None  # this chunk's data and QK rates, laid out per member
        self._layouts = {}  # the tensors chunks are laid out in, reused from chunk to chunk
        self._refresh()
        self.losses = []  # this chunk's steps so far: probabilities of the correct token

    def epoch_ends(self, t: int) -> bool:
        """Whether some member ends an epoch after ``t`` steps."""
        return any(t % b == 0 for b in self.epoch_lengths)

    def keep(self, positions: list[int]) -> None:
        index = torch.tensor(positions, dtype=torch.long)
        self.configs = [self.configs[i] for i in positions]
        self.ids = self.ids[index]
        self.ensemble.keep(index)
        for name in ("lr_qk", "ramp_start", "ramp_slope", "lr_ov"):
            setattr(self, name, getattr(self, name)[index])
        self._refresh()
        if self.chunk is not None:
            batches, lr_qk = self.chunk
            self.chunk = [b.select(index) for b in batches], [lr[index] for lr in lr_qk]

    def _refresh(self):
        self.epoch_lengths = sorted({c.batches_per_epoch for c in self.configs})
        shared = len(self.lr_ov) and bool((self.lr_ov == self.lr_ov[0]).all())
        self.step_lr_ov = float(self.lr_ov[0]) if shared else self.lr_ov  # one: cheaper

    def load_chunk(self, t0: int, drawn: list[tasks.CountBatch], member_streams: list[int]
                   ) -> None:
        """Data of the steps t0, t0+1, ... of a chunk: ``drawn[s]`` is stream s's chunk,
        ``member_streams`` the stream of each member. What depends on the data alone (log
        counts, one-hot classes) is computed once per stream, then laid out per member."""
        chunk, rows = tasks.DataStream.CHUNK, self.configs[0].rows_per_batch
        data = {s: (drawn[s].counts.view(chunk, rows, -1), drawn[s].classes.view(chunk, rows))
                for s in dict.fromkeys(member_streams)}  # (K, B, V), (K, B) per stream
        self.chunk = self._per_member_steps(data, member_streams), self._qk_rates(t0)

    def _per_member_steps(self, data: dict, member_streams: list[int]) -> list:
        """The step's data, laid out per member."""
        chunk, rows = tasks.DataStream.CHUNK, self.configs[0].rows_per_batch
        if self.ensemble.fixed:
            # What the attention takes from the data is computed once per stream; each
            # member's attention is then one addcmul with its own alpha.
            parts = {s: models.FixedAttentionParts.of(*d) for s, d in data.items()}
            alphas = self.ensemble.fixed_alpha.view(-1)
            attention = self._layout("attention", (chunk, len(member_streams), rows, models.V))
            for e, s in enumerate(member_streams):
                parts[s].at(alphas[e], out=attention[:, e])
            targets = torch.stack([tasks.target_token(data[s][1]) for s in member_streams],
                                  1).unsqueeze(-1)
            batch = models.EnsembleBatch(None, None, targets, attention)
        else:
            per_stream = {s: models.EnsembleBatch.from_counts(*d) for s, d in data.items()}

            def laid_out(name):
                parts = [getattr(per_stream[s], name) for s in member_streams]
                shape = (parts[0].shape[0], len(parts), *parts[0].shape[1:])
                return torch.stack(parts, 1, out=self._layout(name, shape, parts[0].dtype))
            batch = models.EnsembleBatch(*map(laid_out, ("log_counts", "class_onehot",
                                                         "targets")))
        return _per_step(models.EnsembleBatch, batch.log_counts, batch.class_onehot,
                         batch.targets, batch.attention)

    def _qk_rates(self, t0: int) -> list[torch.Tensor]:
        """The members' QK learning rates at the steps of the chunk from t0 on."""
        t = torch.arange(t0, t0 + tasks.DataStream.CHUNK, dtype=torch.float32).unsqueeze(1)
        return (self.lr_qk * (self.ramp_start + self.ramp_slope * t)).unbind(0)  # K x (E,)

    def _layout(self, name: str, shape: tuple, dtype=torch.float32) -> torch.Tensor:
        """A work tensor for this chunk's ``name``, the last chunk's when the shape is the
        same: a fresh one of many MB per chunk costs page faults that cost more than the
        copy into it."""
        tensor = self._layouts.get(name)
        if tensor is None or tensor.shape != shape or tensor.dtype != dtype:
            tensor = self._layouts[name] = torch.empty(shape, dtype=dtype)
        return tensor

    def step(self, k: int) -> torch.Tensor:
        """Step k of the loaded chunk; the members' probabilities of the correct token
        before it (E, B)."""
        batches, lr_qk = self.chunk
        return self.ensemble.step(batches[k], lr_qk[k], self.step_lr_ov)


def _per_step(make, *fields) -> list:
    """``make(*(f[j] for f in fields))`` for every step j of a chunk (fields: (K, ...) or
    None): one object per step, made at once (unbind: K views in one call)."""
    fields = [None if f is None else f.unbind(0) for f in fields]
    return [make(*(None if f is None else f[j] for f in fields))
            for j in range(tasks.DataStream.CHUNK)]


def train(configs: list[RunConfig], progress: bool = True, epoch_callback=None,
          desc: str = "training", workers: int = 1) -> list[RunResult]:
    """Train every run in ``configs`` together; results in the same order.

    ``epoch_callback(configs, circuits, epoch)`` (optional) is called after every epoch (and
    once before training, with epoch 0) for the runs that have just completed that epoch,
    all at once: ``circuits`` holds their effective ``W_QK`` (absent for fixed attention),
    ``W_OV`` and ``b`` stacked in the order of ``configs``, so that a measurement of many
    runs is one batched computation. It returns one value per run, kept in
    ``RunResult.epoch_callback_values``.

    ``workers > 1`` splits the runs over that many processes (one torch thread each). The
    per-step work on these small tensors is dominated by per-operation overhead, which one
    process cannot spread over cores; since a run does not depend on the rest of its
    ensemble, splitting changes no result beyond floating-point rounding.
    """
    if not configs:
        raise ValueError("no runs to train")
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ValueError("run names must be unique")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"parameter 'workers': expected an integer >= 1, got {workers!r}")
    if workers > 1 and len(configs) > 1:
        return _train_in_processes(configs, progress, epoch_callback, desc, workers)
    return _train_together(configs, progress, epoch_callback, desc)


def _split(configs: list[RunConfig], parts: int) -> list[list[int]]:
    """Indices of ``configs`` in ``parts`` groups of about equal work.

    Runs that read the same data stream stay together where they can, so that each process
    draws only the streams of its own runs: whole streams are dealt out longest first, then
    single runs move from the fullest group to the emptiest until their sizes differ by at
    most one (a step's cost grows with the number of runs in it).
    """
    by_stream = defaultdict(list)
    for i, c in enumerate(configs):
        by_stream[c.stream_key].append(i)
    cost = lambda unit: sum(configs[i].steps for i in unit)  # noqa: E731
    loads = [0] * parts
    groups = [[] for _ in range(parts)]
    for unit in sorted(by_stream.values(), key=lambda u: -cost(u)):
        k = loads.index(min(loads))
        groups[k] += unit
        loads[k] += cost(unit)
    while True:
        full = max(groups, key=len)
        empty = min(groups, key=len)
        if len(full) - len(empty) <= 1:
            break
        empty.append(full.pop(min(range(len(full)), key=lambda j: configs[full[j]].steps)))
    return [sorted(g) for g in groups if g]


_FORKED_CALLBACK = None  # set before forking: workers inherit it (closures do not pickle)


def _train_worker(configs, progress, desc, position):
    return _train_together(configs, progress, _FORKED_CALLBACK, f"{desc} [{position + 1}]",
                           position=position)


def _train_in_processes(configs, progress, epoch_callback, desc, workers):
    global _FORKED_CALLBACK
    parts = _split(configs, workers)
    _FORKED_CALLBACK = epoch_callback
    try:
        outputs = map_in_processes(_train_worker, [
            ([configs[i] for i in part], progress, desc, k) for k, part in enumerate(parts)
        ], len(parts))
    finally:
        _FORKED_CALLBACK = None
    results = [None] * len(configs)
    for part, out in zip(parts, outputs):
        for i, result in zip(part, out):
            results[i] = result
    return results


def _train_together(configs, progress, epoch_callback, desc, position=0):
    streams = {}
    for c in configs:
        if c.stream_key not in streams:
            seed, T, batch, per_class, cut = c.stream_key
            streams[c.stream_key] = tasks.DataStream(derived_seed(seed, "data"), T, batch,
                                                     per_class, cut)
    stream_list = list(streams.values())
    stream_of = torch.tensor([list(streams).index(c.stream_key) for c in configs])

    by_group = defaultdict(list)  # members of one ensemble share attention kind and batch shape
    for i, c in enumerate(configs):
        by_group[c.model.qk == models.FIXED_ATTENTION, c.rows_per_batch].append(i)
    groups = [_Group([configs[i] for i in ids], ids) for ids in by_group.values()]

    n = len(configs)
    epoch_sum = torch.zeros(n, dtype=torch.float64)
    authors_sum = [0.0] * n  # the authors' running sum of epoch means (EARLY_STOP_RULES)
    first_nonfinite = torch.full((n,), -1, dtype=torch.long)  # step of the first bad loss
    histories = [[] for _ in range(n)]
    callback_values = [[] for _ in range(n)]
    results: list[RunResult | None] = [None] * n

    def call_back(group, positions, epoch):
        if epoch_callback is not None and positions:
            values = epoch_callback([group.configs[k] for k in positions],
                                    group.ensemble.circuits(torch.tensor(positions)), epoch)
            for k, value in zip(positions, values, strict=True):
                callback_values[int(group.ids[k])].append(value)

    for group in groups:
        call_back(group, list(range(len(group.configs))), 0)

    total_steps = max(c.steps for c in configs)
    bar = tqdm(total=total_steps, desc=desc, disable=not progress, mininterval=2.0,
               unit="step", position=position)
    chunk = tasks.DataStream.CHUNK
    t = 0
    while groups:
        if t % chunk == 0:  # draw the next CHUNK batches of every stream, lay them out per member
            # Only streams a live member reads: members only ever leave, so a stream nobody
            # reads is never needed again (late in Fig. 2 most streams are such).
            live = set().union(*(stream_of[g.ids].tolist() for g in groups))
            drawn = [stream.chunk_at(t) if s in live else None
                     for s, stream in enumerate(stream_list)]
            for group in groups:
                group.load_chunk(t, drawn, stream_of[group.ids].tolist())
                group.losses = []
        for group in groups:
            group.losses.append(group.step(t % chunk))
        t += 1
        bar.update(1)

        for group in groups:
            at_epoch_end = [k for k, c in enumerate(group.configs)
                            if t % c.batches_per_epoch == 0] if group.epoch_ends(t) else []
            if not (at_epoch_end or t % chunk == 0):
                continue
            # Sum this chunk's losses into the epoch sums; note where a loss turned non-finite.
            losses = models.mean_losses(torch.stack(group.losses))  # (steps, E)
            group.losses = []
            epoch_sum.index_add_(0, group.ids, losses.double().sum(0))
            bad = ~torch.isfinite(losses)
            first = t - len(losses) + bad.int().argmax(0)
            newly = bad.any(0) & (first_nonfinite[group.ids] < 0)
            first_nonfinite[group.ids] = torch.where(newly, first, first_nonfinite[group.ids])

            finished = []
            for k in at_epoch_end:
                c, i = group.configs[k], int(group.ids[k])
                if first_nonfinite[i] >= 0:
                    bar.close()
                    # Once the loss is non-finite the weights are too, and it stays so.
                    step = int(first_nonfinite[i]) + 1
                    raise TrainingDiverged(
                        f"run {c.name!r} diverged: non-finite loss from step {step} "
                        f"(epoch {(step - 1) // c.batches_per_epoch + 1}, batch "
                        f"{(step - 1) % c.batches_per_epoch + 1}); lower its learning rates"
                    )
                histories[i].append(float(epoch_sum[i]) / c.batches_per_epoch)
                epoch_sum[i] = 0.0
            for epoch in sorted({len(histories[int(group.ids[k])]) for k in at_epoch_end}):
                call_back(group, [k for k in at_epoch_end
                                  if len(histories[int(group.ids[k])]) == epoch], epoch)
            for k in at_epoch_end:
                c, i = group.configs[k], int(group.ids[k])
                mean, epoch = histories[i][-1], len(histories[i])
                if c.early_stop_rule == "authors":
                    authors_sum[i] += mean
                    tested = authors_sum[i]
                    if epoch % AUTHORS_RESET_EPOCHS == 0:
                        authors_sum[i] = 0.0
                else:
                    tested = mean
                stop = c.early_stop_loss is not None and tested <= c.early_stop_loss
                if stop or epoch == c.epochs:
                    results[i] = RunResult(c, np.array(histories[i]), stop and epoch < c.epochs,
                                           group.ensemble.member(k), callback_values[i])
                    finished.append(k)
            if finished:
                group.keep([k for k in range(len(group.configs)) if k not in finished])
        groups = [g for g in groups if len(g.configs)]
    bar.update(total_steps - bar.n)
    bar.close()
    return results
