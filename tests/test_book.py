"""A strict build of the book from the stored notebooks, checked as a reader would see it.

The build runs into a temporary folder (the real _build/ is left alone) with -W -n
--keep-going: any warning fails. Headless Chromium then renders pages with every host name
unresolvable, proving that math renders and figures show without network access.
"""

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import REPO

FIGURES = {"paper-fig2": "notebooks/paper-fig2.html",
           "paper-fig2-std": "notebooks/paper-fig2.html",
           "paper-fig2-trajectories": "notebooks/paper-fig2.html",
           "paper-fig3": "notebooks/paper-fig3.html",
           "paper-fig4": "notebooks/paper-fig4.html",
           "theory-reduction": "notebooks/theory-reduction.html",
           "theory-rescaling": "notebooks/theory-rescaling.html",
           "theory-ratio-sweep": "notebooks/theory-ratio-sweep.html",
           "language-agreement": "notebooks/language-agreement.html"}
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # no other host can be reached
    "--virtual-time-budget=20000",
]


@pytest.fixture(scope="module")
def html(tmp_path_factory, run_tool):
    out = tmp_path_factory.mktemp("book")
    result = run_tool("jupyter-book", "build", REPO, "--path-output", out, "-W", "-n",
                      "--keep-going", check=False)
    assert result.returncode == 0, f"strict book build failed:\n{result.stdout[-5000:]}"
    return out / "_build" / "html"


class Loads(HTMLParser):
    """What a page loads by itself: scripts, stylesheets, images, fonts, frames."""

    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img", "iframe", "source") and attrs.get("src"):
            self.urls.append(attrs["src"])
        if tag == "link" and attrs.get("href") and attrs.get("rel") in (
                "stylesheet", "preload", "icon", "modulepreload"):
            self.urls.append(attrs["href"])


def test_pages_load_nothing_from_other_hosts(html):
    pages = sorted(p for p in html.rglob("*.html") if "_static" not in p.parts)
    assert len(pages) >= 6
    for page in pages:
        parser = Loads()
        parser.feed(page.read_text())
        remote = [u for u in parser.urls if re.match(r"^(https?:)?//", u)]
        assert not remote, f"{page.relative_to(html)} loads {remote}"
        for url in parser.urls:
            local = (page.parent / url.split("?")[0].split("#")[0]).resolve()
            assert local.exists(), f"{page.relative_to(html)} loads missing {url}"
    assert (html / "_static" / "mathjax" / "tex-svg-full.js").is_file()


@pytest.mark.parametrize("figure_id, page", FIGURES.items())
def test_figures_have_label_number_and_caption(html, figure_id, page):
    text = (html / page).read_text()
    match = re.search(rf'<figure[^>]*id="{figure_id}"[^>]*>(.*?)</figure>', text, re.S)
    assert match, f"no figure labelled {figure_id} on {page}"
    figure = match.group(1)
    assert re.search(r"Fig\. \d+(\.\d+)*", figure), "the figure has no number"
    assert re.search(r"paper Fig\. \d", figure), "the caption must name the paper figure"
    if figure_id.startswith(("theory-", "language-")):
        assert "companion" in figure, "a theory figure must say it is the companion's work"
    src = re.search(r'<img[^>]*src="([^"]+)"', figure).group(1)
    assert (html / page).parent.joinpath(src).resolve().stat().st_size > 10_000


@pytest.mark.parametrize("chapter, figure_id", [
    ("paper-fig4", "paper-fig4"), ("theory", "theory-reduction"), ("theory", "theory-rescaling"),
    ("theory", "theory-ratio-sweep"), ("language", "language-agreement")])
def test_chapter_cites_the_figure_by_number(html, chapter, figure_id):
    text = (html / "book" / f"{chapter}.html").read_text()
    assert re.search(rf'href="../notebooks/{figure_id}.html#{figure_id}"[^>]*>.*?Fig\. \d',
                     text, re.S)


def test_bibliography_and_citation_page(html):
    refs = (html / "book" / "references.html").read_text()
    assert "Faster Query-Key Learning Sharpens Attention" in refs
    assert "Vashisht" in (html / "book" / "intro.html").read_text()


def chromium():
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Debian's chromium is needed for the browser checks: "
                    "apt-get install chromium (`make test` installs it when run as root)")
    return path


def rendered_dom(page: Path, tmp_path: Path) -> str:
    result = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.parametrize("chapter", ["paper-fig4", "theory"])
def test_math_renders_offline_in_a_browser(html, tmp_path, chapter):
    page = html / "book" / f"{chapter}.html"
    static = page.read_text()
    expected = len(re.findall(r'class="math[ "]', static))
    assert expected >= 10
    dom = rendered_dom(page, tmp_path)
    typeset = len(re.findall(r'<mjx-container[^>]*jax="SVG"', dom))
    assert typeset >= expected, f"only {typeset} of {expected} formulas were typeset"
    assert '<g data-mml-node="merror"' not in dom, "MathJax reported a TeX error"


def test_figure_page_renders_in_a_browser(html, tmp_path):
    dom = rendered_dom(html / FIGURES["paper-fig4"], tmp_path)
    assert 'id="paper-fig4"' in dom and "<mjx-container" in dom


def test_reproducibility_page_shows_the_measured_records(html):
    """The timings and speed-ups on the page are the JSON records', rendered at build time."""
    import json

    from qkov import book

    text = (html / "book" / "reproduce.html").read_text()
    for kind, rows_of in book.RECORD_KINDS.items():
        record = json.loads((book.RECORDS / f"{kind}.json").read_text())
        _, rows, note = rows_of(record)
        for row in rows:
            for cell in row:
                assert cell.replace("&", "&amp;") in text, (kind, cell)
        assert record["date"] in text


def test_a_malformed_record_is_named():
    from qkov import book

    with pytest.raises(KeyError):
        book.trainer_speed_rows({"date": "2026-01-01"})
    record = {"date": "d", "machine": "m", "total_wall_time_s": 1.0,
              "figures": {"paper-fig4": {"wall_time_s": 2.0, "commit": "abcdef0123456"}}}
    _, rows, _ = book.figures_run_rows(record)
    assert rows == [["paper-fig4", "2 s", "abcdef0123"], ["make figures, from scratch", "1 s", ""]]
    with pytest.raises(KeyError):
        book.test_run_rows({"date": "d", "machine": "m"})
