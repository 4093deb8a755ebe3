"""What a run costs, told before it starts: its work (``Parameters.work()``, e.g. model-steps)
at the rates its spec states (on ``REFERENCE_MACHINE``), the same on every machine. Above
``CEILING_MINUTES`` a run needs ``allow_long=True``: ``-p epochs 50000`` must not hold a
laptop for a day."""

from __future__ import annotations

from typing import NamedTuple

CEILING_MINUTES = 60.0
REFERENCE_MACHINE = "2 cores"  # where a from-scratch `make figures` timed the specs' rates


class Work(NamedTuple):  # counted: how the amount is weighted
    amount: float
    unit: str
    counted: str = ""


def parts(work: Work | tuple[Work, ...]) -> tuple[Work, ...]:  # a tuple: parts in several units
    return (work,) if isinstance(work, Work) else work


class Estimate(NamedTuple):
    text: str  # the line a notebook prints first
    minutes: float


def estimate(work: Work | tuple[Work, ...], rates, slowdown: float = 1.0) -> Estimate:
    minutes = slowdown * sum(part.amount / rates[part.unit] for part in parts(work)) / 60
    counted = " + ".join(f"{part.amount:,.0f} {part.unit}"
                         + (f" ({part.counted})" if part.counted else "") for part in parts(work))
    return Estimate(f"work: {counted}; about {minutes:.2g} min on {REFERENCE_MACHINE} at the "
                    f"rate{'s' if len(parts(work)) > 1 else ''} its spec states", minutes)
