"""The PDF of the whole book (built by ``book_html`` before the HTML, as ``make book`` does),
read back with poppler's pdftotext and pdfimages and compared with the HTML book."""

import json
import re
import shutil
import subprocess
import unicodedata

import pytest
import yaml
from pybtex.database import parse_file
from test_book import SHOWN, TOC, plain, qkov_book

from conftest import REPO, book_artifacts
from qkov.plotting import png_size

CONFIG = yaml.safe_load((REPO / "_config.yml").read_text())
# _toc.yml's parts: (numbered, their chapters, each with its sections)
PARTS = [(bool(part.get("numbered")), [(c["file"], [s["file"] for s in c.get("sections", [])])
                                       for c in part["chapters"]])
         for part in yaml.safe_load((REPO / "_toc.yml").read_text())["parts"]]
CHAPTERS = [TOC[0], *(chapter for _, chapters in PARTS for chapter, _ in chapters)]
NUMBERED = [k for k, (numbered, _) in enumerate(PARTS) if numbered]
# The parts before the first numbered one (the gallery: the web's index) are not in the PDF.
LEFT_OUT = [page for _, chapters in PARTS[:NUMBERED[0]] for c, sections in chapters
            for page in (c, *sections)]
MAIN_MATTER = PARTS[NUMBERED[0]][1][0][0]  # its first chapter
BACK_MATTER = [chapter for _, chapters in PARTS[NUMBERED[-1] + 1:] for chapter, _ in chapters]
BIBLIOGRAPHY = "book/references"  # the page of the {bibliography} directive


@pytest.fixture(scope="module")
def pdf(book_html):
    missing = [tool for tool in ("xelatex", "latexmk", "pdftotext", "pdfimages")
               if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no {', '.join(missing)}: `make tex` as root installs Debian's TeX and poppler")
    assert qkov_book.built_pdf(book_html).is_file(), "no PDF although TeX is installed"
    return qkov_book.built_pdf(book_html)


@pytest.fixture(scope="module")
def pages(pdf) -> list[str]:
    return subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True,
                          text=True, check=True).stdout.split("\f")


def h1(book_html, docname) -> tuple[str, str | None]:  # a page's title and chapter number
    page = (book_html / f"{docname}.html").read_text()
    number = re.search(r'<h1><span class="section-number">(\d+)\. </span>', page)
    return plain(re.search(r"<h1>(.*?)</h1>", page).group(1)), number and number.group(1)


def chapter_start(pages, title) -> tuple[int, str | None] | None:
    """The page a chapter starts on (the only pages without the running header), and its
    number in the PDF; None if no chapter has that title."""
    head = re.escape(flat(title).casefold())
    for k, page in enumerate(pages):
        if found := re.match(rf"(\d*){head}", flat(page).casefold()):
            return k, found.group(1) or None
    return None


def images(pdf) -> set[tuple[int, int]]:  # each image's size in pixels
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True,
                             check=True).stdout.splitlines()[2:]
    return {(int(row.split()[3]), int(row.split()[4])) for row in listing if row.split()[2] == "image"}


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


def test_the_pdf_holds_the_book(book_html, pdf, pages):
    """As the HTML book: the title, every page's title (in the contents and on the page) but
    the gallery's, each figure's caption head, the same numbered equations; no "??"."""
    text = "\f".join(pages)
    body = flat(text).casefold()
    assert flat(CONFIG["title"]).casefold() in body
    titles = [h1(book_html, d)[0] for d in TOC[1:] if d not in LEFT_OUT]
    absent = [t for t in titles if body.count(flat(t).casefold()) < 2]
    assert not absent, f"page titles missing from the PDF: {absent}"
    for label, figure in SHOWN.items():
        shown = (book_html / f"{figure.spec.page}.html").read_text()
        caption = re.search(rf'<figure[^>]*id="{label}".*?<figcaption>(.*?)</figcaption>',
                            shown, re.S).group(1)
        caption = plain(re.sub(r'<a class="headerlink".*?</a>', "", caption))
        head = re.split(r"\\\(|\$", caption)[0][:100].strip()
        assert len(head) > 40 and flat(head).casefold() in body, f"{label}: {head!r}"
    in_html = {number for page in book_html.rglob("*.html")
               for number in re.findall(r'class="eqno">\((\d+\.\d+)\)', page.read_text())}
    missing = in_html - set(re.findall(r"^\((\d+\.\d+)\)$", text, re.M))
    assert in_html and not missing, f"equation numbers of the HTML not in the PDF: {missing}"
    assert "??" not in text, "LaTeX left a reference unresolved (??)"


def test_chapters_are_numbered_as_in_the_html(book_html, pages):
    """The introduction is front matter and the last part back matter, unnumbered as in the
    HTML, so each chapter has the HTML's number (Fig. 2's is 1); the gallery is left out; the
    running footers name no part and no "Chapter 0"."""
    assert h1(book_html, "book/paper-fig2")[1] == "1"
    for docname in CHAPTERS:
        title, number = h1(book_html, docname)
        start = chapter_start(pages, title)
        if docname in LEFT_OUT:
            assert start is None, f"{docname}: in the PDF, which leaves the web's index out"
        else:
            assert start, f"{docname}: no chapter {title!r} in the PDF"
            assert start[1] == number, f"{docname}: chapter {start[1]} in the PDF, {number} in the HTML"
    # the running footer: the last two lines of a page, its number and its chapter or section
    footers = [flat("".join([line for line in page.splitlines() if line.strip()][-2:])).casefold()
               for page in pages]
    parts = [flat(part["caption"]).casefold()
             for part in yaml.safe_load((REPO / "_toc.yml").read_text())["parts"]]
    front = footers[:chapter_start(pages, h1(book_html, MAIN_MATTER)[0])[0]]
    assert not [footer for footer in front for part in parts if part in footer], front
    # the contents' later pages name it in their footer (on one side of the spread at least:
    # which page carries it depends on how many pages the contents take)
    assert any("contents" in footer for footer in front[chapter_start(pages, "Contents")[0] + 1:])
    assert not [footer for footer in footers if "chapter0" in footer]


def test_no_commit_hash_in_the_body(book_html, pages):
    """The commits that made the figures (in their summary.json) show in the back matter's
    figure records, not in the introduction or the chapters."""
    commits = {json.loads(path.read_text())["provenance"]["commit"] for figure in SHOWN.values()
               if (path := book_artifacts() / figure.spec.id / "summary.json").is_file()} - {None}
    start = chapter_start(pages, h1(book_html, TOC[0])[0])[0]
    end = chapter_start(pages, h1(book_html, BACK_MATTER[0])[0])[0]
    body, back = (flat("".join(part)).casefold() for part in (pages[start:end], pages[end:]))
    assert commits and all(commit[:12] in back for commit in commits)
    shown = [commit for commit in commits if commit[:7] in body]
    assert not shown, f"commits {shown} in the body of the PDF"


def test_one_bibliography(book_html, pages):
    """The References chapter lists every work of the HTML book's references page, labelled
    as the text cites them; the PDF has no other bibliography, in the contents or as a chapter."""
    contents = flat("".join(pages[:chapter_start(pages, h1(book_html, TOC[0])[0])[0]])).casefold()
    title = flat(h1(book_html, BIBLIOGRAPHY)[0]).casefold()
    assert contents.count(title) == 1 and "bibliography" not in contents
    assert chapter_start(pages, "Bibliography") is None
    start, _ = chapter_start(pages, h1(book_html, BIBLIOGRAPHY)[0])
    after = [chapter_start(pages, h1(book_html, d)[0]) for d in CHAPTERS[CHAPTERS.index(BIBLIOGRAPHY) + 1:]]
    chapter = "".join(pages[start:min([k for k, _ in after] + [len(pages)])])
    assert not re.search(r"\[[A-Z][A-Za-z]*\+?\d\d\]", chapter), "alpha labels ([AZ20]), not as cited"
    listed = flat(chapter).casefold()
    html_refs = flat(plain((book_html / f"{BIBLIOGRAPHY}.html").read_text())).casefold()
    titles = [flat(e.fields["title"].replace("{", "").replace("}", "")).casefold()
              for bib in CONFIG["bibtex_bibfiles"] for e in parse_file(REPO / bib).entries.values()]
    shown = [title for title in titles if title in html_refs]
    assert shown and not [title for title in shown if title not in listed]


def test_the_explorer_in_the_pdf(book_html, pdf, pages):
    """Where the HTML has the explorer, the PDF names its online page and shows small
    multiples drawn from the same grid (written beside the build's doctrees)."""
    start = chapter_start(pages, h1(book_html, "book/paper-fig4")[0])[0]
    chapter = flat("".join(pages[start:start + 8])).casefold()
    url = flat(qkov_book.citation(REPO)["url"].rstrip("/") + "/book/paper-fig4.html").casefold()
    assert url in chapter and flat("The explorer's dynamics at a glance").casefold() in chapter
    size = png_size((book_html.parent / "qkov-explorer" / "small-multiples.png").read_bytes()[:24])
    assert tuple(size) in images(pdf)


def test_every_image_of_the_html_book_is_in_the_pdf(book_html, pdf):
    """Each PNG the HTML book shows is an image of the PDF, of the same size in pixels."""
    in_pdf = images(pdf)
    shown = {p.name: png_size(p.read_bytes()[:24]) for p in (book_html / "_images").glob("*.png")}
    assert len(shown) >= len(SHOWN)
    assert not [name for name, size in shown.items() if tuple(size) not in in_pdf]
