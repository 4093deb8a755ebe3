"""Shared test set-up.

Notebooks executed by the tests (nbval, papermill) must not overwrite the pipeline's outputs
in artifacts/: point the library's default output root at a temporary folder for the whole
session. Kernels started by nbval inherit this environment.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from qkov.artifacts import ARTIFACTS_ENV

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def pytest_configure(config):
    if ARTIFACTS_ENV not in os.environ:
        root = tempfile.mkdtemp(prefix="qkov-test-artifacts-")
        os.environ[ARTIFACTS_ENV] = root
        config._qkov_artifacts = root


def pytest_unconfigure(config):
    root = getattr(config, "_qkov_artifacts", None)
    if root:
        shutil.rmtree(root, ignore_errors=True)


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
