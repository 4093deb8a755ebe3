"""Statistics over seeds, and how the tables print them: every figure's mean ± interval
comes from here, so that all of them mean the same thing.

:func:`seed_interval` is the mean over seeds and the half-width of its Student-t interval;
:func:`interval_text` prints such a pair, :func:`seed_interval_text` both at once;
:func:`records_interval` is the same over table records, one value per seed (the mean of
that seed's matching records).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import scipy.stats


def seed_interval(values, level: float = 0.95) -> tuple[float, float]:
    """Mean over seeds and the half-width of its ``level`` Student-t interval (ddof = 1);
    the half-width is NaN for a single seed."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, float("nan")
    t = scipy.stats.t.ppf(0.5 + level / 2, len(values) - 1)
    return mean, float(t * values.std(ddof=1) / np.sqrt(len(values)))


def interval_text(mean: float, half_width: float, digits: int = 4) -> str:
    """How the tables print a mean over seeds and its interval: "0.7811 ± 0.00048"."""
    return f"{mean:.{digits}g} ± {half_width:.2g}"


def seed_interval_text(values, digits: int = 4) -> str:
    """One value per seed printed as their mean ± the half-width of its 95% interval."""
    return interval_text(*seed_interval(values), digits)


def records_interval(records: Iterable[Mapping], key: str, **match) -> tuple[float, float]:
    """:func:`seed_interval` of ``key`` over the records whose fields equal ``match``
    (each record has a "seed"): one value per seed, the mean of that seed's records."""
    per_seed: dict = {}
    for r in records:
        if all(r[field] == value for field, value in match.items()):
            per_seed.setdefault(r["seed"], []).append(r[key])
    return seed_interval([np.mean(v) for v in per_seed.values()])
