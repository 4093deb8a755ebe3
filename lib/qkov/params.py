"""A figure's notebook parameters: a frozen dataclass per figure (``Parameters`` in its
module), the one source of the notebook's defaults, checked field by field before any work.

papermill only warns about a parameter name the notebook does not declare, and it passes
``-p`` values as numbers or strings as it sees fit. Every notebook therefore makes its
parameters with :meth:`FigureParameters.from_notebook` right after its ``parameters`` cell:
it collects them from the notebook's namespace (:func:`collect`) and checks each with the
check its field declares (:mod:`qkov.checks`), so that a bad value fails at once with a
message naming the parameter and what is allowed. The parameters cell itself is generated
from the dataclass (:func:`parameters_cell`; ``python -m qkov_tools parameters``).
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from . import tables
from .checks import ParameterError, boolean, optional_path
from .cost import CEILING_MINUTES, Estimate, Work, WorkSum, estimate

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


# --- typed parameters of a figure ---------------------------------------------------------


def parameter(default: Any, check: Callable[..., Any], doc: str = "", **limits: Any) -> Any:
    """A field of a :class:`FigureParameters` dataclass: its default, the check that
    ``__post_init__`` applies with ``limits`` and ``doc``, what the notebook's parameters
    cell says of it, e.g. ``parameter(0.01, number, "learning rate", above=0)``."""
    def checked(name: str, value: Any) -> Any:
        return check(name, value, **limits)

    metadata = {"check": checked, "doc": doc}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def _has_text(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, (list, tuple))
                                      and any(isinstance(v, str) for v in value))


_COMMON = ("artifacts_dir", "allow_long")  # the fields of FigureParameters itself


@dataclass(frozen=True)
class FigureParameters:
    """Base of every figure's parameters: a frozen dataclass whose fields are the parameters
    of the figure's notebook, checked field by field (and then by :meth:`check`, for
    relations between fields) when it is made, so a bad value fails before any work with a
    message naming it. A notebook makes it with :meth:`from_notebook`; code and tests call
    the class with keyword arguments (an unknown name is a TypeError naming it).

    A figure that computes for minutes declares :meth:`work`; its spec states the rates
    (:mod:`qkov.cost`), and a run estimated above ``CEILING_MINUTES`` is refused unless
    ``allow_long``.

    ``given`` keeps the values as they were passed (for summary.json); the fields hold them
    checked and converted (e.g. a list of numbers as floats).
    """

    artifacts_dir: str | None = parameter(
        None, optional_path, "output folder; None: a run folder artifacts/runs/<id>-<hash>")
    allow_long: bool = parameter(
        False, boolean, f"run even when the estimate is above the cost ceiling "
                        f"({CEILING_MINUTES:g} min)")

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
        if self._cost is not None and self._cost.over and not self.allow_long:
            raise ParameterError("allow_long", f"{self._cost.text}; that is above the ceiling "
                                 f"of {CEILING_MINUTES:g} min: check the parameters, or pass "
                                 "-p allow_long True (in a sweep file: allow_long: true) to "
                                 "run it anyway")

    def check(self) -> None:
        """Relations between fields, and derived values (set with ``object.__setattr__``)."""

    def work(self) -> Work | WorkSum | None:
        """The computing this run asks for, or None where it is too little to matter."""
        return None

    def _estimate(self) -> Estimate | None:
        work = self.work()
        if work is None:
            return None
        slowdown = 1.0
        if "workers" in self.names():  # fewer processes than the default run's: longer
            cpus = os.cpu_count() or 1
            default = self.defaults()["workers"]
            slowdown = min(default, cpus) / min(self.workers, cpus)
        figure = self.spec()
        return estimate(work, figure.rates if figure is not None else {}, slowdown)

    def cost(self) -> str | None:
        """The run's work and estimated minutes, as the notebook prints them first."""
        return None if self._cost is None else self._cost.text

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameters in the notebook's order: the figure's own, then those every figure
        has (``artifacts_dir``, ``allow_long``), which its parameters cell lists last."""
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
        it."""
        p = cls(**collect(namespace, cls.names()))
        tables.taken()  # a run starts with no tables shown (a stopped run may have left some)
        namespace.update(p.given)  # the notebook's later cells see 1e-3 from YAML as 0.001 too
        spec = cls.spec()
        if spec is not None:
            from .artifacts import output_dir
            from .sets import check_replaceable

            check_replaceable(output_dir(spec.id, p), spec.files)
        if p.cost() is not None:
            print(p.cost())
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
