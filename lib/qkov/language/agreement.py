"""A synthetic subject-verb agreement task, generated from a small English-like grammar.

A sentence prefix is a subject noun phrase followed by modifiers, each a prepositional
phrase or an object relative clause, and ends where the verb would come:

    the [ADJ] SUBJECT ( PREP the [ADJ] NOUN | that the NOUN VERB )*

e.g. "the old author near the cabinets that the pilot sees". The model reads the prefix and
predicts the number of the main verb: class 0 singular ("is", VBZ), class 1 plural ("are",
VBP). The noun inside a modifier is an *attractor* when its number differs from the
subject's; a relative clause's own verb agrees with its noun, so it too points the wrong
way when its noun is an attractor. The rationale (the evidence for the label) is the
subject noun's position. Modifiers set the distance between the subject and the verb;
attractors are placed among them at random.

:func:`nearest_noun_number` reads the number of the noun nearest the verb back from the
words: where it differs from the subject's, a model that followed the nearest noun would
be wrong.

The vocabulary is the grammar's words (:data:`VOCABULARY`, a tiny word-level tokenizer:
one id per word, id 0 the padding), so no tokenizer download is involved. Generation draws
every choice for all sentences at once from a numpy generator seeded by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .batches import TokenBatch

PAD = "<pad>"
DETERMINER = "the"
COMPLEMENTIZER = "that"
ADJECTIVES = ("old", "young", "small", "happy", "tall", "quiet")
PREPOSITIONS = ("near", "behind", "with", "beside", "of", "above")
NOUNS = (("author", "authors"), ("dog", "dogs"), ("teacher", "teachers"), ("key", "keys"),
         ("cabinet", "cabinets"), ("farmer", "farmers"), ("pilot", "pilots"),
         ("painting", "paintings"), ("senator", "senators"), ("boy", "boys"))
VERBS = (("sees", "see"), ("likes", "like"), ("knows", "know"), ("finds", "find"))
LABELS = ("singular (is)", "plural (are)")  # class 0, class 1


class Vocabulary:
    """The grammar's words, one id each; id 0 is the padding."""

    def __init__(self):
        words = [PAD, DETERMINER, COMPLEMENTIZER, *ADJECTIVES, *PREPOSITIONS,
                 *(n for pair in NOUNS for n in pair), *(v for pair in VERBS for v in pair)]
        self.words = tuple(words)
        self.ids = {w: i for i, w in enumerate(words)}
        self.pad_id = 0
        # id tables indexed [choice, number] for the generator
        self.noun_ids = np.array([[self.ids[s], self.ids[p]] for s, p in NOUNS])
        self.verb_ids = np.array([[self.ids[s], self.ids[p]] for s, p in VERBS])
        self.adjective_ids = np.array([self.ids[a] for a in ADJECTIVES])
        self.preposition_ids = np.array([self.ids[p] for p in PREPOSITIONS])

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, sentence: str) -> list[int]:
        ids = []
        for position, word in enumerate(sentence.split()):
            if word not in self.ids:
                raise ValueError(f"word {position} {word!r} is not in the grammar's vocabulary")
            ids.append(self.ids[word])
        return ids

    def decode(self, ids) -> str:
        return " ".join(self.words[int(i)] for i in ids if int(i) != self.pad_id)


VOCABULARY = Vocabulary()


def _noun_number_table() -> torch.Tensor:
    table = torch.full((len(VOCABULARY),), -1, dtype=torch.long)
    for singular, plural in NOUNS:
        table[VOCABULARY.ids[singular]], table[VOCABULARY.ids[plural]] = 0, 1
    return table


NOUN_NUMBER = _noun_number_table()  # per word id: 0 a singular noun, 1 a plural one, -1 no noun


def nearest_noun_number(tokens: torch.Tensor) -> torch.Tensor:
    """Per sentence (a row of word ids, padded with id 0): the number of its last noun, the
    noun nearest the verb that follows (0 singular, 1 plural); the subject's own in a
    sentence without modifiers. A row without a noun is refused."""
    numbers = NOUN_NUMBER[tokens]
    positions = torch.arange(tokens.shape[1]).expand_as(tokens)
    last = torch.where(numbers >= 0, positions, -1).max(1).values
    if (last < 0).any():
        raise ValueError(f"tokens: row {int((last < 0).nonzero()[0])} holds no noun")
    return numbers.gather(1, last[:, None]).squeeze(1)
SLOTS_PER_MODIFIER = 5  # PREP the ADJ NOUN - or - that the NOUN VERB (an absent slot is removed)


def width(max_modifiers: int) -> int:
    """Positions a batch needs for up to ``max_modifiers`` modifiers, plus the pad position
    at which the verb's number is read (the readout "first_pad")."""
    return 3 + SLOTS_PER_MODIFIER * max_modifiers + 1


@dataclass(frozen=True)
class AgreementData(TokenBatch):
    """Agreement sentences (labels: the verb's number; rationale: the subject noun) and, per
    sentence, its modifiers (the distance), attractors and the subject's position."""

    n_modifiers: torch.Tensor | None = None  # [N] long
    n_attractors: torch.Tensor | None = None  # [N] long
    subject_position: torch.Tensor | None = None  # [N] long

    def sentences(self, limit: int | None = None) -> list[str]:
        rows = range(len(self) if limit is None else min(limit, len(self)))
        return [VOCABULARY.decode(self.tokens[i][self.attention_mask[i]]) for i in rows]


def _range(name: str, value) -> tuple[int, int]:
    low, high = (value, value) if isinstance(value, (int, np.integer)) \
        and not isinstance(value, bool) else tuple(value) if isinstance(value, (tuple, list)) \
        else (None, None)
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (low, high)) \
            or not 0 <= low <= high:
        raise ValueError(f"{name}: expected an integer >= 0 or a pair (low, high) with "
                         f"0 <= low <= high, got {value!r}")
    return int(low), int(high)


def _probability(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name}: expected a probability in [0, 1], got {value!r}")
    return float(value)


def generate(n: int, seed: int, *, modifiers=(0, 3), attractors=None, attractor_prob: float = 0.5,
             relative_clause_prob: float = 0.5, adjective_prob: float = 0.5,
             positions: int | None = None) -> AgreementData:
    """``n`` sentences, each with a number of modifiers drawn uniformly from ``modifiers``
    (an integer, or an inclusive pair (low, high)).

    ``attractors``: None - each modifier's noun is an attractor with probability
    ``attractor_prob``; an integer a - exactly a attractors per sentence, among its modifiers
    at random (every sentence needs at least a modifiers); a pair - a count drawn uniformly
    from it, capped at the sentence's modifiers. Subjects are singular or plural with equal
    probability. ``positions``: the width of the batch (default :func:`width` of the largest
    modifier count), so that sets drawn separately share one model.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n: expected an integer >= 1, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
    low, high = _range("modifiers", modifiers)
    attractor_prob = _probability("attractor_prob", attractor_prob)
    relative_clause_prob = _probability("relative_clause_prob", relative_clause_prob)
    adjective_prob = _probability("adjective_prob", adjective_prob)
    if attractors is not None:
        a_low, a_high = _range("attractors", attractors)
        if isinstance(attractors, (int, np.integer)) and a_low > low:
            raise ValueError(f"attractors: {a_low} per sentence needs at least {a_low} modifiers, "
                             f"but modifiers allows {low}")
    positions = width(high) if positions is None else positions
    if isinstance(positions, bool) or not isinstance(positions, (int, np.integer)) \
            or positions < width(high):
        raise ValueError(f"positions: expected an integer >= {width(high)} (width for {high} "
                         f"modifiers), got {positions!r}")

    rng = np.random.default_rng(seed)
    V = VOCABULARY
    number = rng.integers(0, 2, n)  # the subject's number: the label
    m = rng.integers(low, high + 1, n)
    present = np.arange(high)[None, :] < m[:, None]  # [n, high] which modifier slots exist
    if attractors is None:
        attract = (rng.random((n, high)) < attractor_prob) & present
    else:
        count = rng.integers(a_low, a_high + 1, n).clip(max=m) if not isinstance(
            attractors, (int, np.integer)) else np.full(n, a_low)
        # a random subset of `count` existing modifiers: rank existing slots by random keys
        keys = np.where(present, rng.random((n, high)), np.inf)
        rank = np.argsort(np.argsort(keys, 1), 1)
        attract = (rank < count[:, None]) & present
    relative = rng.random((n, high)) < relative_clause_prob
    noun_number = np.where(attract, 1 - number[:, None], number[:, None])

    columns = [np.full(n, V.ids[DETERMINER]), V.adjective_ids[rng.integers(0, len(ADJECTIVES), n)],
               V.noun_ids[rng.integers(0, len(NOUNS), n), number]]
    keep = [np.ones(n, bool), rng.random(n) < adjective_prob, np.ones(n, bool)]
    subject_column = 2
    for j in range(high):
        rc, exists = relative[:, j], present[:, j]
        head = np.where(rc, V.ids[COMPLEMENTIZER],
                        V.preposition_ids[rng.integers(0, len(PREPOSITIONS), n)])
        adjective = V.adjective_ids[rng.integers(0, len(ADJECTIVES), n)]
        noun = V.noun_ids[rng.integers(0, len(NOUNS), n), noun_number[:, j]]
        verb = V.verb_ids[rng.integers(0, len(VERBS), n), noun_number[:, j]]
        adjective_here = ~rc & (rng.random(n) < adjective_prob)
        columns += [head, np.full(n, V.ids[DETERMINER]), adjective, noun, verb]
        keep += [exists, exists, exists & adjective_here, exists, exists & rc]

    tokens = torch.as_tensor(np.stack(columns, 1), dtype=torch.long)
    keep = torch.as_tensor(np.stack(keep, 1))
    # Close up the absent slots, keeping the order (a stable sort puts kept columns first).
    order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices
    tokens, mask = tokens.gather(1, order), keep.gather(1, order)
    subject = (order == subject_column).nonzero()[:, 1]
    pad = positions - tokens.shape[1]
    tokens = torch.nn.functional.pad(tokens.masked_fill(~mask, V.pad_id), (0, pad), value=V.pad_id)
    mask = torch.nn.functional.pad(mask, (0, pad), value=False)
    rationale = torch.zeros_like(mask)
    rationale[torch.arange(n), subject] = True
    return AgreementData(tokens=tokens, attention_mask=mask,
                         labels=torch.as_tensor(number, dtype=torch.long),
                         rationale=rationale,
                         n_modifiers=torch.as_tensor(m, dtype=torch.long),
                         n_attractors=torch.as_tensor(attract.sum(1), dtype=torch.long),
                         subject_position=subject)
