"""The PDF of the whole book, read back with poppler's pdftotext and pdfimages.

The ``book_html`` fixture (conftest.py) builds it as ``make book`` does: LaTeX (xelatex,
Debian's TeX) first, then the HTML, whose every page's download menu links it
(book/_ext/qkov_pdf.py). What the PDF must hold is derived from the sources and from the
HTML book of the same build: every chapter's title (each _toc.yml file's first heading),
every figure's caption as the HTML book shows it, as many numbered equations as the HTML
book numbers, the bibliography's entries, an image per figure.
"""

import html as html_text
import json
import re
import shutil
import struct
import subprocess
import sys
import unicodedata

import pytest
import yaml
from test_book import FIGURES, plain, toc_docnames

from conftest import REPO

sys.path.insert(0, str(REPO / "book" / "_ext"))
import qkov_pdf  # noqa: E402  (the book's extension, as _config.yml loads it)

TEX = ("xelatex", "latexmk")
POPPLER = ("pdftotext", "pdfimages")


def missing(tools) -> list[str]:
    return [tool for tool in tools if shutil.which(tool) is None]


@pytest.fixture(scope="module")
def pdf(book_html):
    path = qkov_pdf.built_pdf(book_html)
    if not path.is_file():
        if missing(TEX):
            pytest.skip(f"no {', '.join(missing(TEX))}: the PDF needs Debian's TeX "
                        "(`make tex` as root installs it)")
        pytest.fail(f"{path} was not built although TeX is installed")
    if missing(POPPLER):
        pytest.skip(f"no {', '.join(missing(POPPLER))}: apt-get install poppler-utils")
    return path


def flat(text: str) -> str:
    """Text as compared: ligatures split, quotes straight, no whitespace and no hyphens (a
    line broken in the PDF hyphenates words the HTML does not)."""
    text = unicodedata.normalize("NFKC", text)
    text = text.translate(str.maketrans("‘’“”", "''\"\""))
    return re.sub(r"[\s\-‐‑]+", "", text)


@pytest.fixture(scope="module")
def text(pdf):
    result = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"],
                            capture_output=True, text=True, check=True)
    return result.stdout


def first_heading(docname: str) -> str:
    """The title of a page of _toc.yml: the first "# " heading of its Markdown file or of
    its notebook's Markdown cells."""
    md = REPO / f"{docname}.md"
    if md.is_file():
        lines = md.read_text().splitlines()
    else:
        cells = json.loads((REPO / f"{docname}.ipynb").read_text())["cells"]
        lines = [line for cell in cells if cell["cell_type"] == "markdown"
                 for line in "".join(cell["source"]).splitlines()]
    heading = next((line for line in lines if line.startswith("# ")), None)
    assert heading, f"{docname} has no '# ' heading"
    return heading[2:].strip()


def test_every_page_links_the_pdf(book_html, pdf):
    """Every page that has a download menu links the PDF, and the link opens it."""
    pages = [page for page in book_html.rglob("*.html")
             if "btn-download-source-button" in page.read_text()]
    assert len(pages) == len(toc_docnames())
    for page in pages:
        href = re.search(r'<a href="([^"]+)"[^>]*btn-download-book-pdf-button',
                         page.read_text())
        assert href, f"{page.relative_to(book_html)}: no PDF in the download menu"
        target = (page.parent / html_text.unescape(href.group(1))).resolve()
        assert target.read_bytes() == pdf.read_bytes(), f"{page}: {href.group(1)}"


def test_the_title_and_every_chapter_title(text):
    """The root page's title is the book's (the title page); every other page of _toc.yml
    is a chapter or section of the PDF: its title is in the table of contents and on the
    page (chapter titles in capitals)."""
    body = flat(text).casefold()
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert flat(config["title"]).casefold() in body
    absent = [title for title in map(first_heading, toc_docnames()[1:])
              if body.count(flat(title).casefold()) < 2]
    assert not absent, f"chapter titles missing from the PDF: {absent}"


def html_caption(book_html, label: str, page: str) -> str:
    """The head of a figure's caption as the HTML book shows it: without its number (the
    PDF's numbers are LaTeX's), its first 100 characters up to any formula (typeset
    differently)."""
    figure = re.search(rf'<figure[^>]*id="{label}"[^>]*>(.*?)</figure>',
                       (book_html / page).read_text(), re.S).group(1)
    caption = re.search(r"<figcaption>(.*?)</figcaption>", figure, re.S).group(1)
    caption = re.sub(r'<span class="caption-number">.*?</span>|<a class="headerlink".*?</a>',
                     "", caption, flags=re.S)
    return re.split(r"\\\(|\$", plain(caption))[0][:100].strip()


@pytest.mark.parametrize("label, page", FIGURES.items())
def test_every_figure_caption(book_html, text, label, page):
    caption = html_caption(book_html, label, page)
    assert len(caption) > 40, f"{label}: caption {caption!r} too short to compare"
    assert flat(caption) in flat(text), f"the PDF lacks {label}'s caption {caption!r}"


def test_equations_are_numbered(book_html, text):
    """As many numbered equations ("(7.1)", on a line of their own) as the HTML book."""
    in_html = sum(page.read_text().count('class="eqno"') for page in book_html.rglob("*.html"))
    in_pdf = set(re.findall(r"^\((\d+\.\d+)\)$", text, re.M))
    assert in_html > 0
    assert len(in_pdf) >= in_html, f"{len(in_pdf)} equation numbers in the PDF, {in_html} in HTML"


def test_no_unresolved_reference(text):
    assert "??" not in text, "LaTeX left a reference unresolved (??)"


def test_bibliography(book_html, text):
    """Every entry of the HTML book's bibliography (book/references) is in the PDF's, after
    its last "Bibliography" heading (titles compared without case: the style changes it)."""
    from pybtex.database import parse_file

    config = yaml.safe_load((REPO / "_config.yml").read_text())
    titles = [entry.fields["title"].replace("{", "").replace("}", "")
              for bibfile in config["bibtex_bibfiles"]
              for entry in parse_file(REPO / bibfile).entries.values()]
    html_refs = flat(plain((book_html / "book" / "references.html").read_text())).casefold()
    shown = [title for title in titles if flat(title).casefold() in html_refs]
    assert shown, "the HTML book's bibliography shows no entry of the .bib files"
    start = text.lower().rfind("bibliography")
    assert start >= 0, "the PDF has no bibliography"
    tail = flat(text[start:]).casefold()
    absent = [title for title in shown if flat(title).casefold() not in tail]
    assert not absent, f"entries missing from the PDF's bibliography: {absent}"


def png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_every_image_of_the_html_book_is_in_the_pdf(book_html, pdf):
    """Each PNG the HTML book shows (the figures, other plots, the gallery's thumbnails) is
    an image of the PDF, of the same size in pixels."""
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True,
                             text=True, check=True).stdout.splitlines()[2:]
    in_pdf = {(int(row.split()[3]), int(row.split()[4])) for row in listing
              if row.split()[2] == "image"}
    shown = {path.name: png_size(path) for path in (book_html / "_images").glob("*.png")}
    assert len(shown) >= len(FIGURES)
    absent = [name for name, size in shown.items() if size not in in_pdf]
    assert not absent, f"images of the HTML book missing from the PDF: {absent}"
