"""Every figure's typed parameters (``qkov.figures.<id>.Parameters``): the notebook's
parameters cell declares exactly them with the same defaults, and a wrong name or a wrong
type fails before any work with a message naming the parameter. Every notebook of
``notebooks/`` counts, those of the pipeline's registry and the real-data ones outside it."""

import importlib

import nbformat
import pytest

from conftest import REPO
from qkov import pipeline
from qkov.params import ParameterError

# The pipeline's figures and the notebooks outside its registry (the real-data pipelines,
# whose data the pipeline cannot download) alike.
NOTEBOOK_IDS = sorted(path.stem for path in (REPO / "notebooks").glob("*.ipynb"))


def figure_module(figure_id):
    return importlib.import_module("qkov.figures." + figure_id.replace("-", "_"))


def parameters_cell(figure_id) -> dict:
    """The names and values the notebook's ``parameters`` cell defines, in its order."""
    nb = nbformat.read(REPO / "notebooks" / f"{figure_id}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    namespace = {}
    exec(cell.source, namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


@pytest.mark.parametrize("figure_id", NOTEBOOK_IDS)
def test_the_notebook_declares_its_figure_modules_parameters_and_defaults(figure_id):
    declared = parameters_cell(figure_id)
    parameters = figure_module(figure_id).Parameters
    assert list(declared) == list(parameters.names())
    assert declared == parameters.defaults()


def test_every_registered_figure_has_a_notebook():
    assert set(pipeline.FIGURE_IDS) <= set(NOTEBOOK_IDS)


@pytest.mark.parametrize("figure_id", NOTEBOOK_IDS)
def test_an_unknown_name_fails_before_any_work(figure_id):
    namespace = {**parameters_cell(figure_id), "ratio_list": [1, 10]}  # a typo, say
    with pytest.raises(ParameterError, match="'ratio_list': unknown parameter"):
        figure_module(figure_id).Parameters.from_notebook(namespace)


@pytest.mark.parametrize("figure_id", NOTEBOOK_IDS)
def test_a_value_of_the_wrong_type_fails_naming_its_parameter(figure_id):
    parameters = figure_module(figure_id).Parameters
    for name in parameters.names():
        # Every field's check runs before the checks between fields and any file is read
        # (theory-rescaling reads paper-fig2's artifacts only once all fields passed).
        with pytest.raises(ParameterError, match=f"^parameter '{name}'"):
            parameters(**{**parameters.defaults(), name: object()})


def test_parameters_are_frozen_and_keep_what_was_given():
    from qkov.figures import paper_fig4

    p = paper_fig4.Parameters(ratios=[1, 10])
    assert p.ratios == [1.0, 10.0] and p.given["ratios"] == [1, 10]
    with pytest.raises(AttributeError):
        p.ratios = [2.0]
