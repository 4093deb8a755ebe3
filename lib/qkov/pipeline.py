"""Execute a figure notebook with papermill and store it without volatile metadata.

    python -m qkov.pipeline run notebooks/paper-fig4.ipynb            # re-run, store in place
    python -m qkov.pipeline run NB --output out.ipynb -y "ratios: [1, 10]"
    python -m qkov.pipeline strip notebooks/*.ipynb                    # strip stored notebooks
    python -m qkov.pipeline record --since START                       # after `make figures`

The executed notebook is stripped of papermill's timestamps and durations (so the stored
notebook changes only when its results change), written to a temporary file next to the
destination and renamed into place: a failed run leaves the stored notebook untouched.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .artifacts import default_dir, repo_root, write_atomic

RECORDS = Path("benchmarks") / "results"  # relative to the repository root
FIGURES_RUN = "figures-run.json"
TEST_RUN = "test-run.json"

FIGURE_FILES = ("figure.png", "figure.pdf", "figure.svg", "data.csv", "summary.json")


@dataclass(frozen=True)
class FigureJob:
    """One figure of the pipeline: its notebook ``notebooks/<id>.ipynb`` writes
    ``artifacts/<id>/`` (FIGURE_FILES and ``extra_files``), reading ``reads`` (files other
    figures write) and using ``threads`` cores (the training notebooks: both)."""

    figure_id: str
    extra_files: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    threads: int = 2

    @property
    def notebook(self) -> str:
        return f"notebooks/{self.figure_id}.ipynb"

    @property
    def outputs(self) -> list[str]:
        return [f"artifacts/{self.figure_id}/{name}" for name in FIGURE_FILES + self.extra_files]

    @property
    def rule(self) -> str:
        return self.figure_id.replace("-", "_")


# The registry the Snakefile makes its rules from; a new figure is one line here.
FIGURE_JOBS = (
    FigureJob("paper-fig4", threads=1),
    FigureJob("paper-fig2", tuple(f"{name}.{ext}" for name in ("figure-std", "figure-trajectories")
                                  for ext in ("png", "pdf", "svg"))
              + ("heatmaps.csv", "trajectories.csv", "matched-loss.csv")),
    FigureJob("paper-fig3", ("curves.csv",)),
    FigureJob("theory-reduction", ("curves.csv",)),
    # Compares the reduced model with the trained Fig. 2 models at equal held-out loss.
    FigureJob("theory-rescaling", ("curves.csv",), threads=1,
              reads=("artifacts/paper-fig2/summary.json", "artifacts/paper-fig2/trajectories.csv")),
    FigureJob("theory-ratio-sweep", ("conditions.csv",)),
    FigureJob("language-agreement", ("heatmaps.csv", "curves.csv")),
)
FIGURE_IDS = tuple(job.figure_id for job in FIGURE_JOBS)


def _module_file(module: str, root: Path) -> Path | None:
    """The file of qkov module ``module`` ("params", "synthetic.models", "figures"), or None
    if there is no such module (a name imported from a module, not a module)."""
    base = root / "lib" / "qkov" / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported_modules(source: str, root: Path, package: str = "") -> set[str]:
    """The qkov modules a piece of code imports, as dotted names below ``qkov``: ``from qkov
    import x``, ``from qkov.x import y``, ``import qkov.x.y`` and, inside the package
    ``package`` (e.g. "synthetic"), relative imports (``from . import x``, ``from ..x import
    y``). An imported name that is a submodule counts as that module; any other name counts
    as the module it comes from."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            elif node.module == "qkov" or (node.module or "").startswith("qkov."):
                base = node.module[len("qkov."):] if node.module != "qkov" else ""
            else:
                continue
            for alias in node.names:
                name = f"{base}.{alias.name}" if base else alias.name
                if _module_file(name, root):
                    found.add(name)
                elif base:
                    found.add(base)
        elif isinstance(node, ast.Import):
            found |= {alias.name[len("qkov."):] for alias in node.names
                      if alias.name.startswith("qkov.")}
    found.discard("__version__")
    # Importing a.b runs a/__init__.py first.
    return found | {".".join(m.split(".")[:k]) for m in found for k in range(1, m.count(".") + 1)}


def library_modules(root: str | Path | None = None) -> list[str]:
    """Every qkov module (dotted, below ``qkov``; packages by their name)."""
    lib = Path(root or repo_root()) / "lib" / "qkov"
    names = []
    for path in sorted(lib.rglob("*.py")):
        parts = path.relative_to(lib).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            names.append(".".join(parts))
    return names


def library_imports(module: str, root: str | Path | None = None) -> set[str]:
    """The qkov modules that module ``module`` (e.g. "figures.paper_fig2") imports directly."""
    root = Path(root or repo_root())
    path = _module_file(module, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return _imported_modules(path.read_text(), root, package) - {module}


def library_inputs(notebook: str | Path, root: str | Path | None = None) -> list[str]:
    """The library files a notebook's results depend on: the qkov modules its code cells
    import, and theirs, transitively (relative to ``root``). Snakemake re-runs a figure
    when one of them changes, and only then: editing the book's Sphinx extension re-runs
    no training."""
    root = Path(root or repo_root())
    nb = nbformat.read(root / notebook, as_version=4)
    pending = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            source = "\n".join(line for line in cell.source.splitlines()
                               if not line.lstrip().startswith(("%", "!")))
            pending |= _imported_modules(source, root)
    seen = set()
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            pending |= library_imports(module, root) - seen
    files = {_module_file(name, root) for name in seen} | {root / "lib" / "qkov" / "__init__.py"}
    return sorted(str(path.relative_to(root)) for path in files)


# What papermill and nbclient add on every run: timestamps, durations, exceptions flags.
VOLATILE_KEYS = ["metadata.papermill", "cell.metadata.papermill", "cell.metadata.execution"]


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop volatile metadata; keep outputs, execution counts, cell ids and tags.

    The stderr of cells tagged ``remove-stderr`` (progress bars of long training cells,
    which the book hides anyway) is dropped too: it is timing noise, not a result, and
    would bloat the stored notebook. The run's log keeps it.
    """
    from nbstripout import strip_output

    nb = strip_output(nb, keep_output=True, keep_count=True, keep_id=True,
                      extra_keys=VOLATILE_KEYS)
    for cell in nb.cells:
        if "remove-stderr" in cell.get("metadata", {}).get("tags", []):
            cell.outputs = [o for o in cell.get("outputs", [])
                            if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    return nb


def store(nb: nbformat.NotebookNode, path: Path) -> None:
    write_atomic(Path(path), (nbformat.writes(strip(nb)) + "\n").encode())


def run(notebook: Path, output: Path | None = None, parameters: dict | None = None,
        cwd: Path | None = None) -> Path:
    """Execute ``notebook`` with ``parameters`` and store the result at ``output``.

    ``output`` defaults to the notebook itself: the stored outputs are the latest run.
    """
    import papermill

    notebook, output = Path(notebook), Path(output or notebook)
    with tempfile.TemporaryDirectory() as tmp:
        executed = Path(tmp) / notebook.name
        papermill.execute_notebook(
            str(notebook), str(executed), parameters=parameters or {},
            cwd=str(cwd or repo_root()), kernel_name="python3", progress_bar=False,
            log_output=True,
        )
        store(nbformat.read(executed, as_version=4), output)
    return output


def record(since: float, now: float | None = None, root: Path | None = None) -> Path | None:
    """Record a from-scratch run of every figure: its wall times, from ``summary.json``.

    ``since``: the Unix time the pipeline started. Only if every figure's summary was
    written after it (the run regenerated them all) is ``benchmarks/results/figures-run.json``
    rewritten, with the whole run's wall time (``now - since``, kernel start-ups included);
    otherwise the last full run's record stays and None is returned.
    """
    import json
    import time

    now = time.time() if now is None else now
    summaries = {f: default_dir(f) / "summary.json" for f in FIGURE_IDS}
    stale = [f for f, path in summaries.items()
             if not path.is_file() or path.stat().st_mtime < since]
    if stale:
        print(f"not recorded: {', '.join(stale)} not regenerated by this run "
              "(the record is of from-scratch runs; `make clean figures` makes one)")
        return None
    figures = {}
    for figure_id, path in summaries.items():
        try:
            summary = json.loads(path.read_text())
            provenance = summary["provenance"]
            figures[figure_id] = {"wall_time_s": provenance["wall_time_s"],
                                  "commit": provenance["commit"],
                                  "uncommitted_changes": provenance.get("uncommitted_changes")}
        except (OSError, ValueError, KeyError) as exc:
            raise SystemExit(f"{path}: not a figure summary ({exc!r})") from exc
    record = {"date": time.strftime("%Y-%m-%d", time.gmtime(now)), "machine": _machine(),
              "total_wall_time_s": round(now - since, 1), "figures": figures}
    out = _write_record(root, FIGURES_RUN, record)
    print(f"recorded the run in {out}: {record['total_wall_time_s']:.0f} s")
    return out


def _machine() -> str:
    import os
    import platform

    return f"{platform.platform()}, {os.cpu_count()} cores"


def _write_record(root: Path | None, name: str, record: dict) -> Path:
    """Write a measurement record into benchmarks/results/ atomically; its path."""
    import json

    out = Path(root or repo_root()) / RECORDS / name
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, (json.dumps(record, indent=2) + "\n").encode())
    return out


def record_test(since: float, now: float | None = None, root: Path | None = None) -> Path:
    """Record a passing test suite's wall time (``now - since``: the unit tests, nbval
    re-executing every notebook, the strict book build and the browser checks) in
    ``benchmarks/results/test-run.json``, with the commit and the machine."""
    import time

    from .artifacts import git_commit

    now = time.time() if now is None else now
    record = {"date": time.strftime("%Y-%m-%d", time.gmtime(now)), "machine": _machine(),
              "commit": git_commit(root), "wall_time_s": round(now - since, 1)}
    out = _write_record(root, TEST_RUN, record)
    print(f"recorded the test run in {out}: {record['wall_time_s']:.0f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qkov.pipeline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="execute a notebook and store it stripped")
    run_p.add_argument("notebook", type=Path)
    run_p.add_argument("--output", type=Path, help="where to store it (default: in place)")
    run_p.add_argument("-y", "--parameters-yaml", default="",
                       help='parameters as YAML, e.g. "ratios: [1, 10]"')
    strip_p = sub.add_parser("strip", help="strip volatile metadata from stored notebooks")
    strip_p.add_argument("notebooks", type=Path, nargs="+")
    record_p = sub.add_parser("record", help="record the wall times of a from-scratch run")
    record_p.add_argument("--since", type=float, required=True,
                          help="Unix time the run started")
    test_p = sub.add_parser("record-test", help="record the wall time of a passing make test")
    test_p.add_argument("--since", type=float, required=True,
                        help="Unix time the tests started")
    args = parser.parse_args(argv)

    if args.command == "run":
        import yaml

        parameters = yaml.safe_load(args.parameters_yaml) or {}
        if not isinstance(parameters, dict):
            parser.error(f"--parameters-yaml must be a mapping, got {args.parameters_yaml!r}")
        run(args.notebook, args.output, parameters)
    elif args.command == "record":
        record(args.since)
    elif args.command == "record-test":
        record_test(args.since)
    else:
        for path in args.notebooks:
            store(nbformat.read(path, as_version=4), path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
