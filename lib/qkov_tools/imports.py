"""Which library files a notebook's results depend on (the Snakefile's rule inputs), from
grimp's import graph (import-linter's library) of the checkout's ``qkov`` and ``qkov_tools``."""

import ast
from functools import cache
from pathlib import Path

import grimp
import nbformat
from IPython.core.inputtransformer2 import TransformerManager


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("qkov", "qkov_tools", cache_dir=None)


def notebook_imports(path: str | Path) -> set[str]:
    """What a notebook's code cells import, dotted (``from a.b import c``: a.b and a.b.c),
    read as IPython reads them (the install cell's %pip is a magic)."""
    names, ipython = set(), TransformerManager()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code":
            for node in ast.walk(ast.parse(ipython.transform_cell(cell.source))):
                if isinstance(node, ast.Import):
                    names |= {alias.name for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def library_inputs(notebook: str | Path, root: str | Path) -> list[str]:
    """The library files (relative to ``root``) of the modules a notebook imports, transitively,
    and of the packages above each: Snakemake re-runs a figure when one of them changes."""
    root, imports = Path(root), graph()
    modules = ({"qkov"} | notebook_imports(root / notebook)) & imports.modules
    modules |= set().union(*map(imports.find_upstream_modules, modules))
    modules |= {m.rsplit(".", k)[0] for m in modules for k in range(1, m.count(".") + 1)}
    return sorted(f"lib/{m.replace('.', '/')}" + ("/__init__.py" if (root / "lib" / m.replace(
        ".", "/")).is_dir() else ".py") for m in modules)
