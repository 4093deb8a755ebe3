"""Every figure's spec and typed parameters. A figure is one module of ``qkov.figures``
with a ``SPEC`` and one notebook, nothing more: specs and notebooks match one to one, the
book lists each notebook and page, a malformed spec fails naming what is wrong, and
``publish`` writes only what the spec declares. The notebook's parameters cell declares
exactly the module's ``Parameters`` with the same defaults, and a wrong name or a wrong type
fails before any work with a message naming the parameter."""

import nbformat
import pytest

from conftest import REPO
from qkov import figures
from qkov.checks import ParameterError
from qkov.spec import Drawing, FigureSpec
from qkov_tools.notebooks import parameters_source

NOTEBOOK_IDS = sorted(path.stem for path in (REPO / "notebooks").glob("*.ipynb"))
figure_module = figures.module


def parameters_cell(figure_id) -> dict:
    """The names and values the notebook's ``parameters`` cell defines, in its order."""
    nb = nbformat.read(REPO / "notebooks" / f"{figure_id}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    namespace = {}
    exec(cell.source, namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


@pytest.mark.parametrize("figure_id", NOTEBOOK_IDS)
def test_the_notebooks_parameters_cell_is_generated_from_its_figures_parameters(figure_id):
    """Parameters is the one source of the defaults: the cell is its generated form
    (`python -m qkov_tools parameters-cell notebooks/*.ipynb` makes it current)."""
    nb = nbformat.read(REPO / "notebooks" / f"{figure_id}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    parameters = figure_module(figure_id).Parameters
    assert cell.source == parameters_source(parameters), \
        f"{figure_id}: run python -m qkov_tools parameters-cell notebooks/{figure_id}.ipynb"
    declared = parameters_cell(figure_id)  # what the generated cell defines, when run
    assert list(declared) == list(parameters.names())
    assert declared == parameters.defaults()


def test_specs_and_notebooks_match_one_to_one_and_the_book_shows_each():
    specs = figures.specs()
    assert sorted(specs) == NOTEBOOK_IDS
    toc = (REPO / "_toc.yml").read_text()
    for spec in specs.values():
        assert f"file: {spec.notebook[:-len('.ipynb')]}\n" in toc, spec.id
        assert (f"file: {spec.page}\n" in toc or f"root: {spec.page}\n" in toc) \
            and (REPO / f"{spec.page}.md").is_file(), spec.id
        assert figure_module(spec.id).SPEC is spec
    # The real-data figures need a dataset the reader downloads; `make figures` skips them.
    assert {s.id for s in specs.values() if s.needs_dataset} == {
        "language-hatexplain", "language-sva", "language-squad"}
    # What one figure reads, another writes.
    for spec in specs.values():
        for read in spec.reads:
            other, name = read.split("/")
            assert name in specs[other].files, (spec.id, read)


def test_every_figure_module_has_what_publish_and_the_spec_rely_on():
    for spec in figures.specs().values():
        names = figure_module(spec.id).Parameters.names()
        assert "artifacts_dir" in names, spec.id  # publish writes there
        assert (spec.dtype is None) == ("dtype" in names), spec.id  # who says the dtype


@pytest.mark.parametrize("field, value, message", [
    ("id", "Paper_Fig2", "id: expected lower-case words"),
    ("tables", ("heatmaps.txt",), "tables: expected file names ending in .csv"),
    ("tables", ("data.csv",), "tables: expected file names ending in .csv other than"),
    ("reads", ("paper-fig9",), "reads: expected '<other-figure-id>/<file>'"),
    ("reads", ("my-fig/data.csv",), "reads: expected '<other-figure-id>/<file>'"),
    ("threads", 0, "threads: expected an integer >= 1"),
    ("resources", {"gpus": 1}, "resources: expected positive integers"),
    ("resources", {"mem_mb": -1}, "resources: expected positive integers"),
    ("dtype", "float16", "dtype: expected one of"),
    ("extra_drawings", (Drawing("a", None), Drawing("a", None)), "extra_drawings: expected distinct"),
])
def test_a_malformed_spec_fails_naming_the_field(field, value, message):
    spec = {"id": "my-fig", "reproduces": None, "page": "book/x", field: value}
    with pytest.raises(ValueError, match=f"^FigureSpec {spec['id']!r}: {message}"):
        FigureSpec(**spec)


def test_a_spec_names_every_file_its_figure_writes():
    spec = FigureSpec("my-fig", "paper Fig. 9", "book/x", tables=("curves.csv",),
                      extra_drawings=(Drawing("std", None),), reads=("paper-fig2/a.csv",))
    assert spec.outputs() == [f"artifacts/my-fig/{name}" for name in (
        "figure.png", "figure.pdf", "figure.svg", "figure-std.png", "figure-std.pdf",
        "figure-std.svg", "curves.csv", "data.csv", "summary.json")]
    assert spec.inputs() == ["artifacts/paper-fig2/a.csv"]
    assert [spec.label(d) for d in spec.drawings] == ["my-fig", "my-fig-std"]
    assert [d.reproduces for d in spec.drawings] == ["paper Fig. 9", None]
    assert spec.module == "my_fig" and spec.notebook == "notebooks/my-fig.ipynb"


def test_a_figure_module_without_a_spec_is_named(tmp_path, monkeypatch):
    (tmp_path / "stray_fig.py").write_text("X = 1\n")
    monkeypatch.setattr(figures, "__path__", [*figures.__path__, str(tmp_path)])
    with pytest.raises(TypeError, match="stray_fig.py: a figure module must declare SPEC"):
        figures.specs()
    (tmp_path / "stray_fig.py").unlink()
    (tmp_path / "odd_fig.py").write_text(
        "from qkov.spec import FigureSpec\nSPEC = FigureSpec('even-fig', None, 'book/x')\n")
    with pytest.raises(ValueError, match="odd_fig.py: SPEC.id 'even-fig' does not name"):
        figures.specs()


def test_publish_writes_only_what_the_spec_declares(tmp_path):
    from types import SimpleNamespace

    from qkov import plotting

    spec = figures.specs()["paper-fig4"]
    p = SimpleNamespace(artifacts_dir=str(tmp_path / "out"))
    fig = plotting.new_figure()
    for drawings, tables, wrong in (({"figure": fig, "figure-extra": fig}, None, "drawings"),
                                    ({"figure": fig}, {"curves.csv": [{"a": 1}]}, "tables")):
        with pytest.raises(ValueError, match=f"publish\\('paper-fig4'\\): {wrong}: its SPEC"):
            plotting.publish(spec, p, [{"a": 1}], 0.0, drawings, tables)
    assert not (tmp_path / "out").exists()  # nothing half-written


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


def test_every_drawing_has_alt_text_and_publish_refuses_one_without(tmp_path):
    from types import SimpleNamespace

    from qkov import plotting

    for spec in figures.specs().values():
        for drawing in spec.drawings:
            # a sentence or more saying what it shows, for the book's <img alt>
            assert len(drawing.alt.split()) >= 8 and drawing.alt.endswith("."), spec.label(drawing)
    spec = FigureSpec("my-fig", None, "book/x")
    assert [d.alt for d in spec.drawings] == [""]
    with pytest.raises(ValueError, match="publish\\('my-fig'\\): drawing 'figure': its SPEC gives "
                                         "no alt text"):
        plotting.publish(spec, SimpleNamespace(artifacts_dir=str(tmp_path / "out")), [{"a": 1}],
                         0.0, {"figure": plotting.new_figure()})
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="alt: expected a sentence"):
        FigureSpec("my-fig", None, "book/x", extra_drawings=(Drawing("std", None, alt=None),))
