"""The record of a passing test session (a plugin, loaded in pyproject.toml's addopts, since a
conftest.py's hooks see only the tests under its own folder, not notebooks/): where
QKOV_TEST_RECORD names a file (`make test` sets artifacts/test-run.json), the session's wall
time, each tier's time (its tests' setup, call and teardown added up: the tests run one after
another) and test count, and the slowest tests (a notebook's cells as one); the book's
reproduce page shows it. Written only when every test passed."""

import json
import os
import platform
import subprocess
import time
from collections import defaultdict
from pathlib import Path

RECORD_ENV = "QKOV_TEST_RECORD"
SLOWEST = 25  # the reproduce page shows the first five; the rest show where time goes
REPO = Path(__file__).resolve().parents[1]

times: dict[str, float] = defaultdict(float)  # test id -> seconds
ran: set[str] = set()  # the tests whose call ran (not skipped)
tiers: dict[str, str] = {}  # test id -> tier
started = time.time()


def pytest_runtest_logreport(report):
    times[report.nodeid] += report.duration
    if report.when == "call":
        ran.add(report.nodeid)


def pytest_collection_finish(session):
    from conftest import TIERS

    for item in session.items:
        tiers[item.nodeid] = next((m.name for m in item.iter_markers() if m.name in TIERS), "unit")


def run_record(exitstatus: int) -> dict | None:
    """What a passing session records (None if it did not pass or ran no test)."""
    from conftest import TIERS
    from qkov import provenance

    if exitstatus != 0 or not ran:
        return None
    by_tier = {tier: {"tests": 0, "seconds": 0.0} for tier in TIERS}
    for nodeid, seconds in times.items():
        tier = by_tier[tiers.get(nodeid, "unit")]
        tier["tests"] += nodeid in ran
        tier["seconds"] = round(tier["seconds"] + seconds, 1)
    # nbval's tests are a notebook's cells: the slowest lists a notebook as one
    merged = defaultdict(float)
    for nodeid, seconds in times.items():
        path = nodeid.split("::")[0]
        merged[path if path.endswith(".ipynb") else nodeid] += seconds
    slowest = sorted(merged.items(), key=lambda item: -item[1])[:SLOWEST]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    return {"date": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": f"{provenance.cpu_model()}, {os.cpu_count()} cores ({platform.system()} "
                       f"{platform.release()} {platform.machine()})",
            "commit": commit or None, "wall_time_s": round(time.time() - started),
            "tiers": {name: t for name, t in by_tier.items() if t["seconds"] or t["tests"]},
            "slowest": [{"test": nodeid, "seconds": round(seconds, 1)}
                        for nodeid, seconds in slowest]}


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get(RECORD_ENV)
    record = run_record(int(exitstatus))
    if path and record:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(record, indent=1) + "\n")
