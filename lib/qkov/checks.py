"""Checks of a parameter's value: a ParameterError names the parameter and what is allowed."""

from __future__ import annotations

import math
import operator
import re
from numbers import Integral, Real
from typing import Any


class ParameterError(ValueError):
    def __init__(self, name: str, message: str):
        self.name = name
        super().__init__(f"parameter {name!r}: {message}")


def integer(name: str, value: Any, minimum: int | None = None,
            maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ParameterError(name, f"expected an integer, got {value!r}")
    for bound, sign, holds in ((minimum, ">=", operator.ge), (maximum, "<=", operator.le)):
        if bound is not None and not holds(value, bound):
            raise ParameterError(name, f"expected an integer {sign} {bound}, got {value!r}")
    return int(value)


# PyYAML (papermill -y, sweep files) reads YAML 1.1: "1e-3" (no dot) is text; YAML 1.2: a number.
_YAML_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def number(name: str, value: Any, *, above: float | None = None, below: float | None = None,
           at_least: float | None = None, at_most: float | None = None) -> float:
    if isinstance(value, str) and _YAML_NUMBER.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ParameterError(name, f"expected a finite number, got {value!r}")
    value = float(value)
    for bound, sign, holds in ((at_least, ">=", operator.ge), (at_most, "<=", operator.le),
                               (above, ">", operator.gt), (below, "<", operator.lt)):
        if bound is not None and not holds(value, bound):
            raise ParameterError(name, f"expected a number {sign} {bound:g}, got {value:g}")
    return value


def number_list(name: str, value: Any, *, max_items: int | None = None, distinct: bool = False,
                **bounds: float) -> list[float]:
    """With ``distinct``, no two alike as ``f"{x:g}"`` writes them (it names a run)."""
    if isinstance(value, str):  # papermill -p passes text
        raise ParameterError(name, f"expected a list of numbers, got the string {value!r}; "
                                   f"with papermill pass lists as YAML: -y \"{name}: [0.1, 1, 10]\"")
    if not isinstance(value, (list, tuple)) or not value:
        raise ParameterError(name, f"expected a non-empty list of numbers, got {value!r}")
    if max_items is not None and len(value) > max_items:
        raise ParameterError(name, f"expected at most {max_items} items, got {len(value)}")
    checked = []
    for i, item in enumerate(value):
        try:
            checked.append(number(name, item, **bounds))
        except ParameterError as err:
            raise ParameterError(name, f"item {i}: {str(err).split(': ', 1)[1]}") from None
    written = [f"{x:g}" for x in checked]
    repeated = [w for w in written if written.count(w) > 1]
    if distinct and repeated:
        raise ParameterError(name, f"expected distinct values, got {repeated[0]} twice")
    return checked


def rate_list(name: str, value: Any) -> list[float]:
    """Distinct positive learning rates, in increasing order (a sweep's base rates)."""
    rates = number_list(name, value, distinct=True, above=0)
    if rates != sorted(rates):
        raise ParameterError(name, f"expected the rates in increasing order, got {value!r}")
    return rates


def loss_list(name: str, value: Any) -> list[float]:
    """Distinct positive losses, in decreasing order (the order training reaches them)."""
    losses = number_list(name, value, distinct=True, above=0)
    if losses != sorted(losses, reverse=True):
        raise ParameterError(name, f"expected the losses in decreasing order, got {value!r}")
    return losses


def seed_list(name: str, value: Any) -> list[int]:
    seeds = number_list(name, value)
    if any(s != int(s) or s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ParameterError(name, f"expected distinct non-negative integers, got {value!r}")
    return [int(s) for s in seeds]


def boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ParameterError(name, f"expected True or False, got {value!r}")
    return value


def one_of(name: str, value: Any, *, options) -> Any:
    if value not in options:
        raise ParameterError(name, f"expected one of {list(options)}, got {value!r}")
    return value


def optional_number(name: str, value: Any, **bounds: Any) -> float | None:
    return None if value is None else number(name, value, **bounds)


def optional_path(name: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ParameterError(name, f"expected a directory path or None, got {value!r}")
    return value
