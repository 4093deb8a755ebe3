"""Where a figure's set goes: its ``artifacts_dir``; else, in the pipeline (``QKOV_PIPELINE=1``)
and at the defaults only, the canonical ``artifacts/<figure-id>/`` the book shows; else a run
folder ``artifacts/runs/<figure-id>-<hash>/``. ``artifacts/``: ``$QKOV_ARTIFACTS`` or the checkout's."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .tables import plain

ARTIFACTS_ENV = "QKOV_ARTIFACTS"
PIPELINE_ENV = "QKOV_PIPELINE"
RUNS = "runs"
# Parameters that change where results go or how a run is shown, not the results.
OUTPUT_ONLY = ("artifacts_dir", "progress", "workers", "allow_long")
# Where a run reads its inputs: they differ between machines, so a canonical set may set them.
INPUT_PATHS = ("hatexplain_dir", "agreement_tsv", "squad_train", "squad_dev", "glove_path")


def repo_root() -> Path:
    """The checkout this library was installed from (``pip install -e .``), else the cwd."""
    candidate = Path(__file__).resolve().parents[2]
    if (candidate / "pyproject.toml").is_file() and (candidate / "lib" / "qkov").is_dir():
        return candidate
    return Path.cwd()


def artifacts_root(checkout: str | os.PathLike | None = None) -> Path:
    return Path(os.environ.get(ARTIFACTS_ENV) or Path(checkout or repo_root()) / "artifacts")


def default_dir(figure_id: str, checkout: str | os.PathLike | None = None) -> Path:
    return artifacts_root(checkout) / figure_id


def output_dir(figure_id: str, parameters: Any) -> Path:
    if parameters.artifacts_dir is not None:
        return Path(parameters.artifacts_dir)
    if os.environ.get(PIPELINE_ENV) != "1":  # named by the values that decide the results
        checked = {name: getattr(parameters, name) for name in parameters.names()
                   if name not in OUTPUT_ONLY}  # as checked: [1] and [1.0] alike
        text = json.dumps(plain(checked), sort_keys=True, separators=(",", ":"))
        return artifacts_root() / RUNS / f"{figure_id}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    custom = not_canonical(parameters.given, parameters.defaults())
    if custom:
        raise ValueError(
            f"{figure_id}: the canonical folder {default_dir(figure_id)} holds the figure at "
            f"its default parameters, and this run sets {', '.join(custom)}; give the run an "
            "artifacts_dir, or run it outside the pipeline (it then writes a run folder "
            f"below {artifacts_root() / RUNS})")
    return default_dir(figure_id)


def differing(given, defaults, ignore=OUTPUT_ONLY) -> list[str]:
    return sorted(k for k in {*given, *defaults}
                  if k not in ignore and plain(given.get(k)) != plain(defaults.get(k)))


def not_canonical(given, defaults) -> list[str]:
    """What keeps a run from being the canonical set."""
    return differing(given, defaults, (*OUTPUT_ONLY, *INPUT_PATHS))


def custom_parameters(parameters: Any) -> list[str] | None:
    """The parameters other than the defaults; None for a plain mapping."""
    return differing(parameters.given, parameters.defaults()) if hasattr(parameters, "defaults") else None
