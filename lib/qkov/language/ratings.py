"""Human-rated sentences whose words are human-rated too: the data Hutto and Gilbert (2014)
collected for VADER, shipped in the ``vaderSentiment`` 3.3.2 source package
(``additional_resources/hutto_ICWSM_2014.tar.gz``; :data:`qkov.language.sources.SOURCES`
``"vader"``). It is this companion's *proxy* for HateXplain - a classifier whose inputs carry
word-level human rationales - and never HateXplain itself:

* a sentence's class comes from the mean of its raters' scores on VADER's -4..4 scale:
  negative below ``-band``, positive above ``band``, neutral between (:func:`label_of`);
* its rationale is every word that VADER's lexicon rates at ``|valence| >= threshold`` (each
  lexicon entry is the mean of ten people's ratings of the word on its own). The ratings are
  context-free: a rationale word is one people find emotive anywhere, not one a rater
  highlighted in this sentence, as HateXplain's annotators did. "not good" marks "good".

The four corpora (tweets, movie-review, Amazon-review and New York Times editorial snippets)
are split by document: the snippets of one review or editorial (ids ``<doc>_<n>``) stay on
one side, as the agreement corpus keeps an address on one side. Malformed files fail with a
:class:`~qkov.language.data.DataError` naming the file and line.
"""

from __future__ import annotations

import random
import tarfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .data import DataError
from .sources import unpacked

ARCHIVE = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
FOLDER = "hutto_ICWSM_2014"
LEXICON = "vader_sentiment_lexicon.txt"
# The four rated corpora, as their files are named (<name>_GroundTruth.txt).
CORPORA = ("tweets", "movieReviewSnippets", "amazonReviewSnippets", "nytEditorialSnippets")
FILES = (LEXICON, *(f"{c}_GroundTruth.txt" for c in CORPORA))  # what the reader reads
SENTIMENT_LABELS = ("negative", "neutral", "positive")
NEUTRAL_BAND = 0.5  # |mean rating| at most this: neutral (the scale runs from -4 to 4)
RATIONALE_VALENCE = 1.5  # lexicon words rated at least this strongly are the rationale
# What is stripped from a word's ends before it is looked up (VADER's own tokenizer strips
# punctuation around words too); a word that is itself in the lexicon (":)") is kept whole.
PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


@dataclass(frozen=True)
class RatedSentence:
    corpus: str  # one of CORPORA
    id: str  # as in its file
    mean: float  # the raters' mean score, -4..4
    label: int  # index into SENTIMENT_LABELS
    words: tuple[str, ...]  # the sentence split on whitespace
    rationale: tuple[bool, ...]  # per word: a lexicon word of |valence| >= the threshold
    valence: float = 0.0  # the lexicon's valences of its words, summed (lexicon_valence)

    @property
    def document(self) -> str:
        """The review, editorial or tweet it comes from (what the split keeps together)."""
        return f"{self.corpus}/{self.id.split('_')[0]}"


@dataclass
class RatedData:
    train: list[RatedSentence]
    test: list[RatedSentence]
    lexicon_words: int  # entries of the lexicon
    rationale_words: int  # of them, rated at |valence| >= the threshold


def label_of(mean: float, band: float = NEUTRAL_BAND) -> int:
    """0 negative (mean < -band), 1 neutral, 2 positive (mean > band)."""
    return 0 if mean < -band else 2 if mean > band else 1


def _lines(name: str, raw: bytes, encoding: str = "utf-8"):
    """(line number, text) of a file of the archive: CRLF or LF, blank lines skipped."""
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as err:
        raise DataError(name, f"byte {err.start}", f"expected {encoding} text") from None
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield number, line


def _number(name: str, number: int, text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(name, f"line {number}", f"{what}: expected a number, got {text!r:.40}") \
            from None
    if not -4 <= value <= 4:
        raise DataError(name, f"line {number}", f"{what}: expected a rating in [-4, 4], got {value}")
    return value


def parse_lexicon(name: str, raw: bytes) -> dict[str, float]:
    """VADER's lexicon: token TAB mean valence TAB standard deviation TAB the ten ratings.
    It is Latin-1, not UTF-8: two emoticons (":-\u00de", ":\u00de") hold the byte 0xDE.
    Fifteen tokens have two entries ("lol" 2.9 and 1.8, "d:" -2.9 and 1.2, ...): the later
    one wins, as in VADER's own reader."""
    lexicon = {}
    for number, line in _lines(name, raw, "latin-1"):
        fields = line.split("\t")
        if len(fields) < 2:
            raise DataError(name, f"line {number}", "expected token<TAB>mean valence<TAB>...")
        lexicon[fields[0]] = _number(name, number, fields[1], "mean valence")
    if not lexicon:
        raise DataError(name, None, "expected lexicon entries, found none")
    return lexicon


def parse_ground_truth(name: str, raw: bytes) -> list[tuple[str, float, str]]:
    """A corpus's ratings: id TAB mean rating TAB sentence, per line."""
    out = []
    for number, line in _lines(name, raw):
        fields = line.split("\t", 2)
        if len(fields) != 3 or not fields[2].strip():
            raise DataError(name, f"line {number}", "expected id<TAB>mean rating<TAB>sentence")
        out.append((fields[0], _number(name, number, fields[1], "mean rating"), fields[2]))
    return out


def rationale_marks(words, strong: set[str]) -> tuple[bool, ...]:
    """Per word: whether it as written (an emoticon), lower-cased (VADER looks words up
    lower-cased), or also stripped of the punctuation around it, is in ``strong``."""
    return tuple(w in strong or w.lower() in strong or w.lower().strip(PUNCTUATION) in strong
                 for w in words)


def lexicon_valence(words, lexicon: dict[str, float]) -> float:
    """The summed valence of the words the lexicon rates, each looked up as
    :func:`rationale_marks` looks it up (as written, lower-cased, stripped of punctuation)."""
    total = 0.0
    for w in words:
        for form in (w, w.lower(), w.lower().strip(PUNCTUATION)):
            if form in lexicon:
                total += lexicon[form]
                break
    return total


def read_archive(path: Path | None = None) -> dict[str, bytes]:
    """The lexicon's and the corpora's files (name -> bytes), read from the nested archive
    of the fetched package (or ``path``, an archive of the same layout)."""
    path = path or unpacked("vader") / ARCHIVE
    with tarfile.open(path) as archive:
        members = {Path(m.name).name: m for m in archive.getmembers() if m.isfile()}
        missing = [w for w in FILES if w not in members]
        if missing:
            raise DataError(path, None, f"expected {', '.join(missing)} in the archive")
        return {w: archive.extractfile(members[w]).read() for w in FILES}


def load_ratings(band: float = NEUTRAL_BAND, threshold: float = RATIONALE_VALENCE,
                 train_fraction: float = 0.8, seed: int = 1234, files: dict | None = None
                 ) -> RatedData:
    """Every rated sentence, labelled and marked, split by document (``train_fraction`` of
    each corpus's documents, drawn with ``seed``, for training). ``files``: the archive's
    files as :func:`read_archive` returns them (default: read from the fetched package)."""
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction: expected a share in (0, 1), got {train_fraction!r}")
    files = files if files is not None else read_archive()
    if any(name not in files for name in FILES):
        raise DataError("files", None, f"expected {', '.join(n for n in FILES if n not in files)}"
                        " among the archive's files")
    lexicon = parse_lexicon(LEXICON, files[LEXICON])
    strong = {w for w, v in lexicon.items() if abs(v) >= threshold}
    rng = random.Random(seed)
    train, test = [], []
    for corpus in CORPORA:
        name = f"{corpus}_GroundTruth.txt"
        sentences = []
        for id_, mean, text in parse_ground_truth(name, files[name]):
            words = tuple(text.split())
            sentences.append(RatedSentence(corpus, id_, mean, label_of(mean, band), words,
                                           rationale_marks(words, strong),
                                           lexicon_valence(words, lexicon)))
        documents = sorted({s.document for s in sentences})
        rng.shuffle(documents)
        held_out = set(documents[round(train_fraction * len(documents)):])
        for s in sentences:
            (test if s.document in held_out else train).append(s)
    return RatedData(train, test, len(lexicon), len(strong))


def label_counts(sentences) -> Counter:
    return Counter(SENTIMENT_LABELS[s.label] for s in sentences)
