"""`papermill NB --help-notebook` names every parameter of every figure notebook.

papermill reads a notebook's parameters with its Python translator, which skips a line with
more than one "=" (it logs "Unable to parse line"): a parameter whose comment holds an "="
(e.g. "d_head = d_model / n_heads", ">= 1 token") went missing from --help-notebook, and
`-p NAME VALUE` for it warned "unknown parameter". The parameters papermill finds must be
the figure module's ``Parameters.names()``, in the notebook's order.
"""

import papermill
import pytest

from conftest import REPO
from qkov import figures

FIGURE_IDS = sorted(figures.specs())


def notebook(figure_id):
    return REPO / "notebooks" / f"{figure_id}.ipynb"


@pytest.mark.parametrize("figure_id", FIGURE_IDS)
def test_papermill_finds_exactly_the_figures_parameters(figure_id):
    import nbformat

    expected = list(figures.module(figure_id).Parameters.names())
    found = list(papermill.inspect_notebook(str(notebook(figure_id))))
    nb = nbformat.read(notebook(figure_id), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    unreadable = [line for line in cell.source.splitlines() if line.count("=") > 1]
    assert found == expected, (
        f"papermill finds {found}; missing {[n for n in expected if n not in found]}; "
        f"lines it cannot parse (an '=' in the comment): {unreadable}")


def test_the_help_notebook_command_lists_every_parameter(run_tool):
    figure_id = "language-agreement"  # the notebook whose comments once hid two parameters
    result = run_tool("papermill", notebook(figure_id), "--help-notebook")
    listed = [line.split(":")[0].strip() for line in result.stdout.splitlines()
              if line.startswith("  ") and not line.startswith("   ") and ":" in line]
    assert listed == list(figures.module(figure_id).Parameters.names()), result.stdout
    assert "Unable to parse" not in result.stdout + result.stderr
