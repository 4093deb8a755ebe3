"""A figure's specification, declared once as ``SPEC`` in its module and read by the
pipeline, the cluster profile, the book, the sweeps and ``plotting.publish``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

DRAWING_FORMATS = ("png", "pdf", "svg")
ALWAYS_WRITTEN = ("data.csv", "summary.json")
DTYPES = ("float32", "float64")
ID_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")  # "paper-fig2"; module paper_fig2
RESOURCES = ("mem_mb", "runtime")  # a cluster job's, beyond the profile's default-resources


@dataclass(frozen=True)
class Drawing:
    """``figure.*`` (``name`` None) or ``figure-<name>.*``; ``alt``: what it shows."""

    name: str | None
    reproduces: str | None
    alt: str = ""

    @property
    def stem(self) -> str:
        return "figure" if self.name is None else f"figure-{self.name}"


@dataclass(frozen=True)
class FigureSpec:
    """``id``: its notebook's stem, its folder, its module (with ``_``); ``reads``: other
    figures' files (``<figure-id>/<file>``); ``rates``: of its work (:mod:`qkov.cost`);
    ``dtype`` None: the notebook's ``dtype`` parameter; ``needs_dataset``: one a reader
    downloads (``make figures`` leaves it out)."""

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
        names = [d.name for d in self.extra_drawings]
        for wrong, message in (
            (not ID_PATTERN.fullmatch(self.id), "id: expected lower-case words joined by '-'"),
            (any(not t.endswith(".csv") or "/" in t or t in ALWAYS_WRITTEN for t in self.tables),
             f"tables: expected file names ending in .csv other than {ALWAYS_WRITTEN}"),
            (any(not re.fullmatch(rf"({ID_PATTERN.pattern})/[^/]+", r) or r.startswith(f"{self.id}/")
                 for r in self.reads), "reads: expected '<other-figure-id>/<file>'"),
            (set(self.resources) - set(RESOURCES)
             or not all(isinstance(v, int) and v > 0 for v in self.resources.values()),
             f"resources: expected positive integers, of {RESOURCES} only"),
            (isinstance(self.threads, bool) or not isinstance(self.threads, int)
             or self.threads < 1, "threads: expected a whole number of cores, at least 1"),
            (self.dtype not in (*DTYPES, None), f"dtype: expected one of {DTYPES} or None"),
            (None in names or len(set(names)) != len(names),
             "extra_drawings: expected distinct names"),
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

    def label(self, drawing: Drawing) -> str:  # how readers cite a drawing
        return self.id if drawing.name is None else f"{self.id}-{drawing.name}"

    @property
    def files(self) -> tuple[str, ...]:  # in the order they are written
        return (*(f"{d.stem}.{fmt}" for d in self.drawings for fmt in DRAWING_FORMATS),
                *self.tables, *ALWAYS_WRITTEN)

    def outputs(self) -> list[str]:  # the Snakefile's
        return [f"artifacts/{self.id}/{name}" for name in self.files]

    def inputs(self) -> list[str]:
        return [f"artifacts/{read}" for read in self.reads]
