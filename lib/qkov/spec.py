"""A figure's specification, declared once as ``SPEC`` in its module: what the pipeline
(one rule per spec), the cluster profile, the book, the sweeps and ``plotting.publish``
(which writes only the files it declares) need to know about a figure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

DRAWING_FORMATS = ("png", "pdf", "svg")
ALWAYS_WRITTEN = ("data.csv", "summary.json")
DTYPES = ("float32", "float64")
ID_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")  # "paper-fig2"; module paper_fig2
RESOURCES = ("mem_mb", "runtime")  # a cluster job's, beyond the profile's default-resources


@dataclass(frozen=True)
class Drawing:
    """A drawing saved as ``<stem>.png/.pdf/.svg``: ``name`` None is ``figure.*`` (labelled
    by the figure's id), else ``figure-<name>.*`` (``<id>-<name>``). ``reproduces``: the
    paper figure, or None. ``alt``: what it shows, for a reader who cannot see it."""

    name: str | None
    reproduces: str | None
    alt: str = ""

    @property
    def stem(self) -> str:
        return "figure" if self.name is None else f"figure-{self.name}"


@dataclass(frozen=True)
class FigureSpec:
    """One figure: its ``id`` (its notebook's stem, its folder, its module with ``_``), what
    its main drawing reproduces and its ``alt``, its book ``page``, the CSV ``tables`` it
    writes besides data.csv, its ``extra_drawings``, the files of other figures it
    ``reads`` (``<figure-id>/<file>``), its ``threads`` and cluster ``resources``, the
    ``rates`` of its work (:mod:`qkov.cost`), its ``dtype`` (None: the notebook's ``dtype``
    parameter), and whether it ``needs_dataset`` (``make figures`` leaves it out)."""

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
        def bad_read(read):
            parts = PurePosixPath(read).parts
            return len(parts) != 2 or not ID_PATTERN.fullmatch(parts[0]) or parts[0] == self.id

        names = [d.name for d in self.extra_drawings]
        for wrong, message in (
            (not ID_PATTERN.fullmatch(self.id), "id: expected lower-case words joined by '-'"),
            (any(not t.endswith(".csv") or "/" in t or t in ALWAYS_WRITTEN for t in self.tables),
             f"tables: expected file names ending in .csv other than {ALWAYS_WRITTEN}"),
            (any(map(bad_read, self.reads)), "reads: expected '<other-figure-id>/<file>'"),
            (not isinstance(self.threads, int) or self.threads < 1,
             "threads: expected an integer >= 1"),
            (set(self.resources) - set(RESOURCES)
             or not all(isinstance(v, int) and v > 0 for v in self.resources.values()),
             f"resources: expected positive integers, of {RESOURCES} only"),
            (not all(isinstance(v, (int, float)) and v > 0 for v in self.rates.values()),
             "rates: expected positive units per second"),
            (self.dtype not in (*DTYPES, None), f"dtype: expected one of {DTYPES} or None"),
            (None in names or len(set(names)) != len(names),
             "extra_drawings: expected distinct names"),
            (not all(isinstance(d.alt, str) for d in self.drawings),
             "alt: expected a sentence saying what each drawing shows"),
        ):
            if wrong:
                raise ValueError(f"FigureSpec {self.id!r}: {message}")

    @property
    def module(self) -> str:
        return self.id.replace("-", "_")

    @property
    def notebook(self) -> str:
        return f"notebooks/{self.id}.ipynb"

    @property
    def drawings(self) -> tuple[Drawing, ...]:
        return (Drawing(None, self.reproduces, self.alt), *self.extra_drawings)

    def label(self, drawing: Drawing) -> str:
        """How readers cite a drawing: ``<id>`` or ``<id>-<name>``."""
        return self.id if drawing.name is None else f"{self.id}-{drawing.name}"

    @property
    def files(self) -> tuple[str, ...]:
        """The files it writes, in the order they are written."""
        return (*(f"{d.stem}.{fmt}" for d in self.drawings for fmt in DRAWING_FORMATS),
                *self.tables, *ALWAYS_WRITTEN)

    def outputs(self, artifacts: str = "artifacts") -> list[str]:
        return [f"{artifacts}/{self.id}/{name}" for name in self.files]

    def inputs(self, artifacts: str = "artifacts") -> list[str]:
        return [f"{artifacts}/{read}" for read in self.reads]

    def dtype_of(self, parameters) -> str:
        return self.dtype if self.dtype is not None else parameters.dtype
