"""Statistics over seeds, and how the tables print them: every figure's mean ± interval
comes from here, so that all of them mean the same thing.

:func:`seed_interval` is the mean over seeds and the half-width of its Student-t interval
(:func:`seed_band` the same at every point of a curve; :func:`paired_verdict` what the
interval of paired differences says);
:func:`interval_text` prints such a pair, :func:`seed_interval_text` both at once;
:func:`records_interval` is the same over table records, one value per seed (the mean of
that seed's matching records).

A seed interval treats the test set as fixed. :func:`document_bootstrap` also draws the test
documents again (whole documents: their examples are not independent), so its interval
holds for another test sample from the same source; :func:`non_inferiority` reads it
one-sided against a margin, as a "no cost" statement must be read.
"""

from __future__ import annotations

import functools
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


HIGHER, LOWER, EQUIVALENT, NOT_RESOLVED = "higher", "lower", "equivalent", "not resolved"


def paired_verdict(differences, margin: float = 0.0) -> tuple[str, float, float]:
    """How one condition compares with another, from their differences paired by seed (one
    per seed): (verdict, mean, half-width of the 95% t interval). "higher" where the whole
    interval lies above ``margin``, "lower" where it lies below ``-margin``, "equivalent"
    where it lies within (-margin, margin) (only for a margin above 0: a difference too small
    to matter, however sure), else "not resolved" (also for fewer than two seeds)."""
    mean, half = seed_interval(differences)
    if not np.isfinite(half):
        return NOT_RESOLVED, mean, half
    if mean - half > margin:
        return HIGHER, mean, half
    if mean + half < -margin:
        return LOWER, mean, half
    if margin > 0 and -margin < mean - half and mean + half < margin:
        return EQUIVALENT, mean, half
    return NOT_RESOLVED, mean, half


def order_against(predicted: dict, measured: dict) -> tuple[list[str], list[str]]:
    """Does a measurement order the items as a prediction does? ``predicted``: a value per
    item; ``measured``: per item (mean, half-width of its interval). For every pair the
    prediction orders "a > b": ``against`` when the measured intervals lie the other way,
    ``unresolved`` when they overlap (pairs as "a > b")."""
    names = sorted(predicted, key=predicted.get, reverse=True)
    against, unresolved = [], []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (ma, ha), (mb, hb) = measured[a], measured[b]
            if ma - ha > mb + hb:
                continue
            (unresolved if mb - hb <= ma + ha else against).append(f"{a} > {b}")
    return against, unresolved


def seed_band(values, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """:func:`seed_interval` along the first axis (seeds) of ``values`` (seeds, points): the
    mean and the half-width of the ``level`` Student-t interval at every point, as the
    figures draw their bands."""
    values = np.asarray(values, dtype=float)
    mean = values.mean(0)
    if len(values) < 2:
        return mean, np.full_like(mean, np.nan)
    t = scipy.stats.t.ppf(0.5 + level / 2, len(values) - 1)
    return mean, t * values.std(0, ddof=1) / np.sqrt(len(values))


def interval_text(mean: float, half_width: float, digits: int = 4) -> str:
    """How the tables print a mean over seeds and its interval: "0.000981 ± 0.000023".

    The half-width has two significant digits and the mean is rounded to the same decimal
    place (the half-width's second significant digit), but to at most ``digits``
    significant digits ("0.7811 ± 0.00048", not "0.78112 ± 0.00048"). Both are written
    out in fixed notation, unless that takes more than 8 decimals or the numbers reach
    1e8: then both are in e-notation. A zero half-width (every seed gave the same value)
    or none (NaN: a single seed) prints the mean to ``digits`` significant digits (and
    all its integer digits): "1.000 ± 0", "2000 ± 0", "2.000 ± nan". The number of decimals
    follows the half-width, so that a half-width crossing a power of ten on another
    processor changes the mean's last digit, never the entry's shape (tests/nbval_tolerance).
    A half-width of at most a millionth of the mean is float32 rounding between seeds, not a
    spread: it prints as 0 (so two processors' roundings print the same entry).
    """
    if np.isfinite(half_width) and 0 < half_width <= 1e-6 * abs(mean):
        half_width = 0.0
    if not np.isfinite(mean):
        return f"{mean} ± {half_width:.2g}"
    spread = bool(np.isfinite(half_width) and half_width > 0)
    # the powers of ten of the (rounded) half-width's second and the mean's digits-th
    # significant digit; read from the formatted numbers, so that 0.0999 counts as 0.10
    half_place = _exponent(half_width, 2) - 1 if spread else 0
    place = max(half_place if spread else -99,
                _exponent(mean, digits) - digits + 1 if mean else half_place)
    place = place if spread else min(place, 0)  # an exact 2003 is not "2000 ± 0"
    half = _fixed(half_width, half_place) if spread else "0" if half_width == 0 else "nan"
    if place < -8 or half_place < -8 or max(abs(mean), half_width if spread else 0) >= 1e8:
        return (f"{mean:.{max(_exponent(mean, digits) - place, 0)}e} ± "
                + (f"{half_width:.1e}" if spread else half))
    return f"{_fixed(mean, place)} ± {half}"


def _exponent(value: float, digits: int) -> int:
    """The power of ten of ``value``'s first digit once rounded to ``digits`` digits."""
    return int(f"{abs(value):.{digits - 1}e}".split("e")[1])


def _fixed(value: float, place: int) -> str:
    """``value`` rounded to the decimal place 10**place, in fixed notation ("-0" is "0")."""
    text = f"{value:.{-place}f}" if place < 0 else f"{round(value, -place):.0f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def range_text(values) -> str:
    """A position over seeds (an epoch at which something happens: it can split between
    seeds, and a mean ± interval of a split is no interval a reader can use) as the median
    and, where the seeds differ, their range: "61 (60-62)", "1101 (1001-1101)", "500"."""
    values = np.asarray(values, dtype=float)
    low, median, high = values.min(), float(np.median(values)), values.max()
    return f"{median:g}" if low == high else f"{median:g} ({low:g}-{high:g})"


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


@functools.lru_cache(maxsize=8)
def bootstrap_draws(n_seeds: int, n_documents: int, resamples: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`document_bootstrap`'s resamples, as how often each draws each seed and each
    document. They depend on the counts alone, so a figure that bootstraps many conditions
    over one set of test documents draws them once (a draw of 3,000 documents 2,000 times is
    most of a bootstrap's time)."""
    rng = np.random.default_rng(seed)
    seed_draws = (rng.multinomial(n_seeds, np.full(n_seeds, 1 / n_seeds), resamples)
                  if n_seeds > 1 else np.ones((resamples, 1)))
    document_draws = rng.multinomial(n_documents, np.full(n_documents, 1 / n_documents),
                                     resamples)
    seed_draws.flags.writeable = document_draws.flags.writeable = False  # shared: read only
    return seed_draws, document_draws


def document_bootstrap(values, documents, *, resamples: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float, float]:
    """The mean of ``values`` [seeds, examples] (e.g. per test example, 1 where a run was
    right; or a difference of two conditions paired by seed and example) and the
    ``level`` percentile interval of that mean when the seeds and the test documents are
    both drawn again with replacement. ``documents`` [examples]: each example's document
    (an address, a review); a drawn document brings all its examples. Returns (mean, low,
    high); with one seed only the documents are drawn."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[1] == 0:
        raise ValueError(f"values: expected a [seeds, examples] array with examples, got "
                         f"shape {values.shape}")
    if not np.isfinite(values).all():
        raise ValueError("values: expected finite numbers (NaN or inf found)")
    documents = np.asarray(documents)
    if documents.shape != values.shape[1:]:
        raise ValueError(f"documents: expected one per example ({values.shape[1]}), got "
                         f"shape {documents.shape}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise ValueError(f"resamples: expected an integer >= 100, got {resamples!r}")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    names, index = np.unique(documents, return_inverse=True)
    # per seed and document: the sum of its examples' values; per document: their count
    sums = np.zeros((len(values), len(names)))
    for row, seed_values in enumerate(values):
        np.add.at(sums[row], index, seed_values)
    counts = np.bincount(index, minlength=len(names)).astype(float)
    seed_draws, document_draws = bootstrap_draws(len(values), len(names), resamples, seed)
    totals = ((seed_draws @ sums) * document_draws).sum(1)
    examples = len(values) * (document_draws @ counts)
    means = totals / examples
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(values.mean()), float(low), float(high)


NON_INFERIOR, INFERIOR = "no worse than the margin", "worse by more than the margin"


def non_inferiority(differences, documents, margin: float, *, level: float = 0.95,
                    resamples: int = 2000, seed: int = 0) -> tuple[str, float, float]:
    """Is a condition no worse than its reference by more than ``margin``? ``differences``
    [seeds, examples]: the condition minus the reference, paired by seed and example
    (higher is better). One-sided at ``level``: "no worse than the margin" where the lower
    bound of the :func:`document_bootstrap` interval lies above ``-margin``, "worse by more
    than the margin" where the upper bound lies below it, else "not resolved". Returns
    (verdict, mean, lower bound)."""
    if not margin > 0:
        raise ValueError(f"margin: expected a number > 0 (the largest cost that does not "
                         f"matter), got {margin!r}")
    two_sided = 2 * level - 1  # its low end is the one-sided bound at ``level``
    mean, low, high = document_bootstrap(differences, documents, resamples=resamples,
                                         level=two_sided, seed=seed)
    if low > -margin:
        return NON_INFERIOR, mean, low
    if high < -margin:
        return INFERIOR, mean, low
    return NOT_RESOLVED, mean, low
