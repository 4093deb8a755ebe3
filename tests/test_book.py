"""A strict build of the book from the stored notebooks, checked as a reader would see it.

The build runs into a temporary folder (the real _build/ is left alone) with -W -n
--keep-going: any warning fails. Headless Chromium then renders pages with every host name
unresolvable, proving that math renders and figures show without network access.
"""

import json
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
def html(book_html):
    return book_html


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


# --- every figure: label, headline, downloads, regenerate command, provenance, citation ---

def _page_of(html: Path, label: str) -> Path:
    pages = [p for p in html.rglob("*.html") if re.search(
        rf'<figure[^>]*id="{re.escape(label)}"', p.read_text())]
    assert len(pages) == 1, f"figure {label} is shown on {len(pages)} pages, expected one"
    return pages[0]


def _info_block(text: str, label: str) -> str:
    """The HTML of figure ``label``'s info block (its <div> and everything nested in it)."""
    start = text.find(f'<div class="qkov-figure-info docutils container" id="{label}-info">')
    assert start >= 0, f"figure {label} has no info block"
    depth = 0
    for tag in re.finditer(r"<(/?)div\b", text[start:]):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            return text[start:start + tag.end()]
    raise AssertionError(f"the info block of {label} is not closed")


def test_every_registered_figure_has_the_same_block(html):
    """Whatever figure the registry has, now or added later, the book shows it once with
    its headline and the block: downloads that exist, commands, provenance, citation."""
    from conftest import book_artifacts
    from qkov import book

    for label, figure in book.book_figures().items():
        page = _page_of(html, label)
        name = page.relative_to(html).as_posix()
        text = page.read_text()
        caption = re.search(rf'<figure[^>]*id="{label}".*?</figure>', text, re.S).group(0)
        assert figure.headline.replace("'", "&#8217;") in caption.replace("’", "&#8217;"), \
            f"{name}: the caption of {label} does not start with its id and paper figure"
        assert re.search(r'<a class="qkov-full-size[^"]*" href="[^"]+\.svg"><img', caption), \
            f"{name}: clicking figure {label} does not open its SVG"
        block = _info_block(text, label)
        links = dict((t, h) for h, t in re.findall(
            r'<a class="reference download internal" download="" href="([^"]+)">'
            r'<code[^>]*><span class="pre">([^<]+)</span>', block))
        expected = [t for t, _ in figure.downloads(REPO)]
        assert list(links) == expected, f"{name}: downloads of {label}: {list(links)}"
        for text_, href in links.items():
            target = (page.parent / href).resolve()
            assert target.is_file() and target.stat().st_size > 0, \
                f"{name}: download {text_} of {label} ({href}) is missing from the build"
        summary = json.loads((book_artifacts() / figure.job.figure_id / "summary.json").read_text())
        plain = re.sub(r"<[^>]+>", "", block).replace("&quot;", '"').replace("&#39;", "'")
        assert book.papermill_command(figure, summary["parameters"]) in plain, name
        assert f"snakemake --cores 2 {figure.job.rule}" in plain, name
        assert f"commit {summary['provenance']['commit'][:12]}" in plain, name
        assert f"wall time {summary['provenance']['wall_time_s']:.1f} s" in plain, name
        assert "@inproceedings{vashisht26a" in plain, name
        assert f"@misc{{qkov-{label}," in plain, name
        assert f"{book.citation()['url']}{name}#{label}" in plain, \
            f"{name}: the citation of {label} does not carry its anchor URL"


def test_the_regenerate_command_gives_back_the_parameters():
    import shlex

    import yaml

    from qkov import book

    figure = book.book_figures()["paper-fig4"]
    params = {"m": 5, "b": 50.0, "name": "a b", "ratios": [0.1, 1], "flag": True,
              "seed": None, "artifacts_dir": None}
    words = shlex.split(book.papermill_command(figure, params))
    assert words[:3] == ["papermill", "notebooks/paper-fig4.ipynb", "paper-fig4-run.ipynb"]
    given = {}
    rest = words[3:]
    while rest:
        flag, *rest = rest
        if flag == "-p":
            key, value, *rest = rest
            given[key] = yaml.safe_load(value) if key != "name" else value
        else:
            value, *rest = rest
            given.update(yaml.safe_load(value))
    assert given == {k: v for k, v in params.items() if k != "artifacts_dir"}


def test_a_missing_data_file_or_broken_reference_fails_the_build_naming_the_page(
        tmp_path, run_tool):
    """On a copy of the book's sources and of the figures' files: one data file removed and
    one cross-reference broken; the strict build fails and names both pages."""
    from conftest import book_artifacts

    root = tmp_path / "artifacts"
    shutil.copytree(book_artifacts(), root)
    (root / "paper-fig4" / "data.csv").unlink()
    source = tmp_path / "source"
    source.mkdir()
    for name in ("_config.yml", "_toc.yml", "CITATION.cff"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "book", source / "book")
    shutil.copytree(REPO / "notebooks", source / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    chapter = source / "book" / "theory.md"
    assert "{numref}`theory-reduction`" in chapter.read_text()
    chapter.write_text(chapter.read_text().replace("{numref}`theory-reduction`",
                                                   "{numref}`theory-reductoin`", 1))
    result = run_tool("jupyter-book", "build", source, "--path-output", tmp_path / "out",
                      "-W", "-n", "--keep-going", check=False,
                      env={"QKOV_ARTIFACTS": str(root)})
    assert result.returncode != 0
    log = result.stdout + result.stderr
    assert re.search(r"notebooks/paper-fig4\.ipynb:\d*: WARNING: figure paper-fig4: \S*"
                     r"paper-fig4/data\.csv is missing", log), log[-3000:]
    assert re.search(r"book/gallery\.md:\d*: WARNING: figure paper-fig4: \S*"
                     r"paper-fig4/data\.csv is missing", log), log[-3000:]
    assert re.search(r"book/theory\.md:\d+: WARNING: .*theory-reductoin", log), log[-3000:]


def test_gallery_shows_every_figure(html):
    from qkov import book

    text = (html / "book" / "gallery.html").read_text()
    for label, figure in book.book_figures().items():
        entry = re.search(rf'id="gallery-{label}">(.*?)</div>\s*(?=<div class="qkov-gallery-item|</div>)',
                          text, re.S)
        assert entry, f"book/gallery.html has no entry for {label}"
        entry = entry.group(1)
        src = re.search(r'<img[^>]*src="([^"]+)"', entry).group(1)
        assert (html / "book" / src).resolve().stat().st_size > 10_000, label
        page = _page_of(html, label).relative_to(html).as_posix()
        assert f'href="../{page}#{label}"' in entry, f"gallery entry {label} does not link it"
        assert "qkov-gallery-caption\">Companion Fig. " in entry and len(re.sub(r"<[^>]+>", "", entry)) > 100
        assert entry.count('class="reference download internal"') == len(figure.downloads(REPO))


def test_citation_page(html):
    text = (html / "book" / "cite.html").read_text()
    plain = re.sub(r"<[^>]+>", "", text)
    assert "<hash>" not in plain and "&lt;hash&gt;" not in text
    assert "@inproceedings{vashisht26a" in plain and "@misc{qkov," in plain
    cff = re.search(r'href="([^"]*CITATION\.cff)"', text)
    assert cff and (html / "book" / cff.group(1)).resolve().is_file(), "CITATION.cff not linked"


def test_citation_file_is_valid_cff_1_2_0():
    """CITATION.cff against the official CFF 1.2.0 JSON schema (tests/data, from the
    cffconvert package: the network is not needed)."""
    import jsonschema
    import yaml

    schema = json.loads((REPO / "tests" / "data" / "cff-schema-1.2.0.json").read_text())
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    jsonschema.validate(cff, schema)
    assert cff["preferred-citation"]["title"].startswith("Faster Query-Key Learning")
    broken = {**cff, "authors": [{"nickname": 3}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_launch_buttons_and_repository_link(html):
    text = (html / "notebooks" / "paper-fig4.html").read_text()
    assert "mybinder.org/v2/gh/qkov-companion/qkov/main?urlpath=tree/notebooks/paper-fig4.ipynb" in text
    assert "colab.research.google.com/github/qkov-companion/qkov/blob/main/notebooks/paper-fig4.ipynb" in text
    assert 'href="https://github.com/qkov-companion/qkov"' in text
    assert re.search(r'href="[^"]*_sources/notebooks/paper-fig4\.ipynb"', text), \
        "the notebook cannot be downloaded"


# --- what a reader found in a real browser ------------------------------------------------

def test_page_titles_carry_no_tex(html):
    for page in html.rglob("*.html"):
        if "_static" in page.parts:
            continue
        title = re.search(r"<title>(.*?)</title>", page.read_text(), re.S)
        title = title.group(1) if title else ""  # (the root index.html only redirects)
        assert not re.search(r"\\\(|\\\[|\$", title), f"{page.relative_to(html)}: title {title!r}"


def test_every_displayed_equation_is_numbered_and_scrolls(html):
    from qkov import book

    for page in sorted((html / "book").glob("*.html")) + sorted((html / "notebooks").glob("*.html")):
        text = page.read_text()
        for block in re.findall(r'<div class="math notranslate nohighlight"[^>]*>(.*?)</div>', text, re.S):
            assert 'class="eqno"' in block, f"{page.relative_to(html)}: an unnumbered equation"
    css = (html / "_static" / book.CSS_FILE).read_text()
    assert re.search(r'mjx-container\[display="true"\][^{]*\{[^}]*overflow-x: auto', css)
    assert book.CSS_FILE in (html / "book" / "theory.html").read_text()


def test_printed_tables_are_html_tables(html):
    """Every table a notebook printed is shown as an HTML table, all of its columns."""
    from qkov import book

    for page in sorted((html / "notebooks").glob("*.html")):
        text = page.read_text()
        for pre in re.findall(r'<div class="output stream highlight-[^"]*"><div class="highlight"><pre>'
                              r'(?:<span></span>)?(.*?)</pre>', text, re.S):
            plain = re.sub(r"<[^>]+>", "", pre).replace("&gt;", ">").replace("&lt;", "<")
            assert not any(book.parse_text_table(chunk) for chunk in re.split(r"\n\s*\n", plain)), \
                f"{page.relative_to(html)}: a table is still shown as fixed-width text"
    rescaling = (html / "notebooks" / "theory-rescaling.html").read_text()
    table = re.search(r'<table class="qkov-printed-table.*?</table>', rescaling, re.S).group(0)
    for column in ("measured_attention", "predicted_rank", "measured_rank"):
        assert f"<p>{column}</p>" in table, column


def test_parse_text_table():
    from qkov import artifacts, book

    rows = [{"panel": "FAFO ramped", "x": 1.0, "y": "0.5 ± 0.1"},
            {"panel": "CACO", "x": 123456.0, "y": "12 ± 3"}]
    text = artifacts.table_text(rows, ["panel", "x", "y"])
    assert book.parse_text_table(text) == (
        ["panel", "x", "y"], [["FAFO ramped", "1", "0.5 ± 0.1"], ["CACO", "1.235e+05", "12 ± 3"]])
    assert book.parse_text_table("wrote figure.png, data.csv") is None
    assert book.parse_text_table("FAFO < FACO\nCAFO < CACO") is None


def test_reader_text_has_no_internal_targets(html):
    for page in sorted(html.rglob("*.html")):
        plain = re.sub(r"<[^>]+>", " ", page.read_text())
        assert not re.search(r"target (?:is|of) \d+(?:\.\d+)?x|is not met", plain), \
            f"{page.relative_to(html)} states an internal project target"


def test_wide_figures_get_text_sized_for_the_page():
    from matplotlib.text import Text

    from qkov import plotting

    with plotting.house_style():
        fig = plotting.new_figure(figsize=(2 * plotting.DISPLAY_WIDTH_IN, 3))
        ax = fig.subplots()
        ax.set_title("t")
        ax.text(0.5, 0.5, "cell", fontsize=8)
    plotting.fit_text_to_page(fig)
    plotting.fit_text_to_page(fig)  # once only
    sizes = {t.get_text(): t.get_fontsize() for t in fig.findobj(Text)}
    assert sizes["cell"] == 16 and sizes["t"] == 2 * plotting.HOUSE_STYLE["axes.titlesize"]
    assert ax.get_xticklabels()[0].get_fontsize() == 2 * plotting.HOUSE_STYLE["xtick.labelsize"]


def test_provenance_and_bibtex_say_when_the_code_was_not_the_commit():
    from qkov import book

    clean = {"commit": "a" * 40, "uncommitted_changes": False, "custom_parameters": []}
    assert book.input_state(clean) == ""
    changed = {**clean, "uncommitted_changes": True, "library_changed": True,
               "notebook_changed": False, "custom_parameters": ["epochs_scale"]}
    assert book.input_state(changed) == ("uncommitted changes (library); parameters other "
                                         "than the defaults: epochs_scale")
    # BibTeX: no parameter names (LaTeX rejects a bare underscore).
    assert "_" not in book.input_state(changed, names=False)
    figure = next(iter(book.book_figures().values()))
    entry = book.companion_bibtex(book.citation(), figure, "page", "a" * 40,
                                  book.input_state(changed, names=False))
    assert "commit aaaaaaaaaaaa with uncommitted changes (library); parameters other" in entry
    clean_entry = book.companion_bibtex(book.citation(), figure, "page", "a" * 40, "")
    assert "commit aaaaaaaaaaaa;" in clean_entry or "commit aaaaaaaaaaaa}" in clean_entry
