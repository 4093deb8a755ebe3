"""The import graph of the library, read from the source (nothing is imported).

Snakemake re-runs a figure when a library file its notebook imports, directly or through
other modules, changes (:func:`library_inputs`); the layering test checks that every module
imports only from layers below its own (:func:`library_imports`). Packages covered:
``qkov`` (the science) and ``qkov_tools`` (this tooling).
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

from qkov.artifacts import repo_root

PACKAGES = ("qkov", "qkov_tools")


def _module_file(module: str, root: Path) -> Path | None:
    """The file of module ``module`` ("qkov.params", "qkov.figures", "qkov_tools.sweeps"),
    or None if there is no such module (a name imported from a module, not a module)."""
    base = root / "lib" / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _ours(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in PACKAGES


def _imported_modules(source: str, root: Path, package: str = "") -> set[str]:
    """The modules of PACKAGES a piece of code imports, dotted (``qkov.synthetic.models``):
    ``from qkov import x``, ``from qkov.x import y``, ``import qkov.x.y`` and, inside the
    package ``package`` (e.g. "qkov.synthetic"), relative imports (``from . import x``,
    ``from ..x import y``). An imported name that is a submodule counts as that module; any
    other name counts as the module it comes from. Importing ``a.b.c`` runs ``a`` and
    ``a.b`` first, so those count too."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            elif _ours(node.module):
                base = node.module
            else:
                continue
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if _module_file(name, root) else base)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if _ours(alias.name)}
    return found | {".".join(m.split(".")[:k]) for m in found for k in range(1, m.count(".") + 1)}


def library_modules(root: str | Path | None = None) -> list[str]:
    """Every module of PACKAGES, dotted (packages by their name: ``qkov.figures``)."""
    lib = Path(root or repo_root()) / "lib"
    names = []
    for package in PACKAGES:
        for path in sorted((lib / package).rglob("*.py")):
            parts = path.relative_to(lib).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def library_imports(module: str, root: str | Path | None = None) -> set[str]:
    """The modules of PACKAGES that ``module`` (e.g. "qkov.figures.paper_fig2") imports."""
    root = Path(root or repo_root())
    path = _module_file(module, root)
    if path is None:
        raise ValueError(f"no module {module!r} below {root / 'lib'}")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return _imported_modules(path.read_text(), root, package) - {module}


def python_source(cell_source: str) -> str:
    """A notebook code cell as Python: IPython magics (the install cell's %pip) are not
    Python, so a pass stands in their place."""
    return "\n".join(line[:len(line) - len(line.lstrip())] + "pass"
                     if line.lstrip().startswith(("%", "!")) else line
                     for line in cell_source.splitlines())


def library_inputs(notebook: str | Path, root: str | Path | None = None) -> list[str]:
    """The library files a notebook's results depend on: the modules its code cells import,
    and theirs, transitively (paths relative to ``root``). Snakemake re-runs a figure when
    one of them changes, and only then: editing the book's extension or the sweeps' code
    re-runs no training."""
    root = Path(root or repo_root())
    nb = nbformat.read(root / notebook, as_version=4)
    pending = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            pending |= _imported_modules(python_source(cell.source), root)
    seen = set()
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            pending |= library_imports(module, root) - seen
    files = {_module_file(name, root) for name in seen | {"qkov"}}
    return sorted(str(path.relative_to(root)) for path in files)
