"""The model schematic (qkov.figures.model_schematic): its table of the four classes names the
matrices the models really train, and its drawing shows each class in its colour, reads at
the book's width and has no text over another text or across a box's edge."""

import itertools

import pytest
import torch
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Text

from qkov import plotting
from qkov.circuits import PARAMETERIZATIONS
from qkov.figures import model_schematic
from qkov.synthetic.models import ModelConfig, init_parameters


@pytest.fixture(scope="module")
def drawn():
    """The figure drawn once, with every text's and box's extent in display pixels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = model_schematic.plot(model_schematic.rows())
    renderer = FigureCanvasAgg(fig).get_renderer()
    with plotting.house_style():
        fig.draw(renderer)
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        boxes = [p.get_window_extent(renderer) for p in fig.findobj(FancyBboxPatch)]
        extents = {t: t.get_window_extent(renderer) for t in texts}
    return fig, extents, boxes


def test_the_table_names_the_matrices_each_class_trains():
    rows = model_schematic.rows()
    assert [row["class"] for row in rows] == list(PARAMETERIZATIONS)
    for row in rows:
        trained = init_parameters(ModelConfig(row["class"]), torch.Generator().manual_seed(0))
        assert set(row["matrices"].split(", ")) == set(trained) - {"b"}, row
        kinds = {"QK": row["QK circuit"], "OV": row["OV circuit"]}
        # the name's first letter is the QK circuit's, its third the OV circuit's
        assert [row["class"][k] for k in (0, 2)] == [kinds[c][0].upper() for c in ("QK", "OV")]


def test_each_class_is_drawn_in_its_colour_with_its_matrices(drawn):
    from matplotlib.colors import same_color

    _, extents, _ = drawn
    by_text = {t.get_text(): t for t in extents}
    for row in model_schematic.rows():
        label = by_text[row["class"]]
        assert same_color(label.get_color(), plotting.PARAMETERIZATION_COLORS[row["class"]])
        matrices = ", ".join(f"${model_schematic._tex(m)}$" for m in row["matrices"].split(", "))
        assert matrices in by_text, row
    assert r"learning rate $\eta_{QK} = r\,\eta_{OV}$" in by_text  # r on the QK circuit


def test_the_drawing_reads_at_the_books_width():
    _, sizes = plotting.render_png(model_schematic.plot(model_schematic.rows()))
    assert plotting.check_text_size("model-schematic", sizes) >= plotting.MIN_TEXT_PT


def test_no_text_overlaps_another_or_crosses_a_box(drawn):
    fig, extents, boxes = drawn
    page = fig.bbox
    for text, extent in extents.items():
        assert page.contains(extent.x0, extent.y0) and page.contains(extent.x1, extent.y1), \
            f"{text.get_text()!r} leaves the figure"
        for box in boxes:  # wholly inside a box or wholly outside it
            inside = box.contains(extent.x0, extent.y0) and box.contains(extent.x1, extent.y1)
            assert inside or not box.overlaps(extent), f"{text.get_text()!r} crosses a box edge"
    for (a, ea), (b, eb) in itertools.combinations(extents.items(), 2):
        assert not ea.overlaps(eb), f"{a.get_text()!r} overlaps {b.get_text()!r}"
