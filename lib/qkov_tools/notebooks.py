"""Execute a figure notebook with papermill and store it without volatile metadata.

The executed notebook is stripped of papermill's timestamps and durations (so the stored
notebook changes only when its results change), written to a temporary file next to the
destination and renamed into place: a failed run leaves the stored notebook untouched.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import nbformat

from qkov.artifacts import repo_root
from qkov.sets import write_atomic

# What papermill and nbclient add on every run: timestamps, durations, exceptions flags.
VOLATILE_KEYS = ["metadata.papermill", "cell.metadata.papermill", "cell.metadata.execution"]


# Every notebook's first code cell: on Colab or Binder, or wherever the companion is not
# installed, it installs it; where `qkov` imports (this repository's environment) it does
# nothing. The book does not show it (tag remove-cell). The URL is CITATION.cff's
# repository-code; the extra is what the notebooks import beyond the library (myst-nb's glue).
INSTALL_TEMPLATE = """\
# Colab, Binder or any Python without the companion: install it first (a no-op where
# `qkov` already imports, as in the repository's own environment).
import importlib.util

if importlib.util.find_spec("qkov") is None:
    %pip install --quiet "qkov[notebook] @ git+{repository}"
"""
INSTALL_TAG = "remove-cell"


def repository_url(root: Path | None = None) -> str:
    """CITATION.cff's repository-code: the one place the repository's URL is written."""
    import yaml

    return yaml.safe_load((Path(root or repo_root()) / "CITATION.cff").read_text())[
        "repository-code"]


def install_source(root: Path | None = None) -> str:
    return INSTALL_TEMPLATE.format(repository=repository_url(root))


def with_install_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with the install cell as its first code cell (an existing one is brought up to
    date in place, keeping its id and execution count)."""
    source = install_source().rstrip("\n")
    existing = [c for c in nb.cells if c.cell_type == "code" and 'find_spec("qkov")' in c.source]
    if existing:
        existing[0].source = source
        return nb
    first_code = next((k for k, c in enumerate(nb.cells) if c.cell_type == "code"),
                      len(nb.cells))
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [INSTALL_TAG]})
    cell.id = "install-qkov"
    nb.cells.insert(first_code, cell)
    return nb


# The notebook's parameters cell, generated from its figure's Parameters (the one source of
# the defaults and of what each parameter means): `python -m qkov_tools parameters-cell`.
PARAMETERS_HEAD = ('# Parameters: papermill sets them with -p NAME VALUE (lists and None with '
                   '-y "NAME: VALUE").')
PARAMETERS_TAG = "parameters"


def _literal(value) -> str:
    """``value`` as Python source, strings in double quotes as the notebooks write them."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, float) and "e" in repr(value):  # 1e-06 -> 1e-6
        mantissa, exponent = repr(value).split("e")
        return f"{mantissa}e{int(exponent)}"
    return repr(value)


def parameters_source(parameters: type) -> str:
    """The parameters cell of a figure whose parameters are ``parameters`` (a
    ``qkov.params.FigureParameters``): one line per field, in the notebook's order, with its
    default and what it means."""
    by_name = {f.name: f for f in dataclasses.fields(parameters)}
    defaults = parameters.defaults()
    lines = [PARAMETERS_HEAD]
    for name in parameters.names():
        f = by_name[name]
        annotation = f.type if isinstance(f.type, str) else f.type.__name__
        annotation = annotation.removesuffix(" | None")  # papermill reads one type name
        lines.append(f"{name}: {annotation} = {_literal(defaults[name])}  # {f.metadata['doc']}")
    return "\n".join(lines)


def with_parameters_cell(nb: nbformat.NotebookNode, parameters: type) -> nbformat.NotebookNode:
    """``nb`` with its ``parameters`` cell generated from ``parameters``."""
    cell = next((c for c in nb.cells if PARAMETERS_TAG in c.metadata.get("tags", [])), None)
    if cell is None:
        raise ValueError(f"no cell tagged {PARAMETERS_TAG!r} to generate")
    cell.source = parameters_source(parameters)
    return nb


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop volatile metadata; keep outputs, execution counts, cell ids and tags.

    The stderr of cells tagged ``remove-stderr`` (progress bars of long training cells,
    which the book hides anyway) is dropped too: it is timing noise, not a result, and
    would bloat the stored notebook. The run's log keeps it.
    """
    from nbstripout import strip_output

    nb = strip_output(nb, keep_output=True, keep_count=True, keep_id=True,
                      extra_keys=VOLATILE_KEYS)
    for cell in nb.cells:
        if "remove-stderr" in cell.get("metadata", {}).get("tags", []):
            cell.outputs = [o for o in cell.get("outputs", [])
                            if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    return nb


def store(nb: nbformat.NotebookNode, path: Path) -> None:
    write_atomic(Path(path), (nbformat.writes(strip(nb)) + "\n").encode())


def run(notebook: Path, output: Path | None = None, parameters: dict | None = None,
        cwd: Path | None = None) -> Path:
    """Execute ``notebook`` with ``parameters`` and store the result at ``output``.

    ``output`` defaults to the notebook itself: the stored outputs are the latest run.
    """
    import papermill

    notebook, output = Path(notebook), Path(output or notebook)
    with tempfile.TemporaryDirectory() as tmp:
        executed = Path(tmp) / notebook.name
        papermill.execute_notebook(
            str(notebook), str(executed), parameters=parameters or {},
            cwd=str(cwd or repo_root()), kernel_name="python3", progress_bar=False,
            log_output=True,
        )
        store(nbformat.read(executed, as_version=4), output)
    return output
