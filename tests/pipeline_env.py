"""The session's environment, also for ``pytest notebooks/<id>.ipynb`` (a plugin, not conftest.py):
the pipeline's mode, writing to a temporary $QKOV_ARTIFACTS (unless set), never to artifacts/."""

import os
import shutil
import tempfile

from qkov.artifacts import ARTIFACTS_ENV, PIPELINE_ENV


def pytest_configure(config):
    os.environ[PIPELINE_ENV] = "1"  # kernels started by nbval inherit the environment
    if ARTIFACTS_ENV not in os.environ:
        config.qkov_artifacts = os.environ[ARTIFACTS_ENV] = tempfile.mkdtemp(prefix="qkov-test-")


def pytest_unconfigure(config):
    shutil.rmtree(getattr(config, "qkov_artifacts", "/nonexistent"), ignore_errors=True)
