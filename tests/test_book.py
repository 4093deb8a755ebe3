"""A strict build of the book from the stored notebooks, checked from its HTML.

The build runs into a temporary folder (the real _build/ is left alone) with -W -n
--keep-going: any warning fails. What the book must show of each figure is derived from the
figures' specs (``qkov.figures.specs()``), so a figure added later is checked without an
edit here. What a browser shows (math typeset, nothing loaded from other hosts) is checked
in test_browser.py.
"""

import html as html_text
import importlib
import inspect
import json
import os
import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO
from qkov.figures import specs

sys.path.insert(0, str(REPO / "book" / "_ext"))  # the book's extensions, as _config.yml loads them
book_ext, cite_ext, figures_ext, info_ext, records_ext, tables_ext = (
    importlib.import_module(f"qkov_{name}")
    for name in ("book", "cite", "figures", "figure_info", "records", "tables"))

SPECS = list(specs().values())
DRAWN = [spec for spec in SPECS if not spec.needs_dataset]  # the book has their files
# Every drawing the book shows, by label: the chapter (the spec's page) that shows it.
FIGURES = {spec.label(drawing): f"{spec.page}.html" for spec in DRAWN for drawing in spec.drawings}


@pytest.fixture(scope="module")
def html(book_html):
    return book_html


def toc_docnames() -> list[str]:
    """The book's pages in reading order, from _toc.yml itself."""
    import yaml

    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    order = [toc["root"]]

    def walk(entries):
        for entry in entries:
            if "file" in entry:
                order.append(entry["file"])
            walk(entry.get("sections", []))
            walk(entry.get("chapters", []))

    walk(toc.get("parts", []))
    walk(toc.get("chapters", []))
    return order


def book_order_ids() -> list[str]:
    """The figure ids in the order the book shows them: by the page that shows each (its
    spec's page), then by where its notebook stands."""
    order = toc_docnames()
    return sorted((spec.id for spec in SPECS),
                  key=lambda i: (order.index(specs()[i].page), order.index(f"notebooks/{i}")))


SMART_QUOTES = str.maketrans("‘’“”", "''\"\"")  # as Sphinx typesets a quote in text


def plain(text: str) -> str:
    """HTML as a reader reads it: no tags, entities resolved."""
    return html_text.unescape(re.sub(r"<[^>]+>", "", text))


@pytest.mark.parametrize("figure_id, page", FIGURES.items())
def test_figures_have_one_name_and_a_caption(html, figure_id, page):
    """Each figure is shown in its chapter, named one way: "Fig. 2 (reproduced)" for the
    paper's, C1, C2, ... for the companion's own (in book order), never a section number."""
    figure = figures_ext.book_figures(REPO, toc_docnames())[figure_id]
    text = (html / page).read_text()
    match = re.search(rf'<figure[^>]*id="{figure_id}"[^>]*>(.*?)</figure>', text, re.S)
    assert match, f"no figure labelled {figure_id} on {page}"
    caption = plain(re.search(r"<figcaption>(.*?)</figcaption>", match.group(1), re.S).group(1))
    assert re.match(rf"\s*{re.escape(figure.name)}\. \w", caption), \
        f"{figure_id}: the caption starts {caption[:60]!r}, not with {figure.name!r}"
    assert not re.search(r"Fig\. \d+\.\d+", caption), f"{figure_id}: a section number"
    assert "reproduces paper Fig" not in caption, f"{figure_id}: says what it reproduces twice"
    alt = re.search(r'<img[^>]*alt="([^"]*)"', match.group(1)).group(1)
    assert len(alt) > 40 and "/" not in alt, f"{figure_id}: the alt text {alt!r} says nothing"
    src = re.search(r'<img[^>]*src="([^"]+)"', match.group(1)).group(1)
    assert (html / page).parent.joinpath(src).resolve().stat().st_size > 10_000


def test_figures_are_named_c1_c2_in_book_order():
    names = [f.name for f in figures_ext.book_figures(REPO, toc_docnames()).values()
             if f.reproduces is None]
    assert names == [f"C{k}" for k in range(1, len(names) + 1)]
    assert figures_ext.reproduction_name("paper Fig. 2") == "Fig. 2 (reproduced)"
    assert figures_ext.reproduction_name("paper Fig. 2 (its spread over seeds)") == \
        "Fig. 2 (reproduced; its spread over seeds)"
    assert figures_ext.reproduction_name("paper section 5 (HateXplain)", pipeline=True) == \
        "Section 5 (HateXplain; pipeline)"
    figures = figures_ext.book_figures(REPO, toc_docnames())
    assert figures["model-schematic"].name == "C1"  # the introduction shows it first
    assert figures["language-sva"].name.endswith("; pipeline)")


@pytest.mark.parametrize("chapter, figure_id, label", [
    (spec.page, spec.id, spec.label(drawing)) for spec in DRAWN for drawing in spec.drawings])
def test_chapter_cites_the_figure_by_name(html, chapter, figure_id, label):
    """Each drawing is cited by its name in the chapter its spec names (spec.page), which
    shows it; its notebook page shows the run's figure with a link to it."""
    name = figures_ext.book_figures(REPO, toc_docnames())[label].name
    text = (html / f"{chapter}.html").read_text()
    assert re.search(rf'href="#{label}"[^>]*>{re.escape(name)}</a>', text), \
        f"{chapter} does not cite {label} by its name {name!r}"
    notebook = (html / f"notebooks/{figure_id}.html").read_text()
    assert re.search(rf'href="[^"]*{chapter.split("/")[-1]}\.html#{label}"[^>]*>'
                     rf'{re.escape(name)}</a>', notebook), \
        f"notebooks/{figure_id}.html does not link {label} in its chapter"


def test_bibliography_and_citation_page(html):
    refs = (html / "book" / "references.html").read_text()
    assert "Faster Query-Key Learning Sharpens Attention" in refs
    assert "Vashisht" in (html / "book" / "intro.html").read_text()


def test_reproducibility_page_shows_the_measured_records(html):
    """The timings and speed-ups on the page are the records', rendered at build time: the
    trainer benchmark's file, each figure's own summary.json, the last passing make test."""
    text = (html / "book" / "reproduce.html").read_text()
    for kind, rows_of in records_ext.RECORD_KINDS.items():
        _, rows, note = rows_of(REPO)
        for row in rows:
            for cell in row:
                assert cell.replace("&", "&amp;") in text, (kind, cell)
        plain = " ".join(html_text.unescape(re.sub(r"<[^>]+>", " ", text))
                         .replace("\u2019", "'").split())
        assert " ".join(note.split("`")[0].split()) in plain, kind
    figure_rows = records_ext.figure_times_rows(REPO)[1]
    assert {r[0] for r in figure_rows[:-1]} >= {
        f for f, spec in specs().items() if not spec.needs_dataset}


def test_a_malformed_or_missing_record_is_named(tmp_path, monkeypatch):
    with pytest.raises(KeyError):
        records_ext.trainer_speed_rows({"date": "2026-01-01"})
    # no test run recorded: the page says so instead of a table
    assert records_ext.test_run_rows(tmp_path)[1] == []
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "test-run.json").write_text('{"date": "d", "machine": "m"}')
    with pytest.raises(KeyError):
        records_ext.test_run_rows(tmp_path)
    # a figure the book shows without its summary, or with a malformed one, fails the build
    monkeypatch.setenv("QKOV_ARTIFACTS", str(tmp_path / "artifacts"))
    with pytest.raises(FileNotFoundError):
        records_ext.figure_times_rows(tmp_path)
    for figure_id in specs():
        (tmp_path / "artifacts" / figure_id).mkdir()
        (tmp_path / "artifacts" / figure_id / "summary.json").write_text('{"provenance": {}}')
    with pytest.raises(KeyError):
        records_ext.figure_times_rows(tmp_path)


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


def shown_figures() -> dict:
    """The extension's figures that the book shows: every drawing of every spec that does
    not need a dataset (those are stored without a figure)."""
    return {label: figure for label, figure in figures_ext.book_figures(REPO, toc_docnames()).items()
            if label in FIGURES}


def test_every_figure_of_the_specs_has_the_same_block(html):
    """Whatever figure the specs declare, now or added later, the book shows it once with
    its headline and the block: downloads that exist, commands, provenance, citation, and
    the code that made it."""
    from conftest import book_artifacts

    assert shown_figures().keys() == FIGURES.keys()
    for label, figure in shown_figures().items():
        page = _page_of(html, label)
        name = page.relative_to(html).as_posix()
        text = page.read_text()
        caption = re.search(rf'<figure[^>]*id="{label}".*?</figure>', text, re.S).group(0)
        assert f'<strong class="qkov-headline">{figure.name}. </strong>' in caption, \
            f"{name}: the caption of {label} does not start with its name"
        assert re.search(r'<a class="qkov-full-size[^"]*" href="[^"]+\.svg"><img', caption), \
            f"{name}: clicking figure {label} does not open its SVG"
        block = _info_block(text, label)
        assert re.search(r'<a class="qkov-open-full[^"]*" href="[^"]+\.svg">Open full size</a>',
                         block), f"{name}: figure {label} has no visible full-size link"
        # The downloads on one line; the rest folded under a summary.
        assert re.search(r'</p>\s*<details class="qkov-details"><summary>', block), name
        folded = re.sub(r"<[^>]+>", "", block[block.index("<details"):])
        assert "Regenerate" in folded and "Provenance" in folded and "@misc{" in folded
        links = dict((t, h) for h, t in re.findall(
            r'<a class="reference download internal" download="" href="([^"]+)">'
            r'<code[^>]*><span class="pre">([^<]+)</span>', block))
        expected = [t for t, _ in figure.downloads(REPO)] + [figure.module_file]
        assert list(links) == expected, f"{name}: downloads of {label}: {list(links)}"
        for text_, href in links.items():
            target = (page.parent / href).resolve()
            assert target.is_file() and target.stat().st_size > 0, \
                f"{name}: download {text_} of {label} ({href}) is missing from the build"
        summary = json.loads((book_artifacts() / figure.spec.id / "summary.json").read_text())
        plain = re.sub(r"<[^>]+>", "", block).replace("&quot;", '"').replace("&#39;", "'")
        assert info_ext.papermill_command(figure, summary["parameters"]) in plain, name
        assert f"snakemake --cores 2 {figure.spec.module}" in plain, name
        assert f"commit {summary['provenance']['commit'][:12]}" in plain, name
        assert f"wall time {summary['provenance']['wall_time_s']:.1f} s" in plain, name
        assert "@inproceedings{vashisht26a" not in plain, f"{name}: the paper's entry is on the cite page"
        assert re.search(r'href="(\.\./)?(book/)?cite\.html"', block), \
            f"{name}: the block of {label} does not link the page with the paper's entry"
        assert f"@misc{{qkov-{label}," in plain, name
        assert f"{cite_ext.citation(REPO)['url']}{name}#{label}" in plain, \
            f"{name}: the citation of {label} does not carry its anchor URL"
        code = re.search(r'<p class="qkov-code-line">(.*?)</p>', block, re.S)
        assert code, f"{name}: the block of {label} has no Code: line"
        assert f"Code: the notebook calls qkov.figures.{figure.spec.module} " \
               f"({figure.module_file})" in plain, name
        assert re.search(r'href="(\.\./)?(book/)?core\.html"', code.group(1)), \
            f"{name}: the Code: line of {label} does not link the core page"


def test_the_regenerate_command_gives_back_the_parameters():
    import shlex

    import yaml

    figure = figures_ext.book_figures(REPO, toc_docnames())["paper-fig4"]
    params = {"m": 5, "b": 50.0, "name": "a b", "ratios": [0.1, 1], "flag": True,
              "seed": None, "artifacts_dir": None}
    words = shlex.split(info_ext.papermill_command(figure, params))
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


def book_sources(source: Path) -> Path:
    """A copy of what the book is built from: its configuration, pages, extension and
    notebooks, the library (the core page includes its code) and the records."""
    source.mkdir()
    for name in ("_config.yml", "_toc.yml", "CITATION.cff"):
        shutil.copy(REPO / name, source / name)
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for folder in ("book", "notebooks", "lib", "benchmarks/results"):
        shutil.copytree(REPO / folder, source / folder, ignore=ignore)
    return source


def test_a_missing_data_file_or_broken_reference_fails_the_build_naming_the_page(
        tmp_path, run_tool):
    """On a copy of the book's sources and of the figures' files: one data file removed and
    one cross-reference broken; the strict build fails and names both pages."""
    from conftest import book_artifacts

    root = tmp_path / "artifacts"
    shutil.copytree(book_artifacts(), root)
    (root / "paper-fig4" / "data.csv").unlink()
    source = book_sources(tmp_path / "source")
    chapter = source / "book" / "theory.md"
    assert "{qkov-fig}`theory-reduction`" in chapter.read_text()
    chapter.write_text(chapter.read_text().replace("{qkov-fig}`theory-reduction`",
                                                   "{qkov-fig}`theory-reductoin`", 1))
    result = run_tool("jupyter-book", "build", source, "--path-output", tmp_path / "out",
                      "-W", "-n", "--keep-going", check=False,
                      env={"QKOV_ARTIFACTS": str(root)})
    assert result.returncode != 0
    log = result.stdout + result.stderr
    assert re.search(r"book/paper-fig4\.md:\d*: WARNING: figure paper-fig4: \S*"
                     r"paper-fig4/data\.csv is missing", log), log[-3000:]
    assert re.search(r"book/gallery\.md:\d*: WARNING: figure paper-fig4: \S*"
                     r"paper-fig4/data\.csv is missing", log), log[-3000:]
    assert re.search(r"book/theory\.md:\d+: WARNING: .*theory-reductoin", log), log[-3000:]
    # Before any page: the set is not whole (summary.json's digests name the missing file).
    assert re.search(r"WARNING: the book cannot show this figure's files: \S*paper-fig4/"
                     r"data\.csv: missing", log), log[-3000:]


def test_gallery_shows_every_figure_in_the_book_order(html):
    text = (html / "book" / "gallery.html").read_text()
    expected = [spec.label(drawing) for spec in map(specs().get, book_order_ids())
                if spec in DRAWN for drawing in spec.drawings]
    assert re.findall(r'id="gallery-([^"]+)"', text) == expected
    for label, figure in shown_figures().items():
        entry = re.search(rf'id="gallery-{label}">(.*?)</div>\s*(?=<div class="qkov-gallery-item|</div>)',
                          text, re.S)
        assert entry, f"book/gallery.html has no entry for {label}"
        entry = entry.group(1)
        src = re.search(r'<img[^>]*src="([^"]+)"', entry).group(1)
        assert (html / "book" / src).resolve().stat().st_size > 10_000, label
        page = os.path.relpath(_page_of(html, label), html / "book")
        assert f'href="{page}#{label}"' in entry, f"gallery entry {label} does not link it"
        assert f"<strong>{figure.name}</strong>" in entry and "Companion Fig." not in entry
        assert "qkov-gallery-caption" in entry and len(re.sub(r"<[^>]+>", "", entry)) > 100
        assert entry.count('class="reference download internal"') == len(figure.downloads(REPO))


def test_a_dataset_figure_that_a_reader_ran_is_in_the_gallery(tmp_path, run_tool):
    """A figure that needs a dataset has no files where the book is built (the real build
    leaves it out of the gallery, and passes). Once a reader has run it, its files are in
    the gallery; its notebook, stored without a figure, shows none, and the strict build
    still passes."""
    from conftest import book_artifacts
    from qkov import artifacts, sets
    from qkov.figures import module

    spec = next(spec for spec in SPECS if spec.needs_dataset)
    root = tmp_path / "artifacts"
    shutil.copytree(book_artifacts(), root)
    files = {}
    for name in spec.files[:-1]:  # a stand-in run: another figure's files under its names
        suffix = Path(name).suffix
        stand_in = "data.csv" if suffix == ".csv" else f"figure{suffix}"
        files[name] = (root / "paper-fig4" / stand_in).read_bytes()
    # ... at the figure's defaults, but for where its data was (as a reader's run would be)
    parameters = module(spec.id).Parameters.defaults()
    parameters.update({name: "/data/x" for name in parameters if name in artifacts.INPUT_PATHS})
    rows = json.loads((root / "paper-fig4" / "summary.json").read_text())["rows"]
    files["summary.json"] = sets.summary_bytes(spec.id, parameters, rows, 1.0, dict(files))
    sets.write_set(root / spec.id, files)
    out = tmp_path / "out"
    result = run_tool("jupyter-book", "build", book_sources(tmp_path / "source"),
                      "--path-output", out, "-W", "-n", "--keep-going", check=False,
                      env={"QKOV_ARTIFACTS": str(root)})
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    text = (out / "_build" / "html" / "book" / "gallery.html").read_text()
    entry = re.search(rf'id="gallery-{spec.id}">(.*?)</div>\s*(?=<div class="qkov-gallery-item|</div>)',
                      text, re.S)
    assert entry and "Not shown on a page of the book" in entry.group(1)
    assert entry.group(1).count('class="reference download internal"') == \
        len(figures_ext.book_figures(REPO, toc_docnames())[spec.id].downloads(REPO))


def test_figure_table_lists_every_spec_in_the_book_order(html):
    """The reproducibility page's table of figures is made from the specs: a new figure
    appears there, in the order of _toc.yml, without an edit of the page."""
    assert "{qkov-figure-table}" in (REPO / "book" / "reproduce.md").read_text()
    text = (html / "book" / "reproduce.html").read_text()
    table = re.search(r'<table class="[^"]*qkov-figure-table.*?</table>', text, re.S).group(0)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
    assert [plain(c).strip() for c in re.findall(r"<th[^>]*>(.*?)</th>", rows[0], re.S)] == \
        ["figure id", "notebook", "reproduces", "reads", "needs a dataset"]
    cells = [[plain(c).strip().replace("\u2019", "'")
              for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows[1:]]
    assert [c[0] for c in cells] == book_order_ids()
    for (figure_id, notebook, reproduces, reads, dataset), row in zip(cells, rows[1:]):
        spec = specs()[figure_id]
        assert notebook == spec.notebook and f'href="../notebooks/{figure_id}.html"' in row
        for drawing in spec.drawings:
            assert (drawing.reproduces or "none (the companion's own)") in reproduces, figure_id
            if spec.extra_drawings:
                assert spec.label(drawing) in reproduces, figure_id
        assert reads == (", ".join(spec.reads) or "nothing"), figure_id
        assert dataset == ("yes" if spec.needs_dataset else "no"), figure_id
        if spec.needs_dataset:
            assert f'href="{Path(spec.page).name}.html"' in row, figure_id
        else:
            assert f'href="../{spec.page}.html#{figure_id}"' in row or \
                f'href="{Path(spec.page).name}.html#{figure_id}"' in row, \
                f"the table does not link figure {figure_id} in its chapter"


def test_core_page_shows_the_library_source(html):
    """The core page includes the library's code itself (literalinclude), not a copy:
    every line of the model, its gradient and update, the training step and the reduced
    dynamics' right-hand side is in the built page, and the page is in the book."""
    from qkov.synthetic import models, train
    from qkov.theory import reduced

    assert "book/core" in toc_docnames()
    text = (html / "book" / "core.html").read_text()
    code = "\n".join(plain(block) for block in re.findall(r"<pre>(.*?)</pre>", text, re.S))
    for obj in (models.count_attention, models.count_logits, models.Ensemble.step,
                train._Group.step, train._Group._qk_rates, reduced.attention_mass,
                reduced.rhs):
        for line in inspect.getsource(obj).splitlines():
            assert line in code, f"core page: {obj.__qualname__}: {line!r} is not shown"
    assert "group.losses.append(group.step(t % chunk))" in code  # the training loop
    for name in ("lib/qkov/synthetic/models.py", "lib/qkov/synthetic/train.py",
                 "lib/qkov/theory/reduced.py"):
        assert name in plain(text), f"core page: no caption names {name}"


def test_the_book_order_is_the_toc_order():
    from sphinx_external_toc.parsing import parse_toc_yaml

    config = SimpleNamespace(external_site_map=parse_toc_yaml(REPO / "_toc.yml"))
    order = figures_ext.toc_order(config)
    assert order == toc_docnames()
    assert [spec.id for spec in figures_ext.ordered_specs(order)] == book_order_ids()
    assert list(figures_ext.book_figures(REPO, order)) == [
        spec.label(d) for spec in figures_ext.ordered_specs(order) for d in spec.drawings]
    assert figures_ext.toc_order(SimpleNamespace()) == []
    assert [spec.id for spec in figures_ext.ordered_specs([])] == sorted(specs())


def test_citation_page(html):
    text = (html / "book" / "cite.html").read_text()
    plain = re.sub(r"<[^>]+>", "", text)
    assert "<hash>" not in plain and "&lt;hash&gt;" not in text
    assert "@inproceedings{vashisht26a" in plain and "@misc{qkov," in plain
    cff = re.search(r'href="([^"]*CITATION\.cff)"', text)
    assert cff and (html / "book" / cff.group(1)).resolve().is_file(), "CITATION.cff not linked"


def test_citation_file_is_valid_cff_1_2_0():
    """CITATION.cff against the official CFF 1.2.0 JSON schema (tests/data: the file
    cffconvert 2.0.0 ships, byte for byte; the network is not needed). cffconvert itself,
    the newest on PyPI, requires jsonschema < 4, which Snakemake 9 (jsonschema's registry)
    cannot run with: its schema, not its package."""
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
    from qkov_tools.notebooks import repository_url

    url = repository_url(REPO)  # CITATION.cff's, the one place it is written
    repo = url.removeprefix("https://github.com/")
    assert f"mybinder.org/v2/gh/{repo}/main?urlpath=tree/notebooks/paper-fig4.ipynb" in text
    assert f"colab.research.google.com/github/{repo}/blob/main/notebooks/paper-fig4.ipynb" in text
    assert f'href="{url}"' in text
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
    for page in sorted((html / "book").glob("*.html")) + sorted((html / "notebooks").glob("*.html")):
        text = page.read_text()
        for block in re.findall(r'<div class="math notranslate nohighlight"[^>]*>(.*?)</div>', text, re.S):
            assert 'class="eqno"' in block, f"{page.relative_to(html)}: an unnumbered equation"
    css = (html / "_static" / book_ext.CSS_FILE).read_text()
    assert re.search(r'mjx-container\[display="true"\][^{]*\{[^}]*overflow-x: auto', css)
    assert book_ext.CSS_FILE in (html / "book" / "theory.html").read_text()


def test_printed_tables_are_html_tables_from_the_figures_data(html):
    """Every table a figure's notebook printed is shown as HTML tables rendered from the
    figure's data (its summary.json), headed as its module declares, wide ones split."""
    from conftest import book_artifacts
    from qkov.tables import cell_text

    for spec in DRAWN:
        summary = json.loads((book_artifacts() / spec.id / "summary.json").read_text())
        text = (html / "notebooks" / f"{spec.id}.html").read_text()
        shown = re.findall(r'<table class="qkov-printed-table.*?</table>', text, re.S)
        expected = [part for t in summary["tables"] for part in tables_ext.split_wide(
            t["headers"], [[cell_text(v, t["digits"]) for v in row] for row in t["rows"]])]
        assert len(shown) == len(expected), f"{spec.id}: {len(shown)} of {len(expected)} tables"
        for table, (header, rows) in zip(shown, expected, strict=True):
            cells = [plain(c).strip().translate(SMART_QUOTES)
                     for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", table, re.S)]
            assert cells == [*header, *(c for row in rows for c in row)], spec.id
            assert len(header) <= tables_ext.MAX_COLUMNS
    rescaling = (html / "notebooks" / "theory-rescaling.html").read_text()
    tables = re.findall(r'<table class="qkov-printed-table.*?</table>', rescaling, re.S)
    headers = [re.sub(r"<[^>]+>", "", h) for t in tables
               for h in re.findall(r"<th[^>]*>(.*?)</th>", t, re.S)]
    for column in ("measured attention", "predicted rank", "measured rank", "α at the loss"):
        assert column in headers, column  # readable, not measured_attention
    for table in tables:  # wide ones split, each led by the row's name
        first = re.search(r"<th[\s>][^>]*>(.*?)</th>", table, re.S).group(1)
        assert re.sub(r"<[^>]+>", "", first).strip() == "parameterization"


def test_wide_tables_are_split_and_headers_readable():
    from qkov import tables

    header = ["panel", *(f"c_{k}" for k in range(8))]
    rows = [["FAFO", *map(str, range(8))]]
    parts = tables_ext.split_wide(header, rows)
    assert [h for h, _ in parts] == [["panel", "c_0", "c_1", "c_2", "c_3"],
                                     ["panel", "c_4", "c_5", "c_6", "c_7"]]
    assert parts[1][1] == [["FAFO", "4", "5", "6", "7"]]
    assert tables_ext.split_wide(header[:3], rows) == [(header[:3], rows)]
    # A two-column key (the condition and r) is repeated in every part.
    keyed = [["T = 64", "1", *"abcdefg"], ["T = 64", "10", *"hijklmn"]]
    parts = tables_ext.split_wide(["condition", "r", *(f"c_{k}" for k in range(7))], keyed)
    assert all(h[:2] == ["condition", "r"] for h, _ in parts)
    assert all(len({tuple(row[:2]) for row in part}) == 2 for _, part in parts)
    assert [v for _, part in parts for v in part[1][2:]] == list("hijklmn")
    assert tables.default_header("predicted_rank") == "predicted rank"


def test_a_printed_table_is_found_by_its_column_names_and_rows():
    """The book locates a printed table by its first line (the column names) and its line
    count, and renders it from the data; the printed values are not read."""
    from qkov import tables

    data = tables.table([{"panel": "FAFO ramped", "x": 1.0, "y": "0.5 ± 0.1"},
                         {"panel": "CACO", "x": 123456.0, "y": "12 ± 3"}], ["panel", "x", "y"])
    text = tables.text(data)
    assert tables_ext.printed_as(text + "\n", data)
    assert not tables_ext.printed_as("\n".join(text.split("\n")[:-1]), data)  # a row short
    assert not tables_ext.printed_as(text.replace("panel", "label"), data)
    assert not tables_ext.printed_as("wrote figure.png, data.csv", data)
    [part] = tables_ext.html_tables({**data, "headers": ["panel", "x", "y"]})
    assert "1.235e+05" in part.astext() and "qkov-printed-table" in part["classes"]


def test_a_figure_whose_files_predate_tables_as_data_is_named(tmp_path, monkeypatch):
    """A summary.json without the printed tables (written by older code) is a warning
    naming it, so the strict build asks for the figure to be regenerated."""
    monkeypatch.setenv("QKOV_ARTIFACTS", str(tmp_path))
    (tmp_path / "paper-fig4").mkdir()
    (tmp_path / "paper-fig4" / "summary.json").write_text('{"rows": []}')
    env = SimpleNamespace(srcdir=str(REPO), note_dependency=lambda path: None)
    with pytest.raises(ValueError, match="paper-fig4/summary.json holds no printed tables"):
        tables_ext.figure_tables("paper-fig4", env)
    assert tables_ext.figure_tables("paper-fig2", env) is None  # not run: nothing to show


def test_reader_text_has_no_internal_targets(html):
    for page in sorted(html.rglob("*.html")):
        plain = re.sub(r"<[^>]+>", " ", page.read_text())
        assert not re.search(r"target (?:is|of) \d+(?:\.\d+)?x|is not met", plain), \
            f"{page.relative_to(html)} states an internal project target"


def test_provenance_and_bibtex_say_when_the_code_was_not_the_commit():
    clean = {"commit": "a" * 40, "uncommitted_changes": False, "custom_parameters": []}
    assert info_ext.input_state(clean) == ""
    changed = {**clean, "uncommitted_changes": True, "library_changed": True,
               "notebook_changed": False, "custom_parameters": ["epochs_scale"]}
    assert info_ext.input_state(changed) == ("uncommitted changes (library); parameters other "
                                         "than the defaults: epochs_scale")
    # BibTeX: no parameter names (LaTeX rejects a bare underscore).
    assert "_" not in info_ext.input_state(changed, names=False)
    figure = next(iter(figures_ext.book_figures(REPO, toc_docnames()).values()))
    entry = cite_ext.companion_bibtex(cite_ext.citation(REPO), figure, "page", "a" * 40,
                                  info_ext.input_state(changed, names=False))
    assert "commit aaaaaaaaaaaa with uncommitted changes (library); parameters other" in entry
    clean_entry = cite_ext.companion_bibtex(cite_ext.citation(REPO), figure, "page", "a" * 40, "")
    assert "commit aaaaaaaaaaaa;" in clean_entry or "commit aaaaaaaaaaaa}" in clean_entry


def test_the_book_refuses_canonical_sets_that_are_not_whole_or_not_the_defaults(tmp_path,
                                                                                monkeypatch):
    """The book checks every canonical set before it builds: each file against the digest in
    summary.json, and the parameters against the figure's defaults (a reader's run with other
    parameters is not the figure), naming the file or the parameters."""
    from qkov import artifacts, plotting, sets
    from qkov.figures import model_schematic, paper_fig4

    monkeypatch.setenv(artifacts.ARTIFACTS_ENV, str(tmp_path))
    monkeypatch.setenv(artifacts.PIPELINE_ENV, "1")
    p = model_schematic.Parameters()
    plotting.publish(model_schematic.SPEC, p, model_schematic.rows(), 0.0,
                     {"figure": model_schematic.plot(model_schematic.rows())})
    assert figures_ext.set_problems(REPO) == []
    (tmp_path / "model-schematic" / "figure.svg").write_text("<svg/>")
    [problem] = figures_ext.set_problems(REPO)
    assert "model-schematic/figure.svg: differs from the digest" in problem

    custom = paper_fig4.Parameters(ratios=[1])
    files = {"data.csv": b"r\n1\n"}
    files["summary.json"] = sets.summary_bytes("paper-fig4", custom, [{"r": 1}], 0.0,
                                                    dict(files))
    sets.write_set(tmp_path / "paper-fig4", files)
    problems = figures_ext.set_problems(REPO)
    assert any("paper-fig4: made with parameters other than the figure's defaults (ratios)"
               in text for text in problems), problems
