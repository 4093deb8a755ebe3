"""Training many models as one batched computation: plain SGD with a learning rate per circuit.

A :class:`RunConfig` describes one model's training: its architecture (:class:`ModelSpec`),
its seed, the learning rates of the QK and the OV circuit, a constant multiplier or linear
ramp on the QK rate, epochs of ``batches_per_epoch`` fresh batches, an optional early stop
at a mean epoch loss. :func:`train` trains a list of them together:

* members of the same group (QK and OV circuit kinds) are stacked into one
  :class:`~qkov.models.Ensemble` and updated by one batched computation per step;
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

from . import tasks
from .models import Ensemble, ModelSpec


class TrainingDiverged(RuntimeError):
    """A run's loss became NaN or infinite."""


def derived_seed(seed: int, purpose: str) -> int:
    """The one place seeds are derived: independent streams per (seed, purpose).

    Data, initialisation and evaluation of a run must not share random numbers, although
    they share the run's seed: each purpose gets its own 63-bit seed.
    """
    purposes = {"data": 0, "init": 1, "eval": 2}
    state = np.random.SeedSequence([seed, purposes[purpose]]).generate_state(2, np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


@dataclass(frozen=True)
class RunConfig:
    """One model's training run.

    qk_ramp: multiplier on ``lr_qk`` going linearly from ``qk_ramp[0]`` at the first step to
    ``qk_ramp[1]`` at the end of training (per step: ``start + (end - start) * t / steps``);
    ``(1, 1)`` is a constant rate. ``per_class_batches``: each batch holds ``batch_size``
    sequences of every class (paper Fig. 3) instead of ``batch_size`` uniform draws.
    """

    name: str
    model: ModelSpec
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

    def __post_init__(self):
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

    @property
    def steps(self) -> int:
        return self.epochs * self.batches_per_epoch

    @property
    def stream_key(self) -> tuple:
        return self.seed, self.T, self.batch_size, self.per_class_batches


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
    """The live members of one ensemble group and their per-member training state."""

    def __init__(self, configs: list[RunConfig], ids: list[int]):
        self.configs = configs
        self.ids = torch.tensor(ids)
        generators = [torch.Generator().manual_seed(derived_seed(c.seed, "init"))
                      for c in configs]
        self.ensemble = Ensemble([c.model for c in configs], generators)
        self.lr_qk = torch.tensor([c.lr_qk for c in configs])
        self.ramp_start = torch.tensor([float(c.qk_ramp[0]) for c in configs])
        self.ramp_slope = torch.tensor([(c.qk_ramp[1] - c.qk_ramp[0]) / c.steps
                                        for c in configs])
        self.lr_ov = torch.tensor([c.lr_ov for c in configs])

    def keep(self, positions: list[int]) -> None:
        index = torch.tensor(positions, dtype=torch.long)
        self.configs = [self.configs[i] for i in positions]
        self.ids = self.ids[index]
        self.ensemble.keep(index)
        for name in ("lr_qk", "ramp_start", "ramp_slope", "lr_ov"):
            setattr(self, name, getattr(self, name)[index])

    def step(self, t: int, counts, classes, log_counts) -> torch.Tensor:
        losses, grads = self.ensemble.loss_and_grads(counts, classes, log_counts)
        lr_qk = self.lr_qk * (self.ramp_start + self.ramp_slope * t)
        self.ensemble.apply(grads, lr_qk, self.lr_ov)
        return losses


def train(configs: list[RunConfig], progress: bool = True, epoch_callback=None,
          desc: str = "training", workers: int = 1) -> list[RunResult]:
    """Train every run in ``configs`` together; results in the same order.

    ``epoch_callback(config, params, epoch)`` (optional) is called for each run after each
    of its epochs (and once before training, with epoch 0) with that member's parameters;
    what it returns is kept in ``RunResult.epoch_callback_values``.

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
    """Indices of ``configs`` in ``parts`` groups of about equal work (longest first)."""
    def cost(c):  # a factorized OV circuit does about twice the matrix work
        return c.steps * (2 if c.model.ov == "factorized" else 1)

    loads = [0.0] * parts
    groups = [[] for _ in range(parts)]
    for i in sorted(range(len(configs)), key=lambda i: -cost(configs[i])):
        k = loads.index(min(loads))
        groups[k].append(i)
        loads[k] += cost(configs[i])
    return [sorted(g) for g in groups if g]


_FORKED_CALLBACK = None  # set before forking: workers inherit it (closures do not pickle)


def _train_worker(configs, progress, desc, position):
    torch.set_num_threads(1)
    return _train_together(configs, progress, _FORKED_CALLBACK, f"{desc} [{position + 1}]",
                           position=position)


def _train_in_processes(configs, progress, epoch_callback, desc, workers):
    import multiprocessing

    global _FORKED_CALLBACK
    parts = _split(configs, workers)
    _FORKED_CALLBACK = epoch_callback
    try:
        with multiprocessing.get_context("fork").Pool(len(parts)) as pool:
            outputs = pool.starmap(_train_worker, [
                ([configs[i] for i in part], progress, desc, k) for k, part in enumerate(parts)
            ])
    finally:
        _FORKED_CALLBACK = None
    results = [None] * len(configs)
    for part, out in zip(parts, outputs):
        for i, result in zip(part, out):
            results[i] = result
    return results


def _train_together(configs, progress, epoch_callback, desc, position=0):
    streams = {}
    stream_of = []
    for c in configs:
        if c.stream_key not in streams:
            seed, T, batch, per_class = c.stream_key
            streams[c.stream_key] = tasks.DataStream(derived_seed(seed, "data"), T, batch,
                                                     per_class)
        stream_of.append(list(streams).index(c.stream_key))
    stream_list = list(streams.values())
    stream_of = torch.tensor(stream_of)

    by_group = defaultdict(list)
    for i, c in enumerate(configs):
        by_group[c.model.group].append(i)
    groups = [_Group([configs[i] for i in ids], ids) for ids in by_group.values()]

    n = len(configs)
    epoch_sum = torch.zeros(n, dtype=torch.float64)
    nonfinite = torch.zeros(n, dtype=torch.long)
    histories = [[] for _ in range(n)]
    callback_values = [[] for _ in range(n)]
    results: list[RunResult | None] = [None] * n

    def call_back(group, position, epoch):
        if epoch_callback is not None:
            i = int(group.ids[position])
            value = epoch_callback(configs[i], group.ensemble.member(position), epoch)
            callback_values[i].append(value)

    for group in groups:
        for position in range(len(group.configs)):
            call_back(group, position, 0)

    total_steps = max(c.steps for c in configs)
    bar = tqdm(total=total_steps, desc=desc, disable=not progress, mininterval=2.0,
               unit="step", position=position)
    t = 0
    while groups:
        batches = [stream.batch_at(t) for stream in stream_list]
        counts = torch.stack([b.counts for b in batches])
        classes = torch.stack([b.classes for b in batches])
        log_counts = torch.log(counts)
        for group in groups:
            rows = stream_of[group.ids]
            losses = group.step(t, counts[rows], classes[rows], log_counts[rows])
            epoch_sum.index_add_(0, group.ids, losses.double())
            nonfinite.index_add_(0, group.ids, (~torch.isfinite(losses)).long())
        t += 1
        bar.update(1)

        for group in groups:
            finished = []
            for position, c in enumerate(group.configs):
                if t % c.batches_per_epoch:
                    continue
                i = int(group.ids[position])
                if nonfinite[i] > 0:
                    bar.close()
                    # Once the loss is non-finite the weights are too, and it stays so.
                    first = t - int(nonfinite[i]) + 1
                    raise TrainingDiverged(
                        f"run {c.name!r} diverged: non-finite loss from step {first} "
                        f"(epoch {t // c.batches_per_epoch}, batch "
                        f"{(first - 1) % c.batches_per_epoch + 1}); lower its learning rates"
                    )
                mean = float(epoch_sum[i]) / c.batches_per_epoch
                epoch_sum[i] = 0.0
                histories[i].append(mean)
                epoch = len(histories[i])
                call_back(group, position, epoch)
                stop = c.early_stop_loss is not None and mean <= c.early_stop_loss
                if stop or epoch == c.epochs:
                    results[i] = RunResult(c, np.array(histories[i]), stop and epoch < c.epochs,
                                           group.ensemble.member(position), callback_values[i])
                    finished.append(position)
            if finished:
                group.keep([k for k in range(len(group.configs)) if k not in finished])
        groups = [g for g in groups if len(g.configs)]
    bar.update(total_steps - bar.n)
    bar.close()
    return results
