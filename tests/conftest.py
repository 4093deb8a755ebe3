"""Shared test set-up: tools, tiers, the figures' files the book tests read. The session's
environment (a temporary $QKOV_ARTIFACTS, the pipeline's mode) is set by the plugin
tests/pipeline_env.py, which notebooks validated alone get too."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qkov.artifacts import ARTIFACTS_ENV

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def run_tool():
    """Run a command-line tool of the project's environment (papermill, snakemake, ...)."""

    def run(tool, *args, cwd=REPO, check=True, timeout=600, env=None):
        result = subprocess.run(
            [str(BIN / tool), *map(str, args)], cwd=cwd, capture_output=True, text=True,
            timeout=timeout, env=None if env is None else {**os.environ, **env},
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{tool} {' '.join(map(str, args))} exited {result.returncode}\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result

    return run


# The book tests build the book from the figures' files, and the claims tests read them:
# they run last, after nbval has re-executed every notebook into $QKOV_ARTIFACTS (so CI, in
# a fresh clone, has them).
BOOK_TESTS = ("test_book.py", "test_browser.py", "test_pdf.py", "test_claims.py")


# Test tiers (markers, registered in pyproject.toml). ``make check`` runs the fast one:
#   unit      in-process tests of the library (seconds in all)
#   notebook  runs notebooks or command-line tools in subprocesses: nbval over notebooks/,
#             papermill and Snakemake runs, the rounding-perturbation test
#   book      the strict book build;  browser  the built book in Chromium;
#   cluster   a single-node SLURM
# A file's tier, unless it is unit; a unit file's test that starts tools (it takes the
# run_tool fixture) is a notebook test.
FILE_TIERS = {"test_book.py": "book", "test_pdf.py": "book", "test_claims.py": "book",
              "test_browser.py": "browser", "test_slurm.py": "cluster",
              "test_perturbation.py": "notebook", "test_sweeps.py": "notebook",
              "test_fig2_fig3_notebooks.py": "notebook", "test_fig4_notebook.py": "notebook",
              "test_theory_notebooks.py": "notebook", "test_install.py": "notebook"}
TIERS = ("unit", "notebook", "book", "browser", "cluster")


def tier(item) -> str:
    path = Path(str(item.fspath))
    if path.suffix == ".ipynb" or item.get_closest_marker("notebook"):
        return "notebook"  # (marked by hand: a unit test too slow for `make check`)
    default = FILE_TIERS.get(path.name, "unit")
    return "notebook" if default == "unit" and "run_tool" in getattr(item, "fixturenames", ()) \
        else default


def notebook_order() -> dict[str, int]:
    """Each figure notebook's place in a run of them all: after every figure whose files it
    reads (its spec's ``reads``), as the pipeline orders them; otherwise by name."""
    from qkov.figures import specs

    known, order = specs(), {}

    def place(figure_id, seen=()):
        if figure_id not in order:
            if figure_id in seen:
                raise ValueError(f"figures read each other in a cycle: {seen}")
            for read in known[figure_id].reads:
                place(read.split("/")[0], (*seen, figure_id))
            order[figure_id] = len(order)
        return order[figure_id]

    for figure_id in known:
        place(figure_id)
    return order


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        item.add_marker(tier(item))
    order = notebook_order()

    def key(item):
        path = Path(str(item.fspath))
        # nbval re-executes a notebook into $QKOV_ARTIFACTS, where the notebooks that read
        # it find it: a reader runs after what it reads; the book tests run last.
        return (path.name in BOOK_TESTS, order.get(path.stem, -1) if path.suffix == ".ipynb"
                else -1)

    items.sort(key=key)  # stable: the rest keep their order


def book_artifacts() -> Path:
    """The figures' files the book is built from: this session's $QKOV_ARTIFACTS if nbval
    wrote every figure there (``make test``), else the pipeline's artifacts/ (``make
    figures``; when the book tests run alone)."""
    from qkov.figures import specs

    built = [s.id for s in specs().values() if not s.needs_dataset]
    roots = [Path(os.environ[ARTIFACTS_ENV]), REPO / "artifacts"]
    for root in roots:
        if all((root / figure_id / "summary.json").is_file() for figure_id in built):
            return root
    pytest.fail(f"no folder holds every figure's files ({', '.join(map(str, roots))}): "
                "run the book tests with nbval over notebooks/ (`make test`) or after "
                "`make figures`")


LATEXOPTS = "-interaction=nonstopmode -halt-on-error"  # a LaTeX error stops, never prompts


@pytest.fixture(scope="session")
def book_html(tmp_path_factory, run_tool):
    """A strict build (-W -n --keep-going: any warning fails) into a temporary folder, as
    `make book` does: first the PDF (where Debian's TeX is installed), which every page's
    download menu then links, then the HTML."""
    out = tmp_path_factory.mktemp("book")
    root = book_artifacts()
    if shutil.which("xelatex") and shutil.which("latexmk"):
        result = run_tool("jupyter-book", "build", REPO, "--builder", "pdflatex",
                          "--path-output", out, "-W", "-n", "--keep-going", check=False,
                          env={ARTIFACTS_ENV: str(root), "LATEXOPTS": LATEXOPTS})
        assert result.returncode == 0, f"strict PDF build failed:\n{result.stdout[-5000:]}"
    result = run_tool("jupyter-book", "build", REPO, "--path-output", out, "-W", "-n",
                      "--keep-going", check=False, env={ARTIFACTS_ENV: str(root)})
    assert result.returncode == 0, f"strict book build failed:\n{result.stdout[-5000:]}"
    return out / "_build" / "html"
