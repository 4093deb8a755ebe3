"""A figure's notebook parameters: a frozen dataclass per figure, the one source of the
defaults (its parameters cell is generated from it). papermill only warns of an unknown name:
``from_notebook`` refuses a bad one before any work, naming it."""

from __future__ import annotations

import os
import sys
import types
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from . import tables
from .artifacts import output_dir
from .checks import ParameterError, boolean, optional_path
from .cost import CEILING_MINUTES, Work, estimate
from .sets import check_replaceable

_KERNEL_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}  # IPython's, not parameters
_SEEN = "__qkov_parameter_names__"


def collect(namespace: dict[str, Any], allowed) -> dict[str, Any]:
    """The public non-module names of a notebook's ``globals()`` at the first call
    (remembered: a re-run in a live kernel ignores later cells')."""
    if _SEEN not in namespace:
        namespace[_SEEN] = sorted(name for name, value in namespace.items()
                                  if not name.startswith("_") and name not in _KERNEL_NAMES
                                  and not isinstance(value, types.ModuleType))
    for name in namespace[_SEEN]:
        if name not in allowed:
            raise ParameterError(name, f"unknown parameter; this notebook takes {', '.join(allowed)}")
    return {name: namespace[name] for name in allowed}


def parameter(default: Any, check, doc: str = "", **limits: Any) -> Any:
    """A field: its default, its check (with ``limits``), its comment in the parameters cell."""
    metadata = {"check": lambda name, value: check(name, value, **limits), "doc": doc}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def derived() -> Any:  # a field FigureParameters.check computes
    return field(init=False, repr=False, compare=False)


def _has_text(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, (list, tuple))
                                      and any(isinstance(v, str) for v in value))


@dataclass(frozen=True)
class FigureParameters:
    """Each field is checked when made, then :meth:`check` (relations between fields), then
    the cost of :meth:`work`. ``given``: the values as passed; the fields hold them checked."""

    artifacts_dir: str | None = parameter(
        None, optional_path, "output folder; None: a run folder artifacts/runs/<id>-<hash>")
    allow_long: bool = parameter(
        False, boolean, f"run even when the estimate is above the cost ceiling "
                        f"({CEILING_MINUTES:g} min)")

    def __post_init__(self):
        given = {name: getattr(self, name) for name in self.names()}
        for f in fields(self):
            if "check" in f.metadata:
                object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))
                if _has_text(given[f.name]) and not _has_text(getattr(self, f.name)):
                    given[f.name] = getattr(self, f.name)  # "1e-3" from YAML: record 0.001
        object.__setattr__(self, "given", given)
        self.check()
        work, slowdown = self.work(), 1.0
        if "workers" in self.names():  # fewer processes than the default run's: longer
            cpus = os.cpu_count() or 1
            slowdown = min(self.defaults()["workers"], cpus) / min(self.workers, cpus)
        cost = None if work is None else estimate(work, self.spec().rates, slowdown)
        object.__setattr__(self, "_cost", cost)
        if cost is not None and cost.minutes > CEILING_MINUTES and not self.allow_long:
            raise ParameterError("allow_long", f"{cost.text}; that is above the ceiling "
                                 f"of {CEILING_MINUTES:g} min: check the parameters, or pass "
                                 "-p allow_long True (in a sweep file: allow_long: true) to "
                                 "run it anyway")

    def check(self) -> None:
        """Relations between fields, and derived values (set with ``object.__setattr__``)."""

    def work(self) -> Work | tuple[Work, ...] | None:  # None: too little to matter
        return None

    def cost(self) -> str | None:  # the line its notebook prints first
        return None if self._cost is None else self._cost.text

    @classmethod
    def names(cls) -> tuple[str, ...]:  # the figure's own, then this class's
        own = [f.name for f in fields(cls) if f.init]
        return tuple(sorted(own, key=lambda name: name in ("artifacts_dir", "allow_long")))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {f.name: f.default if f.default is not MISSING else f.default_factory()
                for f in fields(cls) if f.init}

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]):
        """Checked with the folder the run will replace, before any work; prints the cost."""
        p = cls(**collect(namespace, cls.names()))
        tables.taken()  # a run starts with no tables shown (a stopped run may have left some)
        namespace.update(p.given)  # later cells see 1e-3 from YAML as 0.001 too
        check_replaceable(output_dir(cls.spec().id, p), cls.spec().files)
        if p.cost() is not None:
            print(p.cost())
        return p

    @classmethod
    def spec(cls):  # the SPEC of the figure module that defines these parameters
        return getattr(sys.modules[cls.__module__], "SPEC", None)
