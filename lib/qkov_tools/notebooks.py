"""Running a figure notebook (papermill) and storing it without what changes on every run (so
it changes only with its results); its install and parameters cells, generated."""

import dataclasses
import json
import tempfile
from pathlib import Path

import nbformat
import yaml

from qkov.artifacts import repo_root
from qkov.figures import module
from qkov.sets import write_atomic

INSTALL = """\
# Colab, Binder or any Python without the companion: install it first (a no-op where
# `qkov` already imports, as in the repository's own environment).
import importlib.util

if importlib.util.find_spec("qkov") is None:
    %pip install --quiet "qkov[notebook] @ git+{}\""""
PARAMETERS = '# Parameters: papermill sets them with -p NAME VALUE (lists and None with -y "NAME: VALUE").'


def install_source() -> str:  # the repository's URL is written once, in CITATION.cff
    return INSTALL.format(yaml.safe_load((repo_root() / "CITATION.cff").read_text())["repository-code"])


def _literal(value) -> str:
    """``value`` as the notebooks write it: strings in double quotes, 1e-6 (not 1e-06)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_literal, value)) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float) and "e" in repr(value):
        mantissa, exponent = repr(value).split("e")
        return f"{mantissa}e{int(exponent)}"
    return repr(value)


def parameters_source(parameters: type) -> str:
    """A figure's parameters cell: each field of its ``FigureParameters``, default and doc."""
    fields, defaults = {f.name: f for f in dataclasses.fields(parameters)}, parameters.defaults()
    kinds = {n: f.type if isinstance(f.type, str) else f.type.__name__ for n, f in fields.items()}
    return "\n".join([PARAMETERS] + [
        f"{n}: {kinds[n].removesuffix(' | None')} = {_literal(defaults[n])}  # "
        f"{fields[n].metadata['doc']}" for n in parameters.names()])


def generate_cells(path: Path) -> None:
    """Make a notebook's install and parameters cells (its first two code cells) current."""
    nb = nbformat.read(path, as_version=4)
    at = next((k for k, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    wanted = (("install-qkov", "remove-cell", install_source()),
              (None, "parameters", parameters_source(module(Path(path).stem).Parameters)))
    for k, (cell_id, tag, source) in enumerate(wanted):
        cell = next((c for c in nb.cells if (c.get("id") == cell_id if cell_id
                                              else tag in c.metadata.get("tags", []))), None)
        if cell is None:
            cell = nbformat.v4.new_code_cell(metadata={"tags": [tag]})
            cell.id = cell_id or cell.id
            nb.cells.insert(at + k, cell)
        cell.source = source
    store(nb, path)


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Without run timestamps and durations, or the progress bars of cells tagged remove-stderr."""
    from nbstripout import strip_output

    nb = strip_output(nb, keep_output=True, keep_count=True, keep_id=True, extra_keys=[
        "metadata.papermill", "cell.metadata.papermill", "cell.metadata.execution"])
    for cell in nb.cells:
        if "remove-stderr" in cell.get("metadata", {}).get("tags", []):
            cell.outputs = [o for o in cell.outputs if o.get("name") != "stderr"]
    return nb


def store(nb: nbformat.NotebookNode, path: Path) -> None:
    write_atomic(Path(path), (nbformat.writes(strip(nb)) + "\n").encode())


def run(notebook: Path, output: Path | None = None, parameters: dict | None = None) -> None:
    """Execute ``notebook``, store it at ``output`` (default: in place); a failed run stores nothing."""
    import papermill

    with tempfile.TemporaryDirectory() as tmp:
        executed = Path(tmp) / Path(notebook).name
        papermill.execute_notebook(notebook, executed, parameters=parameters or {},
                                   cwd=repo_root(), kernel_name="python3", progress_bar=False,
                                   log_output=True)
        store(nbformat.read(executed, as_version=4), Path(output or notebook))
