"""The PDF of the whole book (built by ``book_html`` before the HTML, as ``make book`` does),
read back with poppler's pdftotext and pdfimages and compared with the HTML book."""

import re
import shutil
import subprocess
import unicodedata

import pytest
import yaml
from pybtex.database import parse_file
from test_book import SHOWN, TOC, plain, qkov_book

from conftest import REPO
from qkov.plotting import png_size


@pytest.fixture(scope="module")
def pdf(book_html):
    missing = [tool for tool in ("xelatex", "latexmk", "pdftotext", "pdfimages")
               if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no {', '.join(missing)}: `make tex` as root installs Debian's TeX and poppler")
    assert qkov_book.built_pdf(book_html).is_file(), "no PDF although TeX is installed"
    return qkov_book.built_pdf(book_html)


def flat(text: str) -> str:  # ligatures split, quotes straight, no whitespace or hyphens (hyphenated)
    text = unicodedata.normalize("NFKC", text).translate(str.maketrans("‘’“”", "''\"\""))
    return re.sub(r"[\s\-‐‑]+", "", text)


def test_every_page_links_the_pdf(book_html, pdf):
    pages = [p for p in book_html.rglob("*.html") if "btn-download-source-button" in p.read_text()]
    assert len(pages) == len(TOC)
    for page in pages:
        href = re.search(r'<a href="([^"]+)"[^>]*btn-download-book-pdf-button', page.read_text())
        assert href, f"{page.relative_to(book_html)}: no PDF in the download menu"
        target = page.parent / plain(href.group(1))
        assert target.read_bytes() == pdf.read_bytes(), f"{page}: {href.group(1)}"


def test_the_pdf_holds_the_book(book_html, pdf):
    """As the HTML book: the title, every page's title (in the contents and on the page), each
    figure's caption head, as many numbered equations, the bibliography; no "??"."""
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True,
                          text=True, check=True).stdout
    body = flat(text).casefold()
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert flat(config["title"]).casefold() in body
    titles = [plain(re.search(r"<h1>(.*?)</h1>", (book_html / f"{d}.html").read_text()).group(1))
              for d in TOC[1:]]  # each page's title, as the HTML book's header shows it
    absent = [t for t in titles if body.count(flat(t).casefold()) < 2]
    assert not absent, f"page titles missing from the PDF: {absent}"
    for label, figure in SHOWN.items():
        shown = (book_html / f"{figure.spec.page}.html").read_text()
        caption = re.search(rf'<figure[^>]*id="{label}".*?<figcaption>(.*?)</figcaption>',
                            shown, re.S).group(1)
        caption = plain(re.sub(r'<a class="headerlink".*?</a>', "", caption))
        head = re.split(r"\\\(|\$", caption)[0][:100].strip()
        assert len(head) > 40 and flat(head).casefold() in body, f"{label}: {head!r}"
    in_html = sum(p.read_text().count('class="eqno"') for p in book_html.rglob("*.html"))
    assert 0 < in_html <= len(set(re.findall(r"^\((\d+\.\d+)\)$", text, re.M)))
    assert "??" not in text, "LaTeX left a reference unresolved (??)"
    html_refs = flat(plain((book_html / "book" / "references.html").read_text())).casefold()
    titles = [flat(e.fields["title"].replace("{", "").replace("}", "")).casefold()
              for bib in config["bibtex_bibfiles"] for e in parse_file(REPO / bib).entries.values()]
    shown = [title for title in titles if title in html_refs]
    tail = flat(text[text.lower().rfind("bibliography"):]).casefold()
    assert shown and not [title for title in shown if title not in tail]


def test_every_image_of_the_html_book_is_in_the_pdf(book_html, pdf):
    """Each PNG the HTML book shows is an image of the PDF, of the same size in pixels."""
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True,
                             check=True).stdout.splitlines()[2:]
    in_pdf = {(int(row.split()[3]), int(row.split()[4])) for row in listing
              if row.split()[2] == "image"}
    shown = {p.name: png_size(p.read_bytes()[:24]) for p in (book_html / "_images").glob("*.png")}
    assert len(shown) >= len(SHOWN)
    assert not [name for name, size in shown.items() if tuple(size) not in in_pdf]
