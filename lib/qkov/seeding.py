"""The one place random generators are made from seeds.

A run has one seed; its data, initialisation and held-out evaluation each get an
independent stream derived from it (:func:`derived_seed`), so that changing how one is
drawn never shifts the others. Everything that draws random numbers takes its generator
from here.
"""

from __future__ import annotations

import numpy as np
import torch

PURPOSES = {"data": 0, "init": 1, "eval": 2, "split": 3}


def derived_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed of its own for each (seed, purpose), purpose one of PURPOSES.

    Data, initialisation and evaluation of a run must not share random numbers, although
    they share the run's seed.
    """
    if purpose not in PURPOSES:
        raise ValueError(f"unknown seed purpose {purpose!r}; valid: {', '.join(PURPOSES)}")
    state = np.random.SeedSequence([seed, PURPOSES[purpose]]).generate_state(2, np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def generator(seed: int) -> torch.Generator:
    """A torch generator started at ``seed`` (for a seed already derived, or a descent's)."""
    return torch.Generator().manual_seed(seed)


def normal_(tensor: torch.Tensor, std: float, generator: torch.Generator,
            mean: float = 0.0) -> torch.Tensor:
    """Fill ``tensor`` in place with N(mean, std^2) draws from ``generator``, the same on
    every CPU: drawn in float64 and rounded to ``tensor``'s dtype."""
    draws = torch.empty(tensor.shape, dtype=torch.float64).normal_(mean, std, generator=generator)
    with torch.no_grad():
        return tensor.copy_(draws)


def init_generator(seed: int) -> torch.Generator:
    """The generator a run's initial parameters are drawn from (also used to recover them)."""
    return generator(derived_seed(seed, "init"))
