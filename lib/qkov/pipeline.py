"""Execute a figure notebook with papermill and store it without volatile metadata.

    python -m qkov.pipeline run notebooks/paper-fig4.ipynb            # re-run, store in place
    python -m qkov.pipeline run NB --output out.ipynb -y "ratios: [1, 10]"
    python -m qkov.pipeline strip notebooks/*.ipynb                    # strip stored notebooks

The executed notebook is stripped of papermill's timestamps and durations (so the stored
notebook changes only when its results change), written to a temporary file next to the
destination and renamed into place: a failed run leaves the stored notebook untouched.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import nbformat

from .artifacts import repo_root, write_atomic

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
    args = parser.parse_args(argv)

    if args.command == "run":
        import yaml

        parameters = yaml.safe_load(args.parameters_yaml) or {}
        if not isinstance(parameters, dict):
            parser.error(f"--parameters-yaml must be a mapping, got {args.parameters_yaml!r}")
        run(args.notebook, args.output, parameters)
    else:
        for path in args.notebooks:
            store(nbformat.read(path, as_version=4), path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
