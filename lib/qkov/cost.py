"""What a run costs, counted from its parameters and told before it starts.

A figure that computes for minutes counts its work (``Parameters.work()``: amounts of units
such as model-steps) and its spec states how fast that work goes (``FigureSpec.rates``: units
per second of its default run, measured once on ``REFERENCE_MACHINE`` and written there).
The estimate is their quotient, the same on every machine, so a stored notebook's cost line
changes only when the work does. A run estimated above ``CEILING_MINUTES`` is refused unless
the notebook is given ``allow_long=True``: a typo such as ``-p epochs 50000`` should not hold
a laptop for a day. Paper scale is at most a few minutes per figure.
"""

from __future__ import annotations

from dataclasses import dataclass

CEILING_MINUTES = 60.0
# Where the specs' rates were measured: each figure's wall time in a from-scratch
# `make figures`, divided by its default run's work (summary.json records both).
REFERENCE_MACHINE = "2 cores"


@dataclass(frozen=True)
class Work:
    """An amount of computing in one ``unit`` (e.g. model-steps: one optimizer step of one
    model); ``counted``: how the amount is weighted, where it is. Parts in several units add
    up with ``+``."""

    amount: float
    unit: str
    counted: str = ""

    def __add__(self, other: Work) -> WorkSum:
        return WorkSum((self, other))

    @property
    def parts(self) -> tuple[Work, ...]:
        return (self,)


@dataclass(frozen=True)
class WorkSum:
    parts: tuple[Work, ...]

    def __add__(self, other: Work) -> WorkSum:
        return WorkSum((*self.parts, *other.parts))


@dataclass(frozen=True)
class Estimate:
    text: str  # what the notebook prints first
    minutes: float

    @property
    def over(self) -> bool:
        return self.minutes > CEILING_MINUTES


def estimate(work: Work | WorkSum, rates, slowdown: float = 1.0) -> Estimate:
    """The minutes ``work`` takes at ``rates`` (unit -> units per second), times
    ``slowdown`` (e.g. fewer worker processes than the default run's)."""
    missing = [part.unit for part in work.parts if part.unit not in rates]
    if missing:
        raise ValueError(f"no rate for {missing[0]!r}: the figure's spec states rates for "
                         f"{sorted(rates)}")
    minutes = slowdown * sum(part.amount / rates[part.unit] for part in work.parts) / 60
    counted = " + ".join(f"{part.amount:,.0f} {part.unit}"
                         + (f" ({part.counted})" if part.counted else "") for part in work.parts)
    return Estimate(f"work: {counted}; about {minutes:.2g} min on {REFERENCE_MACHINE} at the "
                    f"rate{'s' if len(work.parts) > 1 else ''} its spec states", minutes)
