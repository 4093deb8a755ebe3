"""The strict offline build (``book_html``, conftest.py), checked from its HTML against the
figures' specs (a new figure needs no edit here); test_browser.py checks it in a browser."""

import html as html_lib
import inspect
import json
import re
import shlex
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from sphinx_external_toc.parsing import parse_toc_yaml

from conftest import REPO, book_artifacts
from qkov.figures import specs

sys.path.insert(0, str(REPO / "book" / "_ext"))  # the book's extensions, as _config.yml loads them
import qkov_book  # noqa: E402
import qkov_figures  # noqa: E402

TOC = list(parse_toc_yaml(REPO / "_toc.yml"))  # the pages in reading order, as Sphinx reads it
FIGURES = qkov_figures.book_figures(REPO)
SHOWN = {label: f for label, f in FIGURES.items() if not f.spec.needs_dataset}


def plain(text: str) -> str:  # as a reader reads it: no tags or entities, quotes straight
    return html_lib.unescape(re.sub(r"<[^>]+>", "", text)).translate(
        str.maketrans("‘’“”", "''\"\""))


def gallery_entry(text: str, label: str) -> str:
    return re.search(rf'id="gallery-{label}">(.*?)</div>\s*(?=<div class="qkov-gallery-item|</div>)',
                     text, re.S).group(1)


@pytest.mark.parametrize("label", SHOWN)
def test_every_figure_is_shown_named_and_citable_with_its_data(book_html, label):
    """In its chapter, headed by its one name, with alt text, opening its SVG; its block's
    downloads (all in the build), regenerate command, provenance, BibTeX and code line; cited
    by name in its chapter and notebook; in the gallery with its caption and downloads."""
    figure, page = SHOWN[label], f"{SHOWN[label].spec.page}.html"
    text = (book_html / page).read_text()
    shown = re.search(rf'<figure[^>]*id="{label}".*?</figure>', text, re.S).group(0)
    caption = plain(re.search(r"<figcaption>(.*?)</figcaption>", shown, re.S).group(1))
    assert re.match(rf"\s*{re.escape(figure.name)}\. \w", caption), caption[:60]
    alt = re.search(r'<img[^>]*alt="([^"]*)"', shown).group(1)
    assert len(alt) > 40 and "/" not in alt, f"{label}: the alt text {alt!r} says nothing"
    assert re.search(r'<a class="qkov-full-size[^"]*" href="[^"]+\.svg"><img', shown)
    block = text[text.index(f'id="{label}-info"'):]
    block = block[:block.index("</details>")]
    assert re.search(r'class="qkov-open-full[^"]*" href="[^"]+\.svg">Open full size</a>', block)
    links = re.findall(r'<a class="reference download internal" download="" href="([^"]+)">'
                       r'<code[^>]*><span class="pre">([^<]+)</span>', block)
    source = f"lib/qkov/figures/{figure.spec.module}.py"
    assert [t for _, t in links] == [t for t, _ in figure.downloads(REPO)] + [source]
    summary = json.loads((book_artifacts() / figure.spec.id / "summary.json").read_text())
    prov, folded = summary["provenance"], " ".join(plain(block).split())
    for expected in (qkov_figures.papermill_command(figure, summary["parameters"]),
                     f"snakemake --cores 2 {figure.spec.module}", f"commit {prov['commit'][:12]}",
                     f"wall time {prov['wall_time_s']:.1f} s", f"@misc{{qkov-{label},",
                     f"{qkov_book.citation(REPO)['url']}{page}#{label}",
                     f"Code: the notebook calls qkov.figures.{figure.spec.module} ({source})"):
        assert expected in folded, f"{label}: {expected!r} is not in its block"
    assert "@inproceedings{vashisht26a" not in folded  # once, on the cite page
    assert all(re.search(rf'href="(\.\./)?(book/)?{p}\.html"', block) for p in ("cite", "core"))
    name = rf'(<span[^>]*>)?{re.escape(figure.name)}(</span>)?</a>'
    assert re.search(rf'href="#{label}"[^>]*>{name}', text), f"{page} does not cite {label}"
    notebook = (book_html / f"{figure.spec.notebook.removesuffix('.ipynb')}.html").read_text()
    assert re.search(rf'href="[^"]*{Path(page).name}#{label}"[^>]*>{name}', notebook)
    entry = gallery_entry((book_html / "book" / "gallery.html").read_text(), label)
    assert re.search(r'<img[^>]*class="qkov-thumbnail"', entry) and figure.name in plain(entry)
    assert entry.count(f'href="{Path(page).name}#{label}"') == 2  # the thumbnail and the name
    assert len(plain(re.search(r'qkov-gallery-caption">(.*?)</p>', entry, re.S).group(1))) > 60
    assert entry.count('class="reference download internal"') == len(figure.downloads(REPO))


def test_one_numbering_in_book_order_in_the_gallery_and_the_figure_table(book_html):
    """The companion's own figures are C1, C2, ... in book order, the gallery's and table's."""
    assert list(FIGURES) == [spec.label(d) for spec in sorted(specs().values(), key=lambda s: (
        TOC.index(s.page), TOC.index(s.notebook.removesuffix(".ipynb")))) for d in spec.drawings]
    own = [f.name for f in FIGURES.values() if f.drawing.reproduces is None]
    assert own == [f"C{k}" for k in range(1, len(own) + 1)] and FIGURES["model-schematic"].name == "C1"
    assert [qkov_figures.reproduction_name("paper section 5 (x)", p) for p in (False, True)] == \
        ["Section 5 (reproduced; x)", "Section 5 (x; pipeline)"]
    gallery = (book_html / "book" / "gallery.html").read_text()
    assert re.findall(r'id="gallery-([^"]+)"', gallery) == list(SHOWN)
    text = (book_html / "book" / "reproduce.html").read_text()
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", re.search(
        r'<table class="[^"]*qkov-figure-table.*?</table>', text, re.S).group(0), re.S)
    cells = [[plain(c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)]
             for r in rows]
    assert [c[0] for c in cells[1:]] == [f.spec.id for f in FIGURES.values() if f.label == f.spec.id]
    for (figure_id, notebook, reproduces, reads, dataset), row in zip(cells[1:], rows[1:]):
        spec = specs()[figure_id]
        assert notebook == spec.notebook and f'href="../notebooks/{figure_id}.html"' in row
        assert all((d.reproduces or "none (the companion's own)") in reproduces
                   for d in spec.drawings)
        assert (reads, dataset) == (", ".join(spec.reads) or "nothing",
                                    "yes" if spec.needs_dataset else "no")
        assert spec.needs_dataset or re.search(rf'href="[^"]*{Path(spec.page).name}\.html#{figure_id}"', row)


def test_chapters_are_numbered_and_notebook_pages_marked_as_code(book_html):
    """In the contents, each chapter of a numbered part has its number; each notebook page is
    listed as "Code: ..." without one; the other pages have none."""
    nav = re.findall(r'toctree-l[12][^>]*><a[^>]*href="([^"]+)">([^<]+)',
                     (book_html / "book" / "intro.html").read_text())
    assert len(nav) == len(TOC) - 1  # all but the root
    numbered = [Path(c["file"]).name for part in yaml.safe_load((REPO / "_toc.yml").read_text())[
        "parts"] if part.get("numbered") for c in part["chapters"]]
    for href, text in nav:
        name = Path(href).stem
        expected = (r"Code: \w" if "notebooks/" in href
                    else rf"{numbered.index(name) + 1}\. \w" if name in numbered else r"[A-Z]")
        assert re.match(expected, text), f"{href}: {text!r}"


def test_reproducibility_page_shows_the_measured_records(book_html):
    """The times and speed-ups are the records', rendered at build time."""
    text = plain((book_html / "book" / "reproduce.html").read_text())
    for kind, record in qkov_book.RECORDS.items():
        _, rows, note = record(REPO)
        assert all(cell in text for row in rows for cell in row), kind
        assert " ".join(note.replace("`", "").split()) in " ".join(text.split()), kind


def test_the_test_record_shows_each_tiers_time_and_the_slowest_tests(tmp_path, monkeypatch):
    """A passing session's record (tests/run_record.py, as `make test` writes it) is what the
    reproduce page shows: each tier's tests and minutes, the whole run, the slowest; a record
    from before tiers were recorded still shows its wall time."""
    import run_record

    times = {"tests/test_a.py::t": 90.0, "notebooks/x.ipynb::Cell 0": 400.0,
             "tests/test_book.py::b": 30.0, "tests/test_a.py::skipped": 0.5,
             "notebooks/x.ipynb::Cell 1": 200.0}
    monkeypatch.setattr(run_record, "times", defaultdict(float, times))
    monkeypatch.setattr(run_record, "ran", set(times) - {"tests/test_a.py::skipped"})
    monkeypatch.setattr(run_record, "tiers", {"tests/test_a.py::t": "unit",
                                              "notebooks/x.ipynb::Cell 0": "notebook",
                                              "tests/test_book.py::b": "book",
                                              "tests/test_a.py::skipped": "unit",
                                              "notebooks/x.ipynb::Cell 1": "notebook"})
    assert run_record.run_record(1) is None  # a failed session records nothing
    record = run_record.run_record(0)
    assert record["tiers"] == {"unit": {"tests": 1, "seconds": 90.5},
                               "notebook": {"tests": 2, "seconds": 600.0},
                               "book": {"tests": 1, "seconds": 30.0}}
    assert record["slowest"][0] == {"test": "notebooks/x.ipynb", "seconds": 600.0}
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "test-run.json").write_text(json.dumps(record))
    header, rows, note = qkov_book.RECORDS["test-run"](tmp_path)
    assert header == ["tier", "tests", "time"]
    assert [row[1:] for row in rows[:3]] == [["1", "1.5 min"], ["2", "10.0 min"], ["1", "0.5 min"]]
    assert rows[-1][1] == "4" and "`notebooks/x.ipynb` 10.0 min" in note
    old = {key: record[key] for key in ("date", "machine", "commit", "wall_time_s")}
    (tmp_path / "artifacts" / "test-run.json").write_text(json.dumps(old))
    header, rows, note = qkov_book.RECORDS["test-run"](tmp_path)
    assert rows[-1][-1] == f"{record['wall_time_s'] / 60:.1f} min" and len(rows) == 1


def test_printed_tables_are_html_tables_from_the_figures_data(book_html):
    """Every printed table, as HTML from the figure's summary.json (a wide one split, each
    part led by the columns that name its rows). The page shows the stored run and the
    summary is this session's re-run, so in a figure whose notebook prints float32-trained
    results (cells tagged nbval-tolerance) a number may differ in its last digits, as
    nbval's contract allows (`texts_close`); every other figure's tables match exactly."""
    import nbformat

    from nbval_tolerance import TOLERANCE_TAG, texts_close
    from qkov.tables import MAX_COLUMNS, cell_text, split_wide

    for spec in specs().values():
        notebook = nbformat.read(REPO / "notebooks" / f"{spec.id}.ipynb", as_version=4)
        tolerant = any(TOLERANCE_TAG in c.metadata.get("tags", []) for c in notebook.cells)
        same = texts_close if tolerant else str.__eq__
        summary = book_artifacts() / spec.id / "summary.json"
        text = (book_html / "notebooks" / f"{spec.id}.html").read_text()
        shown = re.findall(r'<table class="qkov-printed-table.*?</table>', text, re.S)
        for t in json.loads(summary.read_text())["tables"] if summary.is_file() else []:
            rows = [[cell_text(value, t["digits"]) for value in row] for row in t["rows"]]
            for header, part in split_wide(t["headers"], rows):
                assert shown, f"{spec.id}: a table of its summary.json is not shown"
                cells = [plain(c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>",
                                                              shown.pop(0), re.S)]
                expected = [*header, *(c for row in part for c in row)]
                assert len(cells) == len(expected) and all(
                    same(shown_cell, cell) for shown_cell, cell in zip(cells, expected)), (
                    spec.id, cells, expected)
                assert len(header) <= MAX_COLUMNS and header[0] == t["headers"][0]
        assert not shown, f"{spec.id}: more tables than its summary.json holds"


CHUNKED_CELL = """import time
from qkov import tables

print("first line", flush=True)
time.sleep(0.5)  # the kernel sends what it has: the next print comes as another output
print("second line", flush=True)
tables.show([{"condition": "matched", "accuracy": 0.5}, {"condition": "faster QK", "accuracy": 0.75}])
print("after the table")
"""


def test_a_page_does_not_depend_on_how_the_kernel_split_stdout(tmp_path, run_tool):
    """A notebook run for real, whose stdout arrives as several outputs, and the same notebook
    with its adjacent stdout joined into one (as a re-run on another machine may store it),
    build to the same page: one block of the lines printed before the table, the table as an
    HTML table (in the PDF's LaTeX, a tabular) from the display output, and what was printed
    after it still after it."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Page"),
                                              nbformat.v4.new_code_cell(CHUNKED_CELL)])
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python",
                                       "display_name": "Python 3"}
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[1].outputs
    kinds = [o.output_type for o in outputs]
    table = kinds.index("display_data")
    assert kinds[:table].count("stream") >= 2 and kinds[table + 1:] == ["stream"], kinds
    joined = nbformat.from_dict(json.loads(json.dumps(notebook)))
    joined.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="".join(
        o.text for o in outputs[:table])), *outputs[table:]]

    pages = {}
    for name, nb in {"chunked": notebook, "joined": joined}.items():
        source = tmp_path / name
        source.mkdir()
        nbformat.write(nb, source / "page.ipynb")
        (source / "index.md").write_text("# Index\n\n```{toctree}\npage\n```\n")
        (source / "conf.py").write_text(
            f"import sys\nsys.path.insert(0, {str(REPO / 'book' / '_ext')!r})\n"
            "extensions = ['myst_nb', 'qkov_tables']\nnb_execution_mode = 'off'\n"
            "project = 'chunks'\n")
        for builder in ("html", "latex"):
            run_tool("sphinx-build", "-q", "-W", "-b", builder, source, tmp_path / f"{name}-{builder}")
        article = (tmp_path / f"{name}-html" / "page.html").read_text()
        article = article[article.index('<div class="cell_output'):]
        pages[name] = article
        assert article.count("<pre>") == 2, article  # before the table, and after it
        assert re.search(r"first line\s+second line", article), article
        assert article.count('<table class="qkov-printed-table">') == 1
        assert "<td>faster QK</td>" in article and "<td>0.75</td>" in article
        assert article.index("second line") < article.index("<table") < article.index("after the")
        tex = (tmp_path / f"{name}-latex" / "chunks.tex").read_text()
        assert "\\begin{tabular}{lr}" in tex and "faster QK & 0.75" in tex
        assert tex.rindex("second line") < tex.index("faster QK & 0.75") < tex.rindex("after the")
    assert pages["chunked"] == pages["joined"]


def test_a_broken_book_fails_naming_the_page_and_a_readers_dataset_run_is_shown(
        tmp_path, run_tool):
    """On copies: paper-fig4's data.csv removed and a cross-reference broken fail the strict
    build naming the pages; a figure that needs a dataset, run by a reader (at its defaults,
    its data elsewhere), is in the gallery with its downloads."""
    from qkov import artifacts, sets
    from qkov.figures import module

    root = tmp_path / "artifacts"
    shutil.copytree(book_artifacts(), root)
    spec = next(spec for spec in specs().values() if spec.needs_dataset)
    files = {name: (root / "paper-fig4" / ("data.csv" if name.endswith(".csv")
                                           else f"figure{Path(name).suffix}")).read_bytes()
             for name in spec.files[:-1]}  # a stand-in run: paper-fig4's files, renamed
    parameters = module(spec.id).Parameters.defaults()
    parameters.update({name: "/data/x" for name in parameters if name in artifacts.INPUT_PATHS})
    rows = json.loads((root / "paper-fig4" / "summary.json").read_text())["rows"]
    files["summary.json"] = sets.summary_bytes(spec.id, parameters, rows, 1.0, dict(files))
    sets.write_set(root / spec.id, files)
    (root / "paper-fig4" / "data.csv").unlink()
    shutil.rmtree(root / "model-schematic")  # a figure never generated
    source = tmp_path / "source"  # what the book is built from (core.md includes lib/)
    for name in ("_config.yml", "_toc.yml", "CITATION.cff", "book", "notebooks", "lib",
                 "benchmarks/results"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        copy(REPO / name, source / name)
    chapter = source / "book" / "theory.md"
    chapter.write_text(chapter.read_text().replace("{qkov-fig}`theory-reduction`",
                                                   "{qkov-fig}`theory-reductoin`", 1))
    result = run_tool("jupyter-book", "build", source, "--path-output", tmp_path / "out",
                      "-W", "-n", "--keep-going", check=False, env={"QKOV_ARTIFACTS": str(root)})
    log = result.stdout + result.stderr
    assert result.returncode != 0
    for page in ("paper-fig4", "gallery"):
        assert re.search(rf"book/{page}\.md:\d*: WARNING: download file not readable: "
                         r"\S*paper-fig4/data\.csv", log), log[-3000:]
    assert re.search(r"book/theory\.md:\d+: WARNING: .*theory-reductoin", log), log[-3000:]
    assert re.search(r"book/\S+\.md:\d+: ERROR: qkov-figure model-schematic: no \S*model-"
                     r"schematic/summary\.json", log), log[-3000:]
    assert re.search(r"WARNING: the book cannot show this figure's files: \S*paper-fig4/"
                     r"data\.csv: missing", log), log[-3000:]  # checked before any page
    assert not re.search(rf"WARNING: .*{spec.id}", log), log[-3000:]  # a reader's run is no fault
    entry = gallery_entry((tmp_path / "out" / "_build/html/book/gallery.html").read_text(), spec.id)
    assert "Not shown on a page of the book" in entry
    assert entry.count('class="reference download internal"') == len(FIGURES[spec.id].downloads(REPO))


def test_citation_page_file_and_launch_buttons(book_html):
    """Both BibTeX entries; CITATION.cff linked, valid against the CFF 1.2.0 schema (as
    cffconvert 2.0.0 ships it); repository, Binder and Colab links; notebooks downloadable."""
    import jsonschema

    text = (book_html / "book" / "cite.html").read_text()
    assert "@inproceedings{vashisht26a" in plain(text) and "@misc{qkov," in plain(text)
    assert re.search(r'href="[^"]*CITATION\.cff"', text)  # (resolves: test_browser's static_problems)
    schema = json.loads((REPO / "tests" / "data" / "cff-schema-1.2.0.json").read_text())
    cff = qkov_book.citation(REPO)
    jsonschema.validate(cff, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**cff, "authors": [{"nickname": 3}]}, schema)
    text = (book_html / "notebooks" / "paper-fig4.html").read_text()
    url = cff["repository-code"]
    repo = url.removeprefix("https://github.com/")
    assert f"mybinder.org/v2/gh/{repo}/main?urlpath=tree/notebooks/paper-fig4.ipynb" in text
    assert f"colab.research.google.com/github/{repo}/blob/main/notebooks/paper-fig4.ipynb" in text
    assert f'href="{url}"' in text
    assert re.search(r'href="[^"]*_sources/notebooks/paper-fig4\.ipynb"', text)


def test_every_page_reads_offline(book_html):
    """Every displayed equation numbered, no TeX in titles, no internal project targets in reader
    text (math from the book's own MathJax, nothing from another host: test_browser)."""
    for page in book_html.rglob("*.html"):
        if "_static" in page.parts:
            continue
        text, name = page.read_text(), page.relative_to(book_html)
        title = re.search(r"<title>(.*?)</title>", text, re.S)
        assert not re.search(r"\\\(|\\\[|\$", title.group(1) if title else ""), name
        assert not re.search(r"target (?:is|of) \d+(?:\.\d+)?x|is not met", plain(text)), name
        for block in re.findall(r'<div class="math notranslate nohighlight"[^>]*>(.*?)</div>',
                                text, re.S):
            assert 'class="eqno"' in block, f"{name}: an unnumbered equation"


def test_core_page_shows_the_library_source(book_html):
    """The model, its gradient and update, the training step and the ODE, line by line."""
    from qkov.synthetic import models, train
    from qkov.theory import reduced

    text = (book_html / "book" / "core.html").read_text()
    code = "\n".join(plain(block) for block in re.findall(r"<pre>(.*?)</pre>", text, re.S))
    for obj in (models.count_attention, models.count_logits, models.Ensemble.step,
                train._Group.step, train._Group._qk_rates, reduced.attention_mass, reduced.rhs):
        for line in inspect.getsource(obj).splitlines():
            assert line in code, f"core page: {obj.__qualname__}: {line!r} is not shown"
    for name in ("synthetic/models.py", "synthetic/train.py", "theory/reduced.py"):
        assert f"lib/qkov/{name}" in plain(text), f"core page: no caption names {name}"


def test_the_regenerate_command_gives_back_the_runs_parameters():
    params = {"m": 5, "b": 50.0, "name": "a b", "ratios": [0.1, 1], "flag": True,
              "seed": None, "artifacts_dir": None}
    words = shlex.split(qkov_figures.papermill_command(FIGURES["paper-fig4"], params))
    assert words[:3] == ["papermill", "notebooks/paper-fig4.ipynb", "paper-fig4-run.ipynb"]
    given = {words[k + 1]: words[k + 2] for k in range(3, len(words) - 1, 3) if words[k] == "-p"}
    given = {k: v if k == "name" else yaml.safe_load(v) for k, v in given.items()}
    given.update(yaml.safe_load(words[words.index("-y") + 1]))
    assert given == {k: v for k, v in params.items() if k != "artifacts_dir"}


def test_the_book_refuses_a_set_not_at_the_figures_defaults(tmp_path, monkeypatch):
    """A reader's run with other parameters is not the figure (not whole: the build above)."""
    from qkov import artifacts, sets
    from qkov.figures import paper_fig4

    monkeypatch.setenv(artifacts.ARTIFACTS_ENV, str(tmp_path))
    files = {"data.csv": b"r\n1\n"}
    files["summary.json"] = sets.summary_bytes(
        "paper-fig4", paper_fig4.Parameters(ratios=[1]), [{"r": 1}], 0.0, dict(files))
    sets.write_set(tmp_path / "paper-fig4", files)
    assert qkov_figures.set_problems(REPO) == [
        f"{tmp_path / 'paper-fig4'}: made with parameters other than the figure's defaults "
        "(ratios); move it away and regenerate the figure"]
