"""Which library files a notebook's results depend on: Snakemake re-runs a figure when one of
them changes (:func:`library_inputs`). The import graph is grimp's (import-linter's graph
library, which also checks the layers: ``[tool.importlinter]`` in pyproject.toml), read from
the source of the imported ``qkov`` and ``qkov_tools`` (the checkout's, installed editable)
without running it.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import grimp
import nbformat

from qkov.artifacts import repo_root

PACKAGES = ("qkov", "qkov_tools")


@cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def library_modules() -> list[str]:
    """Every module of PACKAGES, dotted (packages by their name: ``qkov.figures``)."""
    return sorted(_graph().modules)


def python_source(cell_source: str) -> str:
    """A notebook code cell as Python: IPython magics (the install cell's %pip) are not
    Python, so a pass stands in their place."""
    return "\n".join(line[:len(line) - len(line.lstrip())] + "pass"
                     if line.lstrip().startswith(("%", "!")) else line
                     for line in cell_source.splitlines())


def library_inputs(notebook: str | Path, root: str | Path | None = None) -> list[str]:
    """The library files a notebook's results depend on: the modules its code cells import,
    and theirs, transitively, with the packages above each (importing ``a.b.c`` runs ``a``
    and ``a.b`` first); paths relative to ``root``. Snakemake re-runs a figure when one of
    them changes, and only then: editing the book's extension or the sweeps' code re-runs no
    training."""
    root = Path(root or repo_root())
    graph = _graph()
    imported = {"qkov"}
    for cell in nbformat.read(root / notebook, as_version=4).cells:
        nodes = ast.walk(ast.parse(python_source(cell.source))) if cell.cell_type == "code" else ()
        for node in nodes:
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:  # a name or a module
                imported |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}"
                             in graph.modules else node.module for alias in node.names}
    imported &= graph.modules
    modules = imported.union(*(graph.find_upstream_modules(m) for m in imported))
    modules |= {".".join(m.split(".")[:k]) for m in modules for k in range(1, m.count(".") + 1)}
    files = [Path("lib", *m.split(".")) for m in modules]
    return sorted(str(f.with_suffix(".py") if (root / f).with_suffix(".py").is_file()
                      else f / "__init__.py") for f in files)
