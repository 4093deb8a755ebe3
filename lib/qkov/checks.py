"""Checks of a value against what a parameter allows, each failing with a
:class:`ParameterError` that names the parameter and what is allowed.

The science (``qkov.theory``, ``qkov.language``) checks its inputs with these; the figures'
notebook parameters (``qkov.params``) check every field with them before any work.
"""

from __future__ import annotations

import math
import re
from numbers import Integral, Real
from typing import Any


class ParameterError(ValueError):
    """A notebook parameter has an unknown name, a wrong type or a value out of range."""

    def __init__(self, name: str, message: str):
        self.name = name
        super().__init__(f"parameter {name!r}: {message}")


def integer(name: str, value: Any, minimum: int | None = None,
            maximum: int | None = None) -> int:
    """An integer (not a bool, not a float such as 5.0) in [``minimum``, ``maximum``]."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ParameterError(name, f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ParameterError(name, f"expected an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ParameterError(name, f"expected an integer <= {maximum}, got {value!r}")
    return int(value)


# A number written as YAML 1.2 writes it. PyYAML (papermill's -y, qkov_tools run -y) follows
# YAML 1.1, which reads "1e-3" (no dot) as a string; every parameter reads it as the number.
_YAML_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def yaml_number(value: Any) -> Any:
    """``value``, or the float a string such as "1e-3" writes (YAML 1.2's reading)."""
    if isinstance(value, str) and _YAML_NUMBER.fullmatch(value.strip()):
        return float(value)
    return value


def number(
    name: str,
    value: Any,
    *,
    above: float | None = None,
    below: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> float:
    """A finite real number strictly inside (``above``, ``below``) and within
    [``at_least``, ``at_most``] where those are given. A string that YAML 1.2 reads as a
    number ("1e-3") is that number."""
    value = yaml_number(value)
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ParameterError(name, f"expected a finite number, got {value!r}")
    value = float(value)
    if at_least is not None and not value >= at_least:
        raise ParameterError(name, f"expected a number >= {at_least:g}, got {value:g}")
    if at_most is not None and not value <= at_most:
        raise ParameterError(name, f"expected a number <= {at_most:g}, got {value:g}")
    if above is not None and not value > above:
        raise ParameterError(name, f"expected a number > {above:g}, got {value:g}")
    if below is not None and not value < below:
        raise ParameterError(name, f"expected a number < {below:g}, got {value:g}")
    return value


def number_list(
    name: str,
    value: Any,
    *,
    above: float | None = None,
    below: float | None = None,
    at_most: float | None = None,
    max_items: int | None = None,
    distinct: bool = False,
) -> list[float]:
    """A non-empty list of numbers, each checked as by :func:`number`; with ``distinct``,
    no two alike as written (``f"{x:g}"``, as they name runs: two runs of one name fail
    their training, after part of the work).

    A string here usually means ``papermill -p name "[...]"``, which passes text: say how to
    pass a list instead.
    """
    if isinstance(value, str):
        raise ParameterError(
            name,
            f"expected a list of numbers, got the string {value!r}; "
            f"with papermill pass lists as YAML: -y \"{name}: [0.1, 1, 10]\"",
        )
    if not isinstance(value, (list, tuple)) or not value:
        raise ParameterError(name, f"expected a non-empty list of numbers, got {value!r}")
    if max_items is not None and len(value) > max_items:
        raise ParameterError(name, f"expected at most {max_items} items, got {len(value)}")
    checked = []
    for i, item in enumerate(value):
        try:
            checked.append(number(name, item, above=above, below=below, at_most=at_most))
        except ParameterError as err:
            raise ParameterError(name, f"item {i}: {str(err).split(': ', 1)[1]}") from None
    if distinct:
        written = [f"{x:g}" for x in checked]
        repeated = [w for w in written if written.count(w) > 1]
        if repeated:
            raise ParameterError(name, f"expected distinct values, got {repeated[0]} twice")
    return checked


def seed_list(name: str, value: Any) -> list[int]:
    """A non-empty list of distinct non-negative integer seeds."""
    seeds = number_list(name, value)
    if any(s != int(s) or s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ParameterError(name, f"expected distinct non-negative integers, got {value!r}")
    return [int(s) for s in seeds]


def boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ParameterError(name, f"expected True or False, got {value!r}")
    return value


def one_of(name: str, value: Any, *, options) -> Any:
    """One of ``options`` (a value a notebook names, e.g. a mode)."""
    if value not in options:
        raise ParameterError(name, f"expected one of {list(options)}, got {value!r}")
    return value


def optional_number(name: str, value: Any, **limits: Any) -> float | None:
    """``None`` (not given) or a :func:`number` within ``limits``."""
    return None if value is None else number(name, value, **limits)


def optional_path(name: str, value: Any) -> str | None:
    """``None`` (use the default location) or a non-empty path string."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(name, f"expected a directory path or None, got {value!r}")
    return value
