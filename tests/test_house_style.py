"""One house style: every colour of an ordered line reads on white, and every figure's
categorical colours too (WCAG's 3:1 for graphics); every heatmap takes one colour map."""

import re
from pathlib import Path

import pytest

from qkov import plotting
from qkov.language import comparison, pipelines


@pytest.mark.parametrize("n", [1, 2, 5, 9, 30])
def test_every_sequential_colour_has_contrast_with_white(n):
    colors = plotting.sequential_colors(range(n))
    assert len({tuple(c) for c in colors}) == n  # distinct, dark (smallest) to light
    assert [plotting.contrast_with_white(c) for c in colors] == sorted(
        (plotting.contrast_with_white(c) for c in colors), reverse=True)
    assert min(plotting.contrast_with_white(c) for c in colors) >= 3.0
    assert plotting.contrast_with_white(plotting.SEQUENTIAL_CMAP(1.0)) >= 3.0  # its light end


def test_the_contrast_is_wcags():
    assert plotting.contrast_with_white("black") == pytest.approx(21)
    assert plotting.contrast_with_white("white") == pytest.approx(1)
    assert plotting.contrast_with_white("#767676") == pytest.approx(4.54, abs=0.01)


@pytest.mark.parametrize("palette", [comparison.COLORS, pipelines.CONDITION_COLORS,
                                     plotting.PARAMETERIZATION_COLORS], ids=str)
def test_condition_colours_read_on_white(palette):
    assert min(map(plotting.contrast_with_white, palette.values())) >= 3.0


def test_every_heatmap_takes_the_house_colour_map():
    library = Path(plotting.__file__).parent
    named = [p.name for p in library.rglob("*.py") if re.search(r"cmap=[\"']", p.read_text())]
    assert named == [], "use plotting.HEATMAP_CMAP"
