"""The full-scale check of a stored trained notebook, run by hand before it is stored (CI does
not pay for it): the notebook runs again at its stored scale, as the pipeline runs it, under
roundings other than the one that stored it - torch's scalar kernels and a second MKL code
path - and must print what the stored notebook prints, under nbval's contract
(tests/nbval_tolerance.py). Where it does, a record goes to tests/full-scale/<figure-id>.json:
the figure, the digest of the stored outputs it was compared with, the environments and the
machine. tests/test_full_scale.py fails where a trained notebook's record does not match its
current outputs, so a re-stored notebook needs a new check.

A cell tagged ``rounding-sensitive`` is exempt: nbval compares it exactly (`import qkov`
pins the kernels, so every CPU with AVX2 computes the stored bits), but its numbers come from
runs that amplify the last bits of rounding (fast query-key learning does), so another
rounding may move them; the record lists, per environment, those that moved. The notebook
says so above them, and the book calls them one draw.

A reduced run can be too short to show rounding that fast QK learning amplifies late in
training (real-sentiment at a multiple of 30); tests/test_perturbation.py keeps the reduced
runs for what they catch cheaply.

    .venv/bin/python tests/full_scale.py real-sentiment [more figure ids]

It reads the canonical artifacts/ of the figures a figure reads (run `make figures` first)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from nbval_tolerance import (  # noqa: E402
    IGNORE_TAG,
    TOLERANCE_TAG,
    _fields,
    output_differences,
    sanitize_patterns,
)

RECORDS = REPO / "tests" / "full-scale"
ROUNDING_TAG = "rounding-sensitive"
SANITIZE = REPO / "tests" / "nbval-sanitize.cfg"
# The roundings a stored notebook must survive, beside the one that stored it (the AVX2
# kernels and MKL path `import qkov` pins): torch's kernels without vector instructions, and
# MKL's SSE4.2 path.
ENVIRONMENTS = {
    "scalar kernels": {"ATEN_CPU_CAPABILITY": "default"},
    "MKL's SSE4.2 path": {"MKL_CBWR": "SSE4_2,STRICT"},
}
# The figures whose notebooks train models (their results carry the training's rounding),
# theory-reduction's gradient descent on the stylized model included.
TRAINED = ("paper-fig2", "paper-fig3", "fig2-controls", "theory-ratio-sweep", "theory-shortcut",
           "theory-reduction", "language-agreement", "real-agreement", "real-sentiment")


def notebook_path(figure_id: str) -> Path:
    return REPO / "notebooks" / f"{figure_id}.ipynb"


def record_path(figure_id: str) -> Path:
    return RECORDS / f"{figure_id}.json"


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"
            and "injected-parameters" not in c.metadata.get("tags", [])]


def outputs_digest(nb) -> str:
    """SHA-256 of what nbval compares in the notebook's outputs (text and data, images aside,
    after nbval's sanitizing), cell by cell."""
    masks = sanitize_patterns(SANITIZE)
    fields = []
    for cell in code_cells(nb):
        texts = []
        for kind, key, text in _fields(cell.outputs):
            for pattern, replacement in masks:
                text = pattern.sub(replacement, text)
            texts.append([kind, key, text])
        fields.append(texts)
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def differences(stored, fresh) -> list[str]:
    """Where ``fresh`` prints otherwise than ``stored`` beyond nbval's contract (the cells
    nbval compares: untagged cells exactly, tolerance cells within the tolerance), the cells
    tagged ``rounding-sensitive`` aside."""
    masks, found = sanitize_patterns(SANITIZE), []
    for index, (a, b) in enumerate(zip(code_cells(stored), code_cells(fresh), strict=True)):
        tags = a.metadata.get("tags", [])
        if ROUNDING_TAG in tags:
            continue
        if IGNORE_TAG not in tags or TOLERANCE_TAG in tags:
            found += [f"code cell {index}: {d}" for d in
                      output_differences(b.outputs, a.outputs, masks, TOLERANCE_TAG in tags)]
    return found


def sensitive_differences(stored, fresh) -> list[int]:
    """The code cells tagged ``rounding-sensitive`` whose outputs ``fresh`` prints otherwise
    than ``stored``: what another rounding moves there."""
    masks, found = sanitize_patterns(SANITIZE), []
    for index, (a, b) in enumerate(zip(code_cells(stored), code_cells(fresh), strict=True)):
        if ROUNDING_TAG in a.metadata.get("tags", []) and output_differences(
                b.outputs, a.outputs, masks, False):
            found.append(index)
    return found


def run_notebook(figure_id: str, variables: dict, folder: Path):
    """The stored notebook run again as the pipeline runs it (its defaults, its canonical
    folder under a temporary $QKOV_ARTIFACTS holding the figures it reads), with ``variables``
    set before torch starts."""
    import nbformat

    from qkov.artifacts import ARTIFACTS_ENV, PIPELINE_ENV
    from qkov.figures import module, specs
    from qkov_tools.notebooks import strip

    root = folder / "artifacts"
    for read in sorted({r.split("/")[0] for r in specs()[figure_id].reads}):
        source = REPO / "artifacts" / read
        if not (source / "summary.json").is_file():
            raise SystemExit(f"{figure_id} reads {read}, which artifacts/ lacks: run `make figures`")
        shutil.copytree(source, root / read)
    output = folder / f"{figure_id}.ipynb"
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    env |= {PIPELINE_ENV: "1", ARTIFACTS_ENV: str(root), **variables}
    # progress bars off where a figure has them (stderr, never stored)
    quiet = ["-p", "progress", "False"] if "progress" in module(figure_id).Parameters.names() else []
    subprocess.run([sys.executable, "-m", "papermill", "--no-progress-bar", *quiet,
                    notebook_path(figure_id), output], check=True, env=env, cwd=REPO)
    return strip(nbformat.read(output, as_version=4))  # as the pipeline stores it


def machine() -> str:
    import torch

    from qkov.provenance import cpu_model

    return (f"{cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__}, kernels "
            f"{torch.backends.cpu.get_cpu_capability()}")


def check(figure_id: str) -> bool:
    """Run the check of one figure; write its record if every environment agrees."""
    import nbformat

    if figure_id not in TRAINED:
        raise SystemExit(f"{figure_id!r}: not a trained figure (expected one of {', '.join(TRAINED)})")
    stored = nbformat.read(notebook_path(figure_id), as_version=4)
    digest = outputs_digest(stored)
    checked, failed = {}, []
    for name, variables in ENVIRONMENTS.items():
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="qkov-full-scale-") as tmp:
            fresh = run_notebook(figure_id, variables, Path(tmp))
        found = differences(stored, fresh)
        seconds = round(time.perf_counter() - started)
        print(f"{figure_id}, {name}: {'same' if not found else 'DIFFERS'} ({seconds} s)", flush=True)
        if found:
            failed.append(f"{figure_id} under {name} ({variables}):\n" + "\n\n".join(found))
        checked[name] = {"variables": variables, "seconds": seconds,
                         "rounding_sensitive_cells_that_differ": sensitive_differences(stored, fresh)}
    if failed:
        print("\n\n".join(failed), file=sys.stderr)
        return False
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    record = {"figure": figure_id, "outputs_sha256": digest,
              "result": "every environment prints what the stored notebook prints, under "
                        "nbval's contract, but in the cells tagged rounding-sensitive",
              "environments": checked, "machine": machine(),
              "date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": commit or None}
    RECORDS.mkdir(exist_ok=True)
    record_path(figure_id).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {record_path(figure_id).relative_to(REPO)}")
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser("tests/full_scale.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("figures", nargs="+", help=f"trained figure ids: {', '.join(TRAINED)}")
    args = parser.parse_args(argv)
    return 0 if all([check(figure_id) for figure_id in args.figures]) else 1


if __name__ == "__main__":
    sys.exit(main())
