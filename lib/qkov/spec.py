"""A figure's specification: everything outside its computation that the pipeline, the
cluster profile, the book and the tests need to know about it, declared once.

Each figure module ``qkov.figures.<module>`` declares ``SPEC = FigureSpec(...)``;
``qkov.figures.specs()`` finds them all. The Snakefile makes one rule per spec (outputs,
inputs, threads, cluster resources), the book's extension gives each drawing its caption
head, downloads and citation, the gallery and the reproducibility table list them, sweeps
look up the figure they run, and ``plotting.publish`` refuses to write files the spec does
not declare. Adding a figure is one module with a ``SPEC``, one notebook, a line in
``_toc.yml`` and its prose.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import MappingProxyType

DRAWING_FORMATS = ("png", "pdf", "svg")
ALWAYS_WRITTEN = ("data.csv", "summary.json")  # every figure's rows and summary
DTYPES = ("float32", "float64")
ID_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")  # "paper-fig2"; module paper_fig2
# The cluster resources a spec may set (memory in MB, wall time in minutes); what it leaves
# out, a job gets from the profile's default-resources (profiles/slurm/config.yaml).
RESOURCES = ("mem_mb", "runtime")


@dataclass(frozen=True)
class Drawing:
    """One drawing of a figure, saved as ``<stem>.png``, ``.pdf`` and ``.svg``: ``name``
    None is the main one (``figure.*``, labelled by the figure's id), any other name is
    ``figure-<name>.*``, labelled ``<id>-<name>``. ``reproduces``: the paper figure it
    reproduces ("paper Fig. 2"), or None for the companion's own. ``alt``: its alt text, a
    sentence or two saying what it shows (the panels, their axes, what is plotted) for a
    reader who cannot see it; the book gives it to the image, and ``plotting.publish``
    refuses a drawing without one."""

    name: str | None
    reproduces: str | None
    alt: str = ""

    @property
    def stem(self) -> str:
        return "figure" if self.name is None else f"figure-{self.name}"


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the book.

    ``id``: its id (``paper-fig2``), the stem of its notebook ``notebooks/<id>.ipynb``, its
    output folder ``artifacts/<id>/`` and (with ``_`` for ``-``) its module's name.
    ``reproduces``: the paper figure its main drawing reproduces, or None. ``alt``: the
    main drawing's alt text (:class:`Drawing`; each extra drawing has its own).
    ``page``: the book page that shows it (a ``_toc.yml`` entry, e.g. ``book/theory``).
    ``tables``: the CSV files it writes besides ``data.csv``. ``extra_drawings``: drawings
    besides ``figure.*``. ``reads``: files of other figures it reads, as
    ``<figure-id>/<file>`` (the pipeline runs those figures first).
    ``threads``: the cores it uses (the training figures spread over two worker processes).
    ``resources``: what a cluster job of it needs (``RESOURCES``), where the profile's
    defaults are not enough.
    ``rates``: how fast its work goes (``Parameters.work()``'s units per second of its
    default run on ``qkov.cost.REFERENCE_MACHINE``), from which a run's cost is estimated
    before it starts; a figure that computes for seconds states none.
    ``dtype``: the floating-point type it computes in; None when it is the notebook's
    ``dtype`` parameter. ``needs_dataset``: it needs a dataset a reader downloads (its
    notebook says where to get it); ``make figures`` leaves it out.
    """

    id: str
    reproduces: str | None
    page: str
    tables: tuple[str, ...] = ()
    extra_drawings: tuple[Drawing, ...] = ()
    reads: tuple[str, ...] = ()
    threads: int = 1
    resources: Mapping[str, int] = field(default_factory=dict)
    rates: Mapping[str, float] = field(default_factory=dict)
    dtype: str | None = "float32"
    needs_dataset: bool = False
    alt: str = ""

    def __post_init__(self):
        where = f"FigureSpec {self.id!r}"
        if not isinstance(self.id, str) or not ID_PATTERN.fullmatch(self.id):
            raise ValueError(f"{where}: id: expected lower-case words joined by '-', "
                             f"e.g. 'paper-fig2'")
        for name in self.tables:
            if not name.endswith(".csv") or "/" in name or name in ALWAYS_WRITTEN:
                raise ValueError(f"{where}: tables: expected file names ending in .csv other "
                                 f"than {ALWAYS_WRITTEN}, got {name!r}")
        for read in self.reads:
            parts = PurePosixPath(read).parts
            if len(parts) != 2 or not ID_PATTERN.fullmatch(parts[0]) or parts[0] == self.id:
                raise ValueError(f"{where}: reads: expected '<other-figure-id>/<file>', "
                                 f"got {read!r}")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"{where}: threads: expected an integer >= 1, got {self.threads!r}")
        unknown = sorted(set(self.resources) - set(RESOURCES))
        if unknown:
            raise ValueError(f"{where}: resources: unknown {unknown}; a spec may set "
                             f"{RESOURCES} (a GPU: run the figure as a sweep that asks for it)")
        if not all(isinstance(v, int) and v > 0 for v in self.resources.values()):
            raise ValueError(f"{where}: resources: expected positive integers, "
                             f"got {dict(self.resources)!r}")
        object.__setattr__(self, "resources", MappingProxyType(dict(self.resources)))
        if not all(isinstance(v, (int, float)) and v > 0 for v in self.rates.values()):
            raise ValueError(f"{where}: rates: expected positive units per second, "
                             f"got {dict(self.rates)!r}")
        object.__setattr__(self, "rates", MappingProxyType(dict(self.rates)))
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ValueError(f"{where}: dtype: expected one of {DTYPES} or None, "
                             f"got {self.dtype!r}")
        for drawing in self.drawings:
            if not isinstance(drawing.alt, str):
                raise ValueError(f"{where}: alt of drawing {drawing.stem!r}: expected a "
                                 f"sentence saying what it shows, got {drawing.alt!r}")
        names = [d.name for d in self.extra_drawings]
        if None in names or len(set(names)) != len(names):
            raise ValueError(f"{where}: extra_drawings: expected distinct names, got {names}")

    @property
    def module(self) -> str:
        """Its module below ``qkov.figures``."""
        return self.id.replace("-", "_")

    @property
    def notebook(self) -> str:
        return f"notebooks/{self.id}.ipynb"

    @property
    def drawings(self) -> tuple[Drawing, ...]:
        return (Drawing(None, self.reproduces, self.alt), *self.extra_drawings)

    def label(self, drawing: Drawing) -> str:
        """The label readers cite a drawing by: ``<id>`` or ``<id>-<name>``."""
        return self.id if drawing.name is None else f"{self.id}-{drawing.name}"

    @property
    def files(self) -> tuple[str, ...]:
        """The files it writes into its output folder, in the order they are written."""
        return (*(f"{d.stem}.{fmt}" for d in self.drawings for fmt in DRAWING_FORMATS),
                *self.tables, *ALWAYS_WRITTEN)

    def outputs(self, artifacts: str = "artifacts") -> list[str]:
        """Its files as the pipeline names them: ``artifacts/<id>/<file>``."""
        return [f"{artifacts}/{self.id}/{name}" for name in self.files]

    def inputs(self, artifacts: str = "artifacts") -> list[str]:
        """The files of other figures it reads: ``artifacts/<figure-id>/<file>``."""
        return [f"{artifacts}/{read}" for read in self.reads]

    def dtype_of(self, parameters) -> str:
        """The floating-point type a run computed in: the spec's, or the run's ``dtype``."""
        return self.dtype if self.dtype is not None else parameters.dtype
