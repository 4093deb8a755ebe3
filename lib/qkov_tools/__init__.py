"""qkov_tools: the build tooling around the science package ``qkov``.

``qkov`` computes and draws the figures and needs only its runtime dependencies (torch,
numpy, scipy, matplotlib, tqdm, tokenizers). What runs and records them lives here and needs
the ``tools`` extra (``pip install -e '.[tools]'``; ``.[dev]`` includes it):

- ``notebooks``: execute a figure notebook with papermill and store it stripped of volatile
  metadata (``python -m qkov_tools run|strip``);
- ``imports``: which library files a notebook's results depend on (the Snakefile's rule
  inputs), from the import graph (the layers are import-linter's contract in
  pyproject.toml);
- ``records``: the measured records of a from-scratch ``make figures`` and of a passing
  ``make test`` in ``benchmarks/results/`` (``python -m qkov_tools record|record-test``);
- ``sweeps``: many runs of one figure notebook declared in ``sweeps/<name>.yaml``
  (``python -m qkov_tools.sweeps``).

The book's Sphinx extension is in ``book/_ext/``; the figures are the figure modules, each
with its ``SPEC`` (``qkov.figures.specs()``).
"""

from importlib.util import find_spec

# Fail on import, naming what is missing, rather than deep inside a run.
# module: the distribution that provides it
_NEEDS = {"nbformat": "nbformat", "nbstripout": "nbstripout", "papermill": "papermill",
          "yaml": "pyyaml", "grimp": "grimp"}
_MISSING = [dist for module, dist in _NEEDS.items() if find_spec(module) is None]
if _MISSING:
    raise ImportError(f"qkov_tools needs the 'tools' extra (pip install -e '.[tools]'); "
                      f"missing: {', '.join(_MISSING)}")
