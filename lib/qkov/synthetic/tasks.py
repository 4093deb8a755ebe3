"""The synthetic next-token task of paper Figs. 2 and 3.

Vocabulary of ``V = 50`` one-hot tokens and 4 classes. Tokens 0-9 are common to all
classes; class ``c`` owns the 10 *distinct* tokens ``10(c+1) .. 10(c+2)-1``. A sequence of
length ``T``: ``T-2`` context tokens i.i.d. from the class distribution (weight 1 on each
common token, weights 0.1, 0.2, ..., 1.0 on the class's distinct tokens), then the query
token ``5+c``, then the target ``1+c``. The model reads the first ``T-1`` tokens and
predicts the last.

The model has no positional information, so the bag of token counts of the ``T-1`` read
tokens (plus the class, which fixes the query and the target) is a sufficient statistic:
:class:`CountBatch` carries it, and :class:`TokenBatch` the dense sequences it summarises.

**The query-token shortcut.** The query attends to its own position too, which holds the
query token ``5+c``: under near-uniform attention that one position is a class-specific
excess of token ``5+c`` (its copies in the context occur equally in every class), and a fast
QK circuit can turn it into a second route to the answer. The causal test of the theory
chapter cuts it (``cut``, :data:`CUTS`): ``"self"`` - the query does not attend to its own
position, only to the ``T-2`` context positions, on the same data; ``"context"`` - besides,
the context is drawn from the class distribution with the query token's weight set to 0 (the
other weights renormalised), which also makes the other three query tokens slightly more
frequent in the class's context than in the others'.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from .. import seeding

VOCAB = 50
# The task of paper Fig. 2 ("none"), and the cuts of the query-token shortcut (see above).
CUTS = ("none", "self", "context")


def check_cut(cut: str) -> str:
    if cut not in CUTS:
        raise ValueError(f"parameter 'cut': expected one of {CUTS}, got {cut!r}")
    return cut


N_CLASSES = 4
N_COMMON = 10
N_DISTINCT = 10


def query_token(c):
    return 5 + c


def target_token(c):
    return 1 + c


def distinct_tokens(c: int) -> range:
    return range(N_COMMON * (c + 1), N_COMMON * (c + 2))


def class_distributions() -> torch.Tensor:
    """(4, 50) float64: row c is the context distribution of class c."""
    weights = torch.zeros(N_CLASSES, VOCAB, dtype=torch.float64)
    weights[:, :N_COMMON] = 1.0
    ramp = torch.arange(1, N_DISTINCT + 1, dtype=torch.float64) / 10
    for c in range(N_CLASSES):
        weights[c, distinct_tokens(c).start:distinct_tokens(c).stop] = ramp
    return weights / weights.sum(1, keepdim=True)


_SLOTS = 10 * N_COMMON + sum(range(1, N_DISTINCT + 1))  # tenths of weight per class: 155


def slots(cut: str = "none") -> int:
    """Tenths of context weight per class: 155, or 145 without the query token's 10."""
    return _SLOTS - 10 if check_cut(cut) == "context" else _SLOTS


@functools.cache
def _slot_tables(cut: str = "none") -> torch.Tensor:
    """(4, slots(cut)) int64: token of each tenth of weight; token v fills weight(v) * 10
    slots (none for the query token 5+c where the cut keeps it out of the context)."""
    tables = []
    for c in range(N_CLASSES):
        tokens = [v for v in range(N_COMMON) for _ in range(10)
                  if cut != "context" or v != query_token(c)]
        tokens += [v for j, v in enumerate(distinct_tokens(c)) for _ in range(j + 1)]
        tables.append(tokens)
    return torch.tensor(tables)


def support_tokens() -> torch.Tensor:
    """(4, 20) int64: row c lists the tokens a sequence of class c can hold, common first."""
    return torch.tensor([list(range(N_COMMON)) + list(distinct_tokens(c))
                         for c in range(N_CLASSES)])


def uniform_distinct_share(cut: str = "none", T: int | None = None) -> float:
    """The attention mass uniform attention puts on the distinct tokens, in expectation.

    Their share of a class's context weight is 5.5 / 15.5 (5.5 / 14.5 where the cut keeps the
    query token out of the context); with ``T`` given, times the context's share of the
    attended positions: (T - 2) / (T - 1) in the paper's task, where the query also attends to
    its own position (a common token), and 1 where the cut masks that position."""
    share = sum(range(1, N_DISTINCT + 1)) / slots(cut)
    if T is not None and cut == "none":
        share *= (check_length(T) - 2) / (T - 1)
    return share


def distinct_mask() -> torch.Tensor:
    """(4, 50) bool: row c marks class c's distinct tokens."""
    mask = torch.zeros(N_CLASSES, VOCAB, dtype=torch.bool)
    for c in range(N_CLASSES):
        mask[c, distinct_tokens(c).start:distinct_tokens(c).stop] = True
    return mask


def check_length(T: int) -> int:
    if isinstance(T, bool) or not isinstance(T, int) or T < 3:
        raise ValueError(f"parameter 'T': expected an integer sequence length >= 3, got {T!r}")
    return T


@dataclass
class CountBatch:
    """A batch as the model needs it: per sequence the class and the counts of read tokens.

    counts: (B, 50) float32, summing to T-1 per row (context tokens plus the query token).
    """

    classes: torch.Tensor  # (B,) int64
    counts: torch.Tensor  # (B, 50) float32

    @property
    def queries(self) -> torch.Tensor:
        return query_token(self.classes)

    @property
    def targets(self) -> torch.Tensor:
        return target_token(self.classes)


@dataclass
class TokenBatch:
    """Dense sequences: tokens (B, T) int64, the last column being the target."""

    classes: torch.Tensor
    tokens: torch.Tensor

    @property
    def inputs(self) -> torch.Tensor:
        return self.tokens[:, :-1]

    @property
    def targets(self) -> torch.Tensor:
        return self.tokens[:, -1]

    def to_counts(self, cut: str = "none") -> CountBatch:
        """The bag of tokens the query attends to (with a cut: the context only)."""
        return _counts(self.classes, self.tokens[:, :-2], cut)


def sample_classes(generator: torch.Generator, batch: int, per_class: bool = False):
    """Uniform classes, or ``batch`` sequences of each class in turn (``per_class``)."""
    if per_class:
        return torch.arange(N_CLASSES).repeat_interleave(batch)
    return torch.randint(N_CLASSES, (batch,), generator=generator)


def _draw_slots(generator: torch.Generator, batch: int, T: int, per_class: bool,
                repeats: int = 1, cut: str = "none") -> tuple[torch.Tensor, torch.Tensor]:
    """(classes, slots (rows, T-2)) of ``repeats`` consecutive batches: context token l of
    row r is ``_slot_tables(cut)[classes[r], slots[r, l]]``.

    One call draws what ``repeats`` calls of ``batch`` rows would (the generator is read in
    the same order), so a stream can sample many batches at once.
    """
    check_length(T)
    if per_class:  # classes are not random: every batch holds ``batch`` of each in turn
        classes = sample_classes(generator, batch, True).repeat(repeats)
    else:
        classes = sample_classes(generator, batch * repeats)
    # Every weight is a whole number of tenths (155 in all per class), so a uniform slot
    # among 155 looked up in a table is an exact draw, and far faster than multinomial.
    return classes, torch.randint(slots(cut), (len(classes), T - 2), generator=generator)


def _draw(generator: torch.Generator, batch: int, T: int, per_class: bool, repeats: int = 1,
          cut: str = "none") -> tuple[torch.Tensor, torch.Tensor]:
    """(classes, context tokens (rows, T-2)) of ``repeats`` consecutive batches."""
    classes, drawn = _draw_slots(generator, batch, T, per_class, repeats, cut)
    # The tables' flat index of each slot; index_select reads them several times faster
    # than torch.take does.
    index = drawn.add_(classes.unsqueeze(1) * slots(cut))
    return classes, _slot_tables(cut).view(-1).index_select(0, index.view(-1)).view_as(index)


def _draw_counts(generator: torch.Generator, batch: int, T: int, per_class: bool,
                 repeats: int = 1, cut: str = "none") -> CountBatch:
    """The counts of :func:`_draw`'s sequences (the same draws)."""
    return _counts(*_draw(generator, batch, T, per_class, repeats, cut), cut)


def sample_tokens(generator: torch.Generator, batch: int, T: int, per_class: bool = False,
                  cut: str = "none") -> TokenBatch:
    """Dense sequences of length T (context, query, target)."""
    classes, context = _draw(generator, batch, T, per_class, cut=cut)
    tokens = torch.cat([context, query_token(classes)[:, None], target_token(classes)[:, None]],
                       dim=1)
    return TokenBatch(classes, tokens)


def _counts(classes: torch.Tensor, context: torch.Tensor, cut: str = "none") -> CountBatch:
    """Counts of the tokens the query attends to: the context and, in the paper's task, the
    query's own position."""
    counts = torch.zeros(len(classes), VOCAB)
    counts.scatter_add_(1, context, torch.ones(context.shape))
    if check_cut(cut) == "none":
        counts[torch.arange(len(classes)), query_token(classes)] += 1.0
    return CountBatch(classes, counts)


def sample_counts(generator: torch.Generator, batch: int, T: int, per_class: bool = False,
                  cut: str = "none") -> CountBatch:
    """The same distribution as :func:`sample_tokens`, as token counts (the same draws)."""
    return _draw_counts(generator, batch, T, per_class, cut=cut)


class DataStream:
    """An endless, reproducible stream of count batches for one (seed, T, batch size, task).

    Batch ``k`` of the stream depends only on the seed, T, the batch size, the task (its
    ``cut``: "self" masks the query's position in the very batches of "none") and ``k``: it
    is drawn in fixed-size chunks from a generator of its own, so every model that trains on
    the stream sees the same data however long it trains or whatever else trains with it.
    """

    CHUNK = 50

    def __init__(self, seed: int, T: int, batch: int, per_class: bool = False,
                 cut: str = "none"):
        self.seed, self.T, self.batch, self.per_class = seed, check_length(T), batch, per_class
        self.cut = check_cut(cut)
        self._generator = seeding.generator(seed)
        self._chunk_start = 0
        self._chunk: CountBatch | None = None
        self._next_chunk = 0

    def batch_at(self, k: int) -> CountBatch:
        """Batch ``k``; steps must not go backwards past the current chunk."""
        while self._chunk is None or k >= self._chunk_start + self.CHUNK:
            self._draw_chunk()
        if k < self._chunk_start:
            raise IndexError(f"batch {k} of the stream was already discarded")
        i = (k - self._chunk_start) * self._rows
        return CountBatch(self._chunk.classes[i:i + self._rows],
                          self._chunk.counts[i:i + self._rows])

    def chunk_at(self, k: int) -> CountBatch:
        """The CHUNK batches from batch ``k`` on (``k`` a multiple of CHUNK), concatenated."""
        if k % self.CHUNK:
            raise ValueError(f"chunks start at multiples of {self.CHUNK}, not at batch {k}")
        self.batch_at(k)
        return self._chunk

    @property
    def rows(self) -> int:
        """Sequences per batch."""
        return self._rows

    @property
    def _rows(self) -> int:
        return self.batch * (N_CLASSES if self.per_class else 1)

    def _draw_chunk(self) -> None:
        self._chunk = _draw_counts(self._generator, self.batch, self.T, self.per_class,
                                   repeats=self.CHUNK, cut=self.cut)
        self._chunk_start = self._next_chunk
        self._next_chunk += self.CHUNK
