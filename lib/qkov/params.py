"""Notebook parameters: collect them from a notebook's namespace and check them before any work.

papermill only warns about a parameter name the notebook does not declare, and it passes
``-p`` values as numbers or strings as it sees fit. Every notebook therefore calls
:func:`collect` right after its ``parameters`` cell, and the figure's own validator checks
types and ranges with the helpers below, so that a bad value fails at once with a message
naming the parameter and what is allowed.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field, fields
from numbers import Integral, Real
from pathlib import Path
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


# --- typed parameters of a figure ---------------------------------------------------------


def parameter(default: Any, check: Callable[..., Any], **limits: Any) -> Any:
    """A field of a :class:`FigureParameters` dataclass: its default (the notebook's) and the
    check that ``__post_init__`` applies, e.g. ``parameter(0.01, number, above=0)``."""
    def checked(name: str, value: Any) -> Any:
        return check(name, value, **limits)

    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"check": checked})
    return field(default=default, metadata={"check": checked})


def _has_text(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, (list, tuple))
                                      and any(isinstance(v, str) for v in value))


# --- what a run costs, told and bounded before it starts ------------------------------------

# A run estimated to take longer than this (on the machine of the timing record) is refused
# unless the notebook is given allow_long=True: a typo such as -p epochs 50000 should not
# hold a laptop for a day. Paper scale is at most a few minutes per figure.
CEILING_MINUTES = 60.0
# Without a timing record (an install that is not a checkout), the ceiling is this many times
# the figure's default (paper-scale) work.
CEILING_TIMES_DEFAULT = 10.0
TIMING_RECORD = Path("benchmarks") / "results" / "figures-run.json"  # below the checkout


@dataclass(frozen=True)
class Work:
    """The computing a run asks for, counted from its parameters before any is done:
    ``amount`` of ``unit`` (e.g. model-steps: one optimizer step of one model)."""

    amount: float
    unit: str


def recorded_seconds(figure_id: str) -> tuple[float, str] | None:
    """The wall time of ``figure_id``'s default run in the last recorded ``make figures``
    (``benchmarks/results/figures-run.json`` of the checkout) and that record's machine;
    None without one."""
    from .artifacts import running_checkout

    checkout = running_checkout()
    try:
        record = json.loads((checkout / TIMING_RECORD).read_text()) if checkout else None
        return float(record["figures"][figure_id]["wall_time_s"]), record["machine"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


_COMMON = ("allow_long",)  # the fields of FigureParameters itself


@dataclass(frozen=True)
class FigureParameters:
    """Base of every figure's parameters: a frozen dataclass whose fields are the parameters
    of the figure's notebook, checked field by field (and then by :meth:`check`, for
    relations between fields) when it is made, so a bad value fails before any work with a
    message naming it. A notebook makes it with :meth:`from_notebook`; code and tests call
    the class with keyword arguments (an unknown name is a TypeError naming it).

    A figure that computes for long declares :meth:`work`; a run is then estimated against
    the default run's recorded time and refused above ``CEILING_MINUTES`` unless
    ``allow_long`` (:meth:`cost`).

    ``given`` keeps the values as they were passed (for summary.json); the fields hold them
    checked and converted (e.g. a list of numbers as floats).
    """

    allow_long: bool = parameter(False, boolean)  # run even above the cost ceiling

    def __post_init__(self):
        given = {name: getattr(self, name) for name in self.names()}
        for f in fields(self):
            if f.init and "check" in f.metadata:
                object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))
                if _has_text(given[f.name]) and not _has_text(getattr(self, f.name)):
                    given[f.name] = getattr(self, f.name)  # "1e-3" from YAML: record 0.001
        object.__setattr__(self, "_given", given)
        self.check()
        object.__setattr__(self, "_cost", self._estimate())
        if self._cost is not None and self._cost["over"] and not self.allow_long:
            raise ParameterError("allow_long", f"{self._cost['text']}; that is above the "
                                 f"ceiling of {self._cost['ceiling']}: check the parameters, "
                                 "or pass -p allow_long True (in a sweep file: "
                                 "allow_long: true) to run it anyway")

    def check(self) -> None:
        """Relations between fields, and derived values (set with ``object.__setattr__``)."""

    def work(self) -> Work | None:
        """The computing this run asks for, or None where it is too little to matter."""
        return None

    def _estimate(self) -> dict[str, Any] | None:
        work = self.work()
        if work is None:
            return None
        defaults = self.defaults()
        is_default = all(self.given[k] == defaults[k] for k in defaults if k != "allow_long")
        default_work = work if is_default else type(self)(**defaults).work()
        times = work.amount / default_work.amount
        text = f"work: {work.amount:,.0f} {work.unit} ({times:.3g} x the default run)"
        if "workers" in defaults:  # fewer processes than the default run's: longer
            cpus = os.cpu_count() or 1
            times *= min(defaults["workers"], cpus) / min(self.workers, cpus)
        figure = self.spec()
        recorded = recorded_seconds(figure.id) if figure is not None else None
        if recorded is None:
            return {"text": text + "; no timing record here to estimate minutes from",
                    "work": text, "over": times > CEILING_TIMES_DEFAULT,
                    "ceiling": f"{CEILING_TIMES_DEFAULT:g} x the default run"}
        minutes = times * recorded[0] / 60
        return {"text": text + f"; estimated {minutes:.2g} min at the recorded rate "
                               f"({TIMING_RECORD})",
                "work": text, "over": minutes > CEILING_MINUTES,
                "ceiling": f"{CEILING_MINUTES:g} min"}

    def cost(self) -> str | None:
        """The run's work and estimated minutes, as the notebook prints them first."""
        return None if self._cost is None else self._cost["text"]

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameters in the notebook's order: the figure's own, then those every figure
        has (``allow_long``), which its parameters cell lists last."""
        own = [f.name for f in fields(cls) if f.init]
        return tuple(sorted(own, key=lambda name: name in _COMMON))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {f.name: f.default if f.default is not MISSING else f.default_factory()
                for f in fields(cls) if f.init}

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]):
        """The parameters from a notebook's ``globals()`` (see :func:`collect`), checked
        (a number YAML gave as text is put back into ``namespace`` as the number), and where
        the run will write (:func:`qkov.artifacts.output_dir`: refused before any
        work if it is the canonical folder and the parameters are not the defaults, or a
        folder that holds other files); prints the run's cost first where the figure counts
        it (in the pipeline, the work alone: the record times that run)."""
        p = cls(**collect(namespace, cls.names()))
        namespace.update(p.given)  # the notebook's later cells see 1e-3 from YAML as 0.001 too
        spec = cls.spec()
        if spec is not None and "artifacts_dir" in cls.names():
            from .artifacts import check_replaceable, output_dir

            check_replaceable(output_dir(spec.id, p), spec.files)
        if p.cost() is not None:
            from .artifacts import pipeline_run

            # The pipeline's runs are the ones the record times: their stored notebooks show
            # the work alone, so that they change only when the work does.
            print(f"{p._cost['work']}; the pipeline records this run's time in {TIMING_RECORD}"
                  if pipeline_run() else p.cost())
        return p

    @classmethod
    def spec(cls):
        """The ``SPEC`` of the figure module that defines these parameters, or None."""
        return getattr(sys.modules[cls.__module__], "SPEC", None)

    @property
    def given(self) -> dict[str, Any]:
        return dict(self._given)


def derived(**kw: Any) -> Any:
    """A field :meth:`FigureParameters.check` computes (not a parameter)."""
    return field(init=False, repr=False, compare=False, **kw)
