"""The record of a passing ``make test`` (``artifacts/test-run.json``: its wall time, commit
and machine), which the book's reproducibility page shows. It is not committed: a timing is
a record of one machine's run, never an input (each figure's own times are in its
``summary.json``)."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from qkov.artifacts import repo_root
from qkov.provenance import git_commit
from qkov.sets import write_atomic

TEST_RUN = Path("artifacts") / "test-run.json"  # relative to the repository root


def record_test(since: float, now: float | None = None, root: Path | None = None) -> Path:
    """Record a passing test suite's wall time (``now - since``: the unit tests, nbval
    re-executing every notebook, the strict book build and the browser checks) in
    ``artifacts/test-run.json``, with the commit and the machine."""
    now = time.time() if now is None else now
    record = {"date": time.strftime("%Y-%m-%d", time.gmtime(now)),
              "machine": f"{platform.platform()}, {os.cpu_count()} cores",
              "commit": git_commit(root), "wall_time_s": round(now - since, 1)}
    out = Path(root or repo_root()) / TEST_RUN
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, (json.dumps(record, indent=2) + "\n").encode())
    print(f"recorded the test run in {out}: {record['wall_time_s']:.0f} s")
    return out
