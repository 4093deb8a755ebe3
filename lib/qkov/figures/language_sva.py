"""language-sva: the paper's subject-verb agreement experiment (section 5) on the Linzen et
al. (2016) data - a one-layer decoder with attention output only (no MLP and, as in the
authors' notebooks, no residual connection) reads a sentence up to its main verb and predicts
the verb's number (VBZ / VBP); faster-QK training (``W_Q``, ``W_K``, their biases ``b_Q``,
``b_K`` and the token and position embeddings at 100x the base learning rate, as in the
authors' notebook; SGD with momentum 0.99, no clipping) against
matched learning rates, seeds 1234-1238, trained on a random 10% of the sentences (Linzen et
al.'s split) and tested on the rest. Measured: accuracy (overall and by number of attractors),
attention from the readout on the subject, ERASER scores (the top ``top_fraction`` of the
tokens by attention rollout, :func:`qkov.language.metrics.eraser`), heatmaps.

The rationale is "subject and verb": the model reads out at the verb's own position (the
first slot after the prefix), so the attention measured is the readout's - the verb's - on
the subject. ``input "sentence"`` feeds the whole sentence instead, verb included, read out
at its last word, with subject and verb as the rationale, as the authors' notebooks do; the
verb's own form then shows the number, so it is an option, not the default.

Tokens: one per word of the TSV's ``sentence`` column (its 10,000 most common
words, rarer ones already replaced by their part of speech), as Linzen et al.'s models.
Without the data (``agreement_tsv`` not given: the notebook's default) :func:`prepare` says
where to get it and what to run, and gives None - no data - which every later step of the
notebook takes and passes on, doing nothing: nothing is trained, drawn or written.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import plotting, tables
from ..checks import (
    ParameterError,
    boolean,
    integer,
    number,
    one_of,
    optional_number,
    optional_path,
    seed_list,
)
from ..language import pipelines
from ..language.data import AGREEMENT_LABELS, AgreementData, load_agreement
from ..language.metrics import ERASER_FRACTION
from ..language.models import DecoderConfig
from ..language.tokenizers import Tokenizer, train_word_level
from ..language.train import TrainingSetup
from ..params import FigureParameters, parameter
from ..spec import FigureSpec

# Its data cannot be downloaded on the project's machines: the notebook is in the book, stored
# as run without data (no figure), and `make figures` leaves it out.
SPEC = FigureSpec(id="language-sva", reproduces="paper section 5 (subject-verb agreement)",
                  page="book/language-data", tables=("heatmaps.csv", "attractors.csv"),
                  threads=2, needs_dataset=True, resources={"mem_mb": 16000, "runtime": 240},
                  alt=pipelines.classifier_alt("subject-verb agreement", "sentences", "subject",
                                                "true number"))

MAX_ATTRACTORS = 4  # attractor counts shown separately (more are pooled with 4)
# What the model reads: the words up to the verb, read out at the slot after them (the
# default), or, as the authors' notebooks, the whole sentence, verb included, read out at its
# last word, with subject and verb as the rationale. The verb's own form then shows its number.
INPUTS = {"prefix": "first_pad", "sentence": "last"}  # input -> readout position


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: the paper's agreement setup; where the paper is
    silent, the authors' notebooks' (``Faster_SVA_Train+heatmap+Eval.ipynb`` at 9e89c94):
    no residual connection, no clipping, batches of 32, 10% warmup, attention biases, and in
    faster QK the position embedding and ``b_Q``, ``b_K`` at the QK rate (its training cell,
    cell 49))."""

    agreement_tsv: str | None = parameter(
        None, optional_path,
        doc="agr_50_mostcommon_10K.tsv of Linzen et al. (2016); None: no data")
    seeds: list = parameter(
        [1234, 1235, 1236, 1237, 1238], seed_list,
        doc="one matched and one faster-QK run each")
    qk_multiplier: float = parameter(
        100.0, number, above=0,
        doc="faster QK: W_Q, W_K learn at this multiple of lr")
    embedding_multiplier: float = parameter(
        100.0, number, above=0,
        doc="... and the token embedding")
    # the position embedding's multiple (None: the token embedding's, as the authors' faster
    # notebook: 100x there, 1x matched)
    position_multiplier: float | None = parameter(
        None, optional_number, above=0,
        doc="the position embedding's multiple; None: the token embedding's (the authors')")
    attention_bias: bool = parameter(
        True, boolean,
        doc="biases b_Q, b_K, b_V, b_O in attention (the authors' model has them)")
    qk_bias: bool = parameter(
        True, boolean,
        doc="b_Q, b_K learn at the QK rate (the authors'); False: at the base rate")
    lr: float = parameter(5e-4, number, above=0, doc="SGD base learning rate")
    momentum: float = parameter(0.99, number, at_least=0, below=1, doc="SGD momentum; in [0, 1)")
    weight_decay: float = parameter(1e-5, number, at_least=0, doc="SGD weight decay")
    epochs: int = parameter(15, integer, minimum=1, doc="passes over the training split")
    batch_size: int = parameter(
        32, integer, minimum=1,
        doc="sentences per step (not stated in the paper; the authors': 32)")
    warmup_fraction: float = parameter(
        0.1, number, at_least=0, below=1,
        doc="linear warmup share of the steps, then cosine decay")
    grad_clip: float | None = parameter(
        None, optional_number, above=0,
        doc="largest global gradient norm; None: no clipping (the authors')")
    train_fraction: float = parameter(
        0.1, number, above=0, below=1,
        doc="share of the sentences trained on (Linzen et al.: 10%)")
    split_seed: int = parameter(1234, integer, minimum=0, doc="seed of the train/test split")
    max_length: int = parameter(
        50, integer, minimum=2,
        doc="words read plus the readout slot; longer examples are left out")
    d_model: int = parameter(64, integer, minimum=1, doc="residual stream width")
    n_heads: int = parameter(4, integer, minimum=1, doc="attention heads")
    d_head: int = parameter(64, integer, minimum=1, doc="width of each head")
    residual: bool = parameter(
        False, boolean,
        doc="a residual connection around attention (the authors' model has none)")
    input: str = parameter(
        "prefix", one_of, options=tuple(INPUTS),
        doc=("\"prefix\": the words up to the verb; \"sentence\": the whole, verb included (the "
             "authors')"))
    top_fraction: float = parameter(
        ERASER_FRACTION, number, above=0,
        doc="ERASER: share of tokens (by attention rollout) removed or kept; (0, 1]")
    example_limit: int | None = parameter(
        None, pipelines.optional_count,
        doc="read only the first N rows of the file; None: all")
    test_limit: int | None = parameter(
        None, pipelines.optional_count,
        doc="evaluate on the first N test sentences; None: all")
    device: str = parameter(
        "auto", pipelines.device_name,
        doc="\"auto\" (a GPU when present), \"cpu\" or \"cuda\"")

    def check(self):
        if self.top_fraction > 1:
            raise ParameterError("top_fraction", f"expected a number in (0, 1], got {self.top_fraction:g}")


def data_missing(p: Parameters) -> bool:
    """True (and what to do printed) if ``agreement_tsv`` is not given; an error if it is
    given but is not a file."""
    return pipelines.missing_data(SPEC.id, {"agreement_tsv": (p.agreement_tsv, "agreement")},
                          "-p agreement_tsv PATH/TO/agr_50_mostcommon_10K.tsv")


@dataclass
class Prepared:
    data: AgreementData
    tokenizer: Tokenizer
    train: pipelines.TokenBatch
    test: pipelines.TokenBatch
    test_attractors: np.ndarray  # per test example: n_diff_intervening
    too_long: int  # examples whose prefix does not fit max_length - 1: left out
    config: DecoderConfig


def words_read(example, input: str = "prefix") -> list[str]:
    """The words the model reads of ``example``: up to the verb, or the whole sentence."""
    return list(example.words) if input == "prefix" else list(example.sentence)


def encode(examples, tokenizer: Tokenizer, width: int, input: str = "prefix"
           ) -> pipelines.TokenBatch:
    """Word ids of what the model reads (:func:`words_read`) and the rationale marked: the
    subject, and with the whole sentence also the verb (the authors' rationale)."""
    marked = (lambda e: {e.subject_index}) if input == "prefix" \
        else (lambda e: {e.subject_index, e.verb_index})
    words = [words_read(e, input) for e in examples]
    rows = [tokenizer.encode_words(w).ids for w in words]
    rationale = [[i in marked(e) for i in range(len(w))] for e, w in zip(examples, words)]
    return pipelines.padded_batch(rows, width, tokenizer.pad_id, labels=[e.label for e in examples],
                          rationale=rationale)


def prepare(p: Parameters) -> Prepared | None:
    """Load and check the TSV, split it, build the word vocabulary from the training
    sentences, encode: everything that can fail on bad data fails before any training;
    prints what it loaded (:func:`describe`). Without the data, None (no data), after saying
    where to get them and what to run (:func:`data_missing`)."""
    if data_missing(p):
        return None
    data = load_agreement(p.agreement_tsv, p.train_fraction, p.split_seed, p.example_limit)

    def fits(e):
        return len(words_read(e, p.input)) <= p.max_length - 1

    too_long = sum(not fits(e) for e in data.train + data.test)
    train = [e for e in data.train if fits(e)]
    test = [e for e in data.test if fits(e)][:p.test_limit]
    if not train or not test:
        raise ValueError(f"{p.agreement_tsv}: no training or test example fits max_length="
                         f"{p.max_length}")
    tokenizer = train_word_level([words_read(e, p.input) for e in train])
    width = max(len(words_read(e, p.input)) for e in train + test) + 1  # the readout slot
    config = DecoderConfig(vocab_size=tokenizer.vocab_size, max_len=p.max_length,
                           d_model=p.d_model, n_heads=p.n_heads, d_head=p.d_head, d_mlp=0,
                           n_layers=1, layer_norm="none", n_classes=len(AGREEMENT_LABELS),
                           pad_id=tokenizer.pad_id, residual=p.residual,
                           attention_bias=p.attention_bias)
    prepared = Prepared(data, tokenizer, encode(train, tokenizer, width, p.input),
                        encode(test, tokenizer, width, p.input),
                        np.array([e.n_diff_intervening for e in test]), too_long, config)
    print(describe(prepared))
    return prepared


def describe(prepared: Prepared) -> str:
    counts = np.bincount(np.minimum(prepared.test_attractors, MAX_ATTRACTORS),
                         minlength=MAX_ATTRACTORS + 1)
    return (f"examples: train {len(prepared.train)}, test {len(prepared.test)} "
            f"({prepared.too_long} longer than max_length left out); vocabulary "
            f"{prepared.tokenizer.vocab_size}; test examples by attractors 0..{MAX_ATTRACTORS}+: "
            f"{', '.join(str(int(c)) for c in counts)}")


def training(p: Parameters) -> TrainingSetup:
    """Matched learning rates: every parameter at ``lr`` (SGD with momentum, linear warmup
    then cosine decay; the position embedding with the token embedding unless
    ``position_multiplier`` is given; ``b_Q``, ``b_K`` with ``W_Q``, ``W_K`` where
    ``qk_bias``, as the authors' notebook)."""
    return TrainingSetup(optimizer="sgd", lr=p.lr, momentum=p.momentum,
                         weight_decay=p.weight_decay, epochs=p.epochs, batch_size=p.batch_size,
                         schedule="cosine", warmup_fraction=p.warmup_fraction,
                         grad_clip=p.grad_clip, position_multiplier=p.position_multiplier,
                         qk_bias=p.qk_bias)


def attractor_rows(runs, attractors: np.ndarray) -> list[dict]:
    """Per run and attractor count (n_diff_intervening, 4 and more pooled): accuracy and
    attention (rollout) on the subject, with the number of test examples."""
    pooled = np.minimum(attractors, MAX_ATTRACTORS)
    rows = []
    for condition, seed, measured in runs:
        for a in range(MAX_ATTRACTORS + 1):
            picked = pooled == a
            if picked.any():
                rows.append({"condition": condition, "seed": seed, "attractors": a,
                             "n": int(picked.sum()),
                             "accuracy": float(measured["correct"][picked].mean()),
                             "attention_rollout": float(measured["attention_rollout"][picked].mean())})
    return rows


SHOWN = ["accuracy", "attention_rollout", "attention_layer_mean", "attention_layer_max",
         "comprehensiveness", "sufficiency"]
ATTRACTOR_COLUMNS = ["condition", "seed", "attractors", "n", "accuracy", "attention_rollout"]


def show(results: pipelines.Results | None, prepared: Prepared | None) -> None:
    """Print the rows, then the results by attractor count (nothing without data)."""
    if results is not None:
        tables.show(results.rows, ["condition", "seed"] + SHOWN)
        tables.show(attractor_rows(results.runs, prepared.test_attractors), ATTRACTOR_COLUMNS)


def plot(results: pipelines.Results | None, top_fraction: float = ERASER_FRACTION):
    """The figure (:func:`qkov.language.pipelines.plot_classifier`); None without data."""
    if results is None:
        return None
    return pipelines.plot_classifier(results.rows, results.heatmaps, top_fraction=top_fraction,
                                     title="Subject-verb agreement, Linzen et al. data (paper "
                                           "section 5):\nfaster QK vs matched learning rates")


def publish(p: Parameters, results: pipelines.Results | None, prepared: Prepared | None, fig,
            started: float) -> None:
    """Write the artifacts (:func:`qkov.plotting.publish`): the figure, the rows, the
    heatmaps and the results by attractor count; nothing without data."""
    if results is not None:
        plotting.publish(SPEC, p, results.rows, started, {"figure": fig},
                         {"heatmaps.csv": pipelines.heatmap_rows(results.heatmaps),
                          "attractors.csv": attractor_rows(results.runs,
                                                           prepared.test_attractors)})
