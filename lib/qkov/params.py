"""Notebook parameters: collect them from a notebook's namespace and check them before any work.

papermill only warns about a parameter name the notebook does not declare, and it passes
``-p`` values as numbers or strings as it sees fit. Every notebook therefore calls
:func:`collect` right after its ``parameters`` cell, and the figure's own validator checks
types and ranges with the helpers below, so that a bad value fails at once with a message
naming the parameter and what is allowed.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field, fields
from numbers import Integral, Real
from typing import Any


class ParameterError(ValueError):
    """A notebook parameter has an unknown name, a wrong type or a value out of range."""

    def __init__(self, name: str, message: str):
        self.name = name
        super().__init__(f"parameter {name!r}: {message}")


# Names IPython puts into every kernel namespace; they are never notebook parameters.
_KERNEL_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}
_SEEN = "__qkov_parameter_names__"


def collect(namespace: dict[str, Any], allowed: Iterable[str]) -> dict[str, Any]:
    """Return the notebook's parameters from ``namespace`` (its ``globals()``).

    Call it in the cell after ``parameters`` (and after papermill's injected cell), before
    that cell defines other names: every public, non-module name defined so far is a
    parameter, and one outside ``allowed`` (a typo such as ``-p ratio 3``) raises
    :class:`ParameterError`. The names seen on the first call are remembered in the
    namespace, so re-running the cell in a live kernel does not mistake the notebook's own
    later variables for parameters (the values are always read afresh).
    """
    allowed = list(allowed)
    if _SEEN not in namespace:
        namespace[_SEEN] = sorted(
            name
            for name, value in namespace.items()
            if not name.startswith("_")
            and name not in _KERNEL_NAMES
            and not isinstance(value, types.ModuleType)
        )
    seen = namespace[_SEEN]
    unknown = [name for name in seen if name not in allowed]
    if unknown:
        raise ParameterError(
            unknown[0], f"unknown parameter; this notebook takes {', '.join(allowed)}"
        )
    missing = [name for name in allowed if name not in seen]
    if missing:
        raise ParameterError(missing[0], "missing from the notebook's parameters cell")
    return {name: namespace[name] for name in allowed}


def integer(name: str, value: Any, minimum: int | None = None) -> int:
    """An integer (not a bool, not a float such as 5.0) at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ParameterError(name, f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ParameterError(name, f"expected an integer >= {minimum}, got {value!r}")
    return int(value)


def number(
    name: str,
    value: Any,
    *,
    above: float | None = None,
    below: float | None = None,
    at_least: float | None = None,
) -> float:
    """A finite real number strictly inside (``above``, ``below``) and ``>= at_least``
    where those are given."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ParameterError(name, f"expected a finite number, got {value!r}")
    value = float(value)
    if at_least is not None and not value >= at_least:
        raise ParameterError(name, f"expected a number >= {at_least:g}, got {value:g}")
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
) -> list[float]:
    """A non-empty list of numbers, each checked as by :func:`number`.

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
    checked = []
    for i, item in enumerate(value):
        try:
            checked.append(number(name, item, above=above, below=below))
        except ParameterError as err:
            raise ParameterError(name, f"item {i}: {str(err).split(': ', 1)[1]}") from None
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


def optional_path(name: str, value: Any) -> str | None:
    """``None`` (use the default location) or a non-empty path string."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(name, f"expected a directory path or None, got {value!r}")
    return value


# --- typed parameters of a figure ---------------------------------------------------------


def parameter(default: Any, check: Callable[..., Any], **limits: Any) -> Any:
    """A field of a :class:`FigureParameters` dataclass: its default (the notebook's) and the
    check that ``__post_init__`` applies, e.g. ``parameter(0.01, number, above=0)``."""
    def checked(name: str, value: Any) -> Any:
        return check(name, value, **limits)

    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"check": checked})
    return field(default=default, metadata={"check": checked})


@dataclass(frozen=True)
class FigureParameters:
    """Base of every figure's parameters: a frozen dataclass whose fields are the parameters
    of the figure's notebook, checked field by field (and then by :meth:`check`, for
    relations between fields) when it is made, so a bad value fails before any work with a
    message naming it. A notebook makes it with :meth:`from_notebook`; code and tests call
    the class with keyword arguments (an unknown name is a TypeError naming it).

    ``given`` keeps the values as they were passed (for summary.json); the fields hold them
    checked and converted (e.g. a list of numbers as floats).
    """

    def __post_init__(self):
        object.__setattr__(self, "_given", {name: getattr(self, name) for name in self.names()})
        for f in fields(self):
            if f.init and "check" in f.metadata:
                object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))
        self.check()

    def check(self) -> None:
        """Relations between fields, and derived values (set with ``object.__setattr__``)."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.init)

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {f.name: f.default if f.default is not MISSING else f.default_factory()
                for f in fields(cls) if f.init}

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]):
        """The parameters from a notebook's ``globals()`` (see :func:`collect`), checked."""
        return cls(**collect(namespace, cls.names()))

    @property
    def given(self) -> dict[str, Any]:
        return dict(self._given)


def derived(**kw: Any) -> Any:
    """A field :meth:`FigureParameters.check` computes (not a parameter)."""
    return field(init=False, repr=False, compare=False, **kw)
