"""What a run costs, told before it starts: its work (``Parameters.work()``, e.g. model-steps)
at the rates its spec states (on ``REFERENCE_MACHINE``), the same on every machine. Above
``CEILING_MINUTES`` a run needs ``allow_long=True``: ``-p epochs 50000`` must not hold a
laptop for a day."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

CEILING_MINUTES = 60.0
REFERENCE_MACHINE = "2 cores"  # where a from-scratch `make figures` timed the specs' rates


@dataclass(frozen=True)
class Work:  # parts in several units add up with +; counted: how the amount is weighted
    amount: float
    unit: str
    counted: str = ""

    @property
    def parts(self) -> tuple[Work, ...]:
        return (self,)

    def __add__(self, other: Work | WorkSum) -> WorkSum:
        return WorkSum((*self.parts, *other.parts))


@dataclass(frozen=True)
class WorkSum:
    parts: tuple[Work, ...]
    __add__ = Work.__add__


class Estimate(NamedTuple):
    text: str  # the line a notebook prints first
    minutes: float


def estimate(work: Work | WorkSum, rates, slowdown: float = 1.0) -> Estimate:
    minutes = slowdown * sum(part.amount / rates[part.unit] for part in work.parts) / 60
    counted = " + ".join(f"{part.amount:,.0f} {part.unit}"
                         + (f" ({part.counted})" if part.counted else "") for part in work.parts)
    return Estimate(f"work: {counted}; about {minutes:.2g} min on {REFERENCE_MACHINE} at the "
                    f"rate{'s' if len(work.parts) > 1 else ''} its spec states", minutes)
