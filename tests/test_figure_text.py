"""Every figure reads at the book's width (no text below ``plotting.MIN_TEXT_PT`` at
``BOOK_WIDTH_PX``, no two texts overlapping): ``publish`` refuses a drawing that fails wherever a
figure is published (nbval, test_language_pipelines); here: the measure and the refusal."""

import pytest

from qkov import plotting


def figure(width=7.0, **title):
    with plotting.house_style():
        fig = plotting.new_figure(figsize=(width, 3))
        fig.subplots().set_title("title", **title)
    return fig


def test_a_figure_with_small_text_is_refused_naming_the_text(tmp_path):
    fig = figure()
    fig.axes[0].text(0.5, 0.5, "tiny cell label", fontsize=5)
    with pytest.raises(ValueError, match=r"^tiny-fig/figure: the text 'tiny cell label' shows "
                                         r"at 5\.\d pt .* below the minimum of 9 pt"):
        plotting.save_figure(fig, tmp_path / "tiny-fig")
    assert not any((tmp_path / "tiny-fig").glob("*"))


def test_the_measure_scales_with_the_width_the_book_shows():
    for dpi in (100, 200):  # a 7-inch figure shows its fonts at their size, whatever the dpi
        assert 9 < dict(plotting.render_png(figure(fontsize=10), dpi)[1])["title"] < 11
    _, sizes = plotting.render_png(figure(14.0, fontsize=10))
    assert dict(sizes)["title"] < 5.5  # twice as wide: half the size
    fig = figure()
    fig.axes[0].tick_params(labelsize=4)
    fig.axes[0].axis("off")  # text an axis turned off does not draw is not measured
    assert [text for text, _ in plotting.render_png(fig)[1]] == ["title"]


def test_overlapping_texts_are_refused_naming_them(tmp_path):
    with plotting.house_style():
        fig = plotting.new_figure(figsize=(6, 3))
        left, right = fig.subplots(1, 2)
        left.set_title("a title far too long for its panel, running on")
        right.set_title("the next title")
    with pytest.raises(ValueError, match="^crowded/figure: 1 pairs of texts overlap: "
                                         "'a title far too long .*' and 'the next title'"):
        plotting.save_figure(fig, tmp_path / "crowded")
    right.set_title("", loc="left")  # the house style's titles are on the left
    assert plotting.render(fig, dpi=72).overlaps == []
