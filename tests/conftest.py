"""Shared test set-up: the tools fixture, the tiers, the figures' files the book tests read.
The session's environment is tests/pipeline_env.py's (notebooks validated alone get it too)."""

import os
import shutil
import subprocess
import sys
from graphlib import TopologicalSorter
from pathlib import Path

import pytest

from qkov.artifacts import ARTIFACTS_ENV

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def run_tool():
    """Run a command-line tool of the project's environment (papermill, snakemake, ...)."""

    def run(tool, *args, cwd=REPO, check=True, timeout=600, env=None):
        result = subprocess.run([str(BIN / tool), *map(str, args)], cwd=cwd, text=True,
                                capture_output=True, timeout=timeout,
                                env=None if env is None else {**os.environ, **env})
        assert not check or result.returncode == 0, (
            f"{tool} {' '.join(map(str, args))} exited {result.returncode}\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result

    return run


# Test tiers (pytest markers; `make check` runs the unit tier). A test is in its file's tier
# here, else unit; but a notebook, a test marked notebook by hand or a unit test that starts
# tools (it takes run_tool) is a notebook test. The book and browser tiers read the figures'
# files: they run last, after nbval has re-executed every notebook into $QKOV_ARTIFACTS.
TIERS = {"unit": "in-process tests of the library",
         "notebook": "notebooks and tools run in subprocesses (nbval, papermill, Snakemake)",
         "book": "the strict book build", "browser": "the built book in headless Chromium",
         "cluster": "a single-node SLURM"}
FILE_TIERS = {"test_book.py": "book", "test_pdf.py": "book", "test_claims.py": "book",
              "test_browser.py": "browser", "test_slurm.py": "cluster",
              "test_perturbation.py": "notebook", "test_sweeps.py": "notebook",
              "test_fig2_fig3_notebooks.py": "notebook", "test_fig4_notebook.py": "notebook",
              "test_theory_notebooks.py": "notebook", "test_install.py": "notebook"}


def pytest_configure(config):
    for name, doc in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def pytest_collection_modifyitems(items):
    from qkov.figures import specs

    for item in items:
        tier = FILE_TIERS.get(item.path.name, "unit")
        item.add_marker("notebook" if item.path.suffix == ".ipynb" or item.get_closest_marker(
            "notebook") or tier == "unit" and "run_tool" in getattr(item, "fixturenames", ())
            else tier)
    # nbval re-executes each notebook into $QKOV_ARTIFACTS: after those whose files it reads.
    order = {figure: k for k, figure in enumerate(TopologicalSorter(
        {f: {read.split("/")[0] for read in s.reads} for f, s in specs().items()}).static_order())}
    items.sort(key=lambda item: (FILE_TIERS.get(item.path.name) in ("book", "browser"), order.get(
        item.path.stem, -1) if item.path.suffix == ".ipynb" else -1))


def book_artifacts() -> Path:
    """This session's $QKOV_ARTIFACTS if nbval wrote every figure there, else artifacts/."""
    from qkov.figures import specs

    roots = [Path(os.environ[ARTIFACTS_ENV]), REPO / "artifacts"]
    for root in roots:
        if all((root / s.id / "summary.json").is_file() for s in specs().values()
               if not s.needs_dataset):
            return root
    pytest.fail(f"no folder holds every figure's files ({', '.join(map(str, roots))}): run the "
                "book tests with nbval over notebooks/ (`make test`) or after `make figures`")


@pytest.fixture(scope="session")
def book_html(tmp_path_factory, run_tool):
    """A strict build into a temporary folder as `make book` does: the PDF (if TeX), then the HTML."""
    if os.environ.get("QKOV_BOOK_HTML"):  # a book built already (its _build/html), to iterate
        return Path(os.environ["QKOV_BOOK_HTML"])
    out, env = tmp_path_factory.mktemp("book"), {ARTIFACTS_ENV: str(book_artifacts())}
    builds = [["--builder", "pdflatex"]] if shutil.which("xelatex") and shutil.which("latexmk") else []
    for builder in [*builds, []]:
        result = run_tool("jupyter-book", "build", REPO, *builder, "--path-output", out, "-W", "-n",
                          "--keep-going", check=False, env={
                              **env, "LATEXOPTS": "-interaction=nonstopmode -halt-on-error"})
        assert result.returncode == 0, f"strict build failed:\n{result.stdout[-5000:]}"
    return out / "_build" / "html"
