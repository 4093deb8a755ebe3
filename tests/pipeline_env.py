"""The environment every test session runs in, notebooks alone included (a pytest plugin:
pyproject.toml loads it with ``-p pipeline_env``, so ``pytest notebooks/<id>.ipynb`` gets it
as the whole suite does; a conftest.py in tests/ would not be loaded for a notebook path).

Notebooks executed by the tests (nbval, papermill) must not overwrite the pipeline's outputs
in artifacts/: the library's default output root points at a temporary folder for the whole
session, unless $QKOV_ARTIFACTS is set. nbval re-executes the notebooks at their defaults as
the pipeline does, into the canonical folders below it, which the book tests then build
from. Kernels started by nbval inherit this environment.
"""

import os
import shutil
import tempfile

from qkov.artifacts import ARTIFACTS_ENV, PIPELINE_ENV


def pytest_configure(config):
    if ARTIFACTS_ENV not in os.environ:
        root = tempfile.mkdtemp(prefix="qkov-test-artifacts-")
        os.environ[ARTIFACTS_ENV] = root
        config._qkov_artifacts = root
    os.environ[PIPELINE_ENV] = "1"


def pytest_unconfigure(config):
    root = getattr(config, "_qkov_artifacts", None)
    if root:
        shutil.rmtree(root, ignore_errors=True)
