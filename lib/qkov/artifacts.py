"""Where a figure's set of files (:mod:`qkov.sets`) goes, and which runs may be the book's.

Where a set goes (:func:`output_dir`):
- the run's ``artifacts_dir`` parameter, when given;
- else, in the pipeline (``QKOV_PIPELINE=1``: set by the Snakefile's rules and by the test
  session), the figure's *canonical* folder
  ``artifacts/<figure-id>/``, which the book shows - and only at the figure's default
  parameters (:func:`check_canonical`);
- else a run folder of its own, ``artifacts/runs/<figure-id>-<hash of its parameters>/``:
  a reader's run with other parameters never overwrites the book's figure.
``artifacts/`` is ``$QKOV_ARTIFACTS`` when set, else that of the checkout the library runs
from, else (an installed copy, not a checkout) ``./artifacts`` of the current folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .tables import plain

ARTIFACTS_ENV = "QKOV_ARTIFACTS"


def repo_root() -> Path:
    """The checkout this library was installed from (``pip install -e .``), else the cwd."""
    candidate = Path(__file__).resolve().parents[2]
    if (candidate / "pyproject.toml").is_file() and (candidate / "lib" / "qkov").is_dir():
        return candidate
    return Path.cwd()


PIPELINE_ENV = "QKOV_PIPELINE"  # "1": this run is the pipeline's, into the canonical folder
RUNS = "runs"  # below artifacts/: the run folders of runs that are not the pipeline's


def artifacts_root(checkout: str | os.PathLike | None = None) -> Path:
    """``$QKOV_ARTIFACTS`` if set (the tests point it at a temporary folder), else the
    ``artifacts/`` of ``checkout`` (default: the checkout the library runs from, else the
    current folder: see :func:`repo_root`)."""
    root = os.environ.get(ARTIFACTS_ENV)
    return Path(root) if root else Path(checkout or repo_root()) / "artifacts"


def default_dir(figure_id: str, checkout: str | os.PathLike | None = None) -> Path:
    """``figure_id``'s canonical folder, ``artifacts/<figure-id>`` (see
    :func:`artifacts_root`), which the pipeline writes and the book shows; not created."""
    return artifacts_root(checkout) / figure_id


def pipeline_run() -> bool:
    """Whether this process runs for the pipeline (``$QKOV_PIPELINE`` is "1")."""
    return os.environ.get(PIPELINE_ENV) == "1"


def parameters_hash(parameters: Any) -> str:
    """12 hex digits naming a run's parameters (those that decide its results: not
    OUTPUT_ONLY), the same for the same values however they were written."""
    checked = ({name: getattr(parameters, name) for name in parameters.names()}
               if hasattr(parameters, "names") else given_parameters(parameters))  # [1] is [1.0]
    text = json.dumps(plain({k: v for k, v in checked.items() if k not in OUTPUT_ONLY}),
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def run_dir(figure_id: str, parameters: Any) -> Path:
    """The run folder of a run that is not the pipeline's: ``artifacts/runs/<id>-<hash>``."""
    return artifacts_root() / RUNS / f"{figure_id}-{parameters_hash(parameters)}"


def check_canonical(figure_id: str, parameters: Any) -> None:
    """A ValueError naming the parameters, unless they are the figure's defaults (apart from
    OUTPUT_ONLY and INPUT_PATHS): only those results may be the canonical set the book shows
    as the figure."""
    if not hasattr(parameters, "defaults"):
        return  # a plain mapping: no defaults to hold it to
    custom = not_canonical(parameters.given, parameters.defaults())
    if custom:
        raise ValueError(
            f"{figure_id}: the canonical folder {default_dir(figure_id)} holds the figure at "
            f"its default parameters, and this run sets {', '.join(custom)}; give the run an "
            "artifacts_dir, or run it outside the pipeline (it then writes a run folder "
            f"below {artifacts_root() / RUNS})")


def output_dir(figure_id: str, parameters: Any) -> Path:
    """Where a run of ``figure_id`` with ``parameters`` (its ``artifacts_dir`` among them)
    writes its set: see the module's docstring. Not created."""
    given = getattr(parameters, "artifacts_dir", None)
    if given is not None:
        return Path(given)  # relative to the current folder, as any command-line path
    if pipeline_run():
        check_canonical(figure_id, parameters)
        return default_dir(figure_id)
    return run_dir(figure_id, parameters)


# Parameters that change where results go or how a run is shown, not the results.
OUTPUT_ONLY = ("artifacts_dir", "progress", "workers", "allow_long")
# Parameters that say where a run reads its inputs (a dataset, another figure's summary):
# they differ from machine to machine, so a canonical set may set them.
# (Not theory-rescaling's fig2_summary: a canonical set reads paper-fig2's canonical one.)
INPUT_PATHS = ("hatexplain_dir", "agreement_tsv", "squad_train", "squad_dev", "glove_path")


def given_parameters(parameters: Any) -> dict[str, Any]:
    """A run's parameters as given: a FigureParameters' ``given``, or a plain mapping."""
    return dict(parameters.given if hasattr(parameters, "given") else parameters or {})


def differing(given: Mapping[str, Any], defaults: Mapping[str, Any],
              ignore: Sequence[str] = OUTPUT_ONLY) -> list[str]:
    """The names whose values in ``given`` and ``defaults`` differ (one missing counts),
    ``ignore`` aside."""
    return sorted(k for k in {*given, *defaults}
                  if k not in ignore and plain(given.get(k)) != plain(defaults.get(k)))


def not_canonical(given: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """The parameters that keep a run with ``given`` from being the figure's canonical set:
    those that differ from its ``defaults``, aside from OUTPUT_ONLY and INPUT_PATHS."""
    return differing(given, defaults, (*OUTPUT_ONLY, *INPUT_PATHS))


def custom_parameters(parameters: Any) -> list[str] | None:
    """The names of the parameters other than the figure's defaults, OUTPUT_ONLY aside;
    None when ``parameters`` is not a FigureParameters (its defaults are unknown)."""
    if not (hasattr(parameters, "given") and hasattr(parameters, "defaults")):
        return None
    return differing(parameters.given, parameters.defaults())
