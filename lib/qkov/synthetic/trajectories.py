"""The training trajectories of the synthetic task's runs: held-out loss and attention after
every epoch, and what the circuits' factors say then (their effective-rate factor and the
conserved quantity, ``qkov.synthetic.models.factor_measures``). :func:`measuring_callback`
records them during training; paper-fig2 and fig2-controls write them
(``trajectories.csv``) and theory-rescaling and fig2-controls read paper-fig2's; this
module is the one definition of that file, its columns checked on both sides."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import metrics

FILE = "trajectories.csv"
MEASURES = ("loss", "attention_distinct", "attention_class", "rate_qk", "rate_ov",
            "conserved_qk", "conserved_ov")
COLUMNS = ("panel", "seed", "epoch", *MEASURES)


def _float(text: str) -> float:
    """A measured value; an empty field is NaN (write_table writes non-finite values so)."""
    return float(text) if text else float("nan")


_TYPES = (str, int, int, *[_float] * len(MEASURES))


@dataclass(frozen=True)
class Trajectory:
    """One run: ``points`` is (measured epochs, 1 + len(MEASURES)), rows of the epoch and
    :data:`MEASURES`: held-out loss, attention on distinct and on class-identifying tokens,
    the QK and OV circuits' rate factors and conserved quantities (NaN for a collapsed
    circuit)."""

    panel: str
    seed: int
    points: np.ndarray


def table(trajectories: Iterable[Trajectory]) -> tuple[list[dict], tuple[str, ...]]:
    """The rows of ``trajectories.csv`` and its columns, as ``plotting.publish`` takes a
    table."""
    rows = [{"panel": t.panel, "seed": t.seed, "epoch": int(p[0]),
             **{name: float(value) for name, value in zip(MEASURES, p[1:], strict=True)}}
            for t in trajectories for p in t.points]
    return rows, COLUMNS


def measuring_callback(trajectory_batches: int, dense_epochs: int, every: int):
    """An ``epoch_callback`` for ``qkov.synthetic.train.train``: after every epoch up to
    ``dense_epochs`` and every ``every``-th after it (and before the first), each run's
    held-out loss and attention on ``trajectory_batches`` batches of its own held-out stream
    (the first batches of the set the heatmaps use), and its factors' measures, as one
    batched evaluation of every run that ended that epoch. A run's values are
    (epoch, *MEASURES), or None at the epochs skipped (late in training an epoch changes
    little, and each measurement costs time)."""
    held_out = {}

    def measure(configs, circuits, epoch):
        if epoch > dense_epochs and epoch % every:
            return [None] * len(configs)
        for c in configs:
            key = c.seed, c.T, c.cut
            if key not in held_out:
                held_out[key] = metrics.held_out_batches(c.seed, c.T, trajectory_batches,
                                                         cut=c.cut)
        values = np.zeros((len(configs), 3))
        # counts of different T (or task) do not stack: one call per (T, task)
        for T, cut in {(c.T, c.cut) for c in configs}:
            index = [i for i, c in enumerate(configs) if (c.T, c.cut) == (T, cut)]
            sets = [held_out[configs[i].seed, T, cut] for i in index]
            values[index] = metrics.learned_attention_measures(
                {k: v[index] for k, v in circuits.items()},
                torch.stack([b.counts for b in sets]), torch.stack([b.classes for b in sets]))
        factors = np.stack([circuits[name].numpy() for name in MEASURES[3:]], 1)
        return [(epoch, *map(float, row), *map(float, extra))
                for row, extra in zip(values, factors)]

    return measure


def read(path: str | Path) -> list[Trajectory]:
    """The runs of a ``trajectories.csv``, in file order. A file that is not one (missing,
    other columns, a value of the wrong type) is a ValueError naming the file and line."""
    path = Path(path)
    runs: dict[tuple[str, int], list[list[float]]] = {}
    try:
        with path.open(newline="") as handle:
            reader = csv.reader(handle)
            header = tuple(next(reader, ()))
            if header != COLUMNS:
                raise ValueError(f"{path}, line 1: expected the columns {', '.join(COLUMNS)}, "
                                 f"got {', '.join(header) or 'nothing'}")
            for line, row in enumerate(reader, start=2):
                if len(row) != len(COLUMNS):
                    raise ValueError(f"{path}, line {line}: expected {len(COLUMNS)} values, "
                                     f"got {len(row)}")
                values = []
                for column, kind, text in zip(COLUMNS, _TYPES, row):
                    try:
                        values.append(kind(text))
                    except ValueError:
                        expected = {str: "text", int: "an integer"}.get(kind, "a number")
                        raise ValueError(f"{path}, line {line}: {column}: expected "
                                         f"{expected}, got {text!r}") from None
                panel, seed, *point = values
                runs.setdefault((panel, seed), []).append(point)
    except OSError as err:
        raise ValueError(f"{path}: cannot read it ({err.strerror or err})") from None
    return [Trajectory(panel, seed, np.array(points)) for (panel, seed), points in runs.items()]
