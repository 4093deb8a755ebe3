"""The training trajectories of the synthetic task's runs: held-out loss and attention after
every epoch. paper-fig2 writes them (``trajectories.csv``) and theory-rescaling reads them;
this module is the one definition of that file, its columns checked on both sides."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FILE = "trajectories.csv"
COLUMNS = ("panel", "seed", "epoch", "loss", "attention_distinct", "attention_class")


def _float(text: str) -> float:
    """A measured value; an empty field is NaN (write_table writes non-finite values so)."""
    return float(text) if text else float("nan")


_TYPES = (str, int, int, _float, _float, _float)


@dataclass(frozen=True)
class Trajectory:
    """One run: ``points`` is (epochs + 1, 4), rows of epoch, held-out loss, attention on
    distinct tokens and attention on class-identifying tokens."""

    panel: str
    seed: int
    points: np.ndarray


def table(trajectories: Iterable[Trajectory]) -> tuple[list[dict], tuple[str, ...]]:
    """The rows of ``trajectories.csv`` and its columns, as ``plotting.publish`` takes a
    table."""
    rows = [{"panel": t.panel, "seed": t.seed, "epoch": int(p[0]), "loss": float(p[1]),
             "attention_distinct": float(p[2]), "attention_class": float(p[3])}
            for t in trajectories for p in t.points]
    return rows, COLUMNS


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
