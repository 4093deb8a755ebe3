"""A figure is one module with a SPEC and one notebook whose parameters cell is generated from
its Parameters (papermill's --help-notebook lists them all); publish writes only the spec's."""

from types import SimpleNamespace

import nbformat
import papermill
import pytest

from conftest import REPO
from qkov import figures, plotting
from qkov.checks import ParameterError
from qkov.spec import Drawing, FigureSpec
from qkov_tools.notebooks import parameters_source

SPECS = figures.specs()


@pytest.mark.parametrize("figure_id", SPECS)
def test_the_parameters_cell_is_generated_and_papermill_reads_every_parameter(figure_id):
    notebook = REPO / SPECS[figure_id].notebook
    cell = next(c for c in nbformat.read(notebook, as_version=4).cells
                if "parameters" in c.metadata.get("tags", []))
    Parameters = figures.module(figure_id).Parameters
    assert cell.source == parameters_source(Parameters), \
        f"run python -m qkov_tools cells {notebook}"
    namespace = {}
    exec(cell.source, namespace)
    assert {k: v for k, v in namespace.items() if k[0] != "_"} == Parameters.defaults()
    # papermill skips a line with two "=" (one in a comment): --help-notebook missed it
    assert list(papermill.inspect_notebook(str(notebook))) == list(Parameters.names())


@pytest.mark.parametrize("figure_id", SPECS)
def test_an_unknown_name_or_a_wrong_type_fails_before_any_work_naming_it(figure_id):
    Parameters = figures.module(figure_id).Parameters
    with pytest.raises(ParameterError, match="'ratio_list': unknown parameter"):
        Parameters.from_notebook({**Parameters.defaults(), "ratio_list": [1, 10]})
    for name in Parameters.names():  # each field's check, before any file is read
        with pytest.raises(ParameterError, match=f"^parameter '{name}'"):
            Parameters(**{**Parameters.defaults(), name: object()})


def test_specs_and_notebooks_match_one_to_one_and_the_book_shows_each():
    assert sorted(SPECS) == sorted(path.stem for path in (REPO / "notebooks").glob("*.ipynb"))
    toc = (REPO / "_toc.yml").read_text()
    for spec in SPECS.values():
        assert f"file: {spec.notebook.removesuffix('.ipynb')}\n" in toc, spec.id
        assert f"file: {spec.page}\n" in toc or f"root: {spec.page}\n" in toc, spec.id
        assert (spec.dtype is None) == ("dtype" in figures.module(spec.id).Parameters.names())
        for read in spec.reads:  # what one figure reads, another writes
            other, name = read.split("/")
            assert name in SPECS[other].files, (spec.id, read)
        for drawing in spec.drawings:  # the book's <img alt>: a sentence or more
            assert len(drawing.alt.split()) >= 8 and drawing.alt.endswith("."), spec.id


@pytest.mark.parametrize("field, value", [
    ("id", "Paper_Fig2"), ("tables", ("data.csv",)), ("tables", ("heatmaps.txt",)),
    ("reads", ("my-fig/data.csv",)), ("resources", {"gpus": 1}),
    ("dtype", "float16"), ("extra_drawings", (Drawing("a", None), Drawing("a", None))),
    ("threads", 0)])
def test_a_malformed_spec_fails_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"^FigureSpec '.*': {field}: expected"):
        FigureSpec(**{"id": "my-fig", "reproduces": None, "page": "book/x", field: value})


def test_publish_writes_only_what_the_spec_declares(tmp_path):
    p, fig4 = SimpleNamespace(artifacts_dir=str(tmp_path / "out")), SPECS["paper-fig4"]
    fig = plotting.new_figure()
    for spec, drawings, tables, wrong in (
            (fig4, {"figure": fig, "figure-extra": fig}, None, "drawings: its SPEC declares"),
            (fig4, {"figure": fig}, {"curves.csv": [{"a": 1}]}, "tables: its SPEC declares"),
            (FigureSpec("my-fig", None, "book/x"), {"figure": fig}, None,
             "drawing 'figure': its SPEC gives no alt text")):
        with pytest.raises(ValueError, match=f"^publish\\('{spec.id}'\\): {wrong}"):
            plotting.publish(spec, p, [{"a": 1}], 0.0, drawings, tables)
    assert not (tmp_path / "out").exists()  # nothing half-written
