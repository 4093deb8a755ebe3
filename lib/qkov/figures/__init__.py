"""One module per figure of the book, named by its figure id (``paper-fig2`` ->
``paper_fig2``). Each declares ``SPEC`` (a :class:`qkov.spec.FigureSpec`: its outputs, what
it reads, its cores and cluster resources, its book page) and exports ``Parameters`` - a
frozen dataclass of the notebook's parameters, checked when made, before any work - and the
steps its notebook calls, from training or integrating to the rows it prints and stores.
Figure modules do not import each other; what two of them share lives in a lower layer or
in a module of this package whose name starts with ``_`` (not a figure).

:func:`specs` finds every figure by importing the modules of this package: a new figure
is a new module here (and its notebook), nothing else in the library.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from ..spec import FigureSpec


def module(figure_id: str) -> ModuleType:
    """The figure module of ``figure_id`` ("paper-fig2" -> ``qkov.figures.paper_fig2``)."""
    known = specs()
    if figure_id not in known:
        raise KeyError(f"unknown figure {figure_id!r}; the figures are {', '.join(known)}")
    return importlib.import_module(f"{__name__}.{known[figure_id].module}")


def specs() -> dict[str, FigureSpec]:
    """Every figure's spec by id, sorted by id. A module of this package without a ``SPEC``,
    or whose ``SPEC.id`` does not match its name, is an error that names it."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):  # a part figures share, not a figure
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(mod, "SPEC", None)
        if not isinstance(spec, FigureSpec):
            raise TypeError(f"{mod.__file__}: a figure module must declare SPEC = FigureSpec(...)")
        if spec.module != info.name:
            raise ValueError(f"{mod.__file__}: SPEC.id {spec.id!r} does not name this module "
                             f"(expected {info.name.replace('_', '-')!r})")
        found[spec.id] = spec
    return dict(sorted(found.items()))
