"""real-sentiment: faster query-key learning on human-rated sentences whose words carry human
ratings - the proxy this companion can run for the paper's HateXplain experiment, never
HateXplain itself (:mod:`qkov.language.ratings`: Hutto and Gilbert's VADER data, from PyPI).

Each sentence is classed negative, neutral or positive by its raters' mean score; its
rationale is the words VADER's lexicon rates at ``|valence| >= rationale_valence``. The
model is the ``language-hatexplain`` pipeline's: a one-layer decoder with an MLP and no
LayerNorm reads the sentence's WordPiece tokens (a vocabulary trained on the training
sentences) and classifies at the next, empty position. Each seed trains one model per
learning-rate condition (:data:`qkov.language.comparison.CONDITIONS`) at every base rate
of a sweep from the same initial weights on the same batches, with the HateXplain pipeline's
AdamW setup (weight decay, cosine schedule with warm-up, clipping), until its loss on
validation documents stops falling; each condition then gets the rate of its lowest
validation loss and the conditions are compared at matched validation losses and on the test
documents (:mod:`qkov.language.tuning`, as ``real-agreement``). The splits are by document (a
review's or an editorial's snippets stay together). Measured on the test sentences at each
run's best checkpoint: accuracy; on those with a rationale, the
attention from the readout on it (rollout, layer mean, layer max) and ERASER's plausibility
(token F1, IOU F1, AUPRC: :func:`qkov.language.metrics.plausibility`); on all of them, ERASER
comprehensiveness and sufficiency (:func:`qkov.language.metrics.eraser`), and the attention-
vs-probability heatmap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..checks import ParameterError, boolean, integer, loss_list, number, rate_list, seed_list
from ..cost import Work
from ..language import comparison, pipelines, ratings, tuning
from ..language.batched import Stopping, train_classifiers
from ..language.comparison import (
    COLORS,
    DTYPES,
    HEATMAP_BINS,
    HEATMAPS_PER_ROW,
    MARKERS,
    bar_position,
    check_model_parameters,
    condition_list,
    condition_setup,
    dtype_name,
)
from ..language.data import DataError, split_examples
from ..language.metrics import (
    ATTENTION_METHODS,
    ERASER_FRACTION,
    PLAUSIBILITY_MEASURES,
    attention_probability_heatmap,
)
from ..language.models import Decoder, DecoderConfig
from ..language.sources import SOURCES
from ..language.tokenizers import Tokenizer, train_wordpiece
from ..language.train import ALL_FASTER, FASTER_QK, FASTER_QK_ONLY, MATCHED, SLOW_OV
from ..language.tuning import (
    MATCHED_LOSS_COLUMNS,
    MATCHED_LOSS_DATA_COLUMNS,
    RATE_COLUMNS,
    RUN_COLUMNS,
    SWEEP_COLUMNS,
    TRAJECTORY_COLUMNS,
    at_chosen_rates,
    bracket,
    chosen_rates,
    conditions_of,
    lowest_shared,
    matched_loss_rows,
    mean_best_loss,
    of_setting,
    rates_of,
    run_rows,
    same_runs,
    sweep_rows,
)
from ..params import FigureParameters, parameter
from ..plotting import COLUMN_WIDTH_IN, house_style, new_figure
from ..seeding import derived_seed, init_generator
from ..spec import FigureSpec
from ..stats import interval_text, records_interval, seed_interval

SPEC = FigureSpec(id="real-sentiment", reproduces=None, page="book/real-text",
                  tables=("heatmaps.csv", "data-counts.csv", "curves.csv", "sweep.csv",
                          "matched-loss.csv", "test.csv", "against.csv"),
                  threads=2, dtype=None, resources={"mem_mb": 4000, "runtime": 30},
                  alt=("Four panels, one line or point per learning-rate condition, for "
                       "human-rated sentences (a proxy for HateXplain): the best validation loss "
                       "against the base learning rate; attention on the rationale words against "
                       "the validation loss at each condition's chosen rate; and, on held-out "
                       "documents at the chosen rates, accuracy and attention on the rationale "
                       "with the majority class, the lexicon reader and a uniform reader for "
                       "reference; below, one heatmap per condition of test sentences binned by "
                       "attention on the rationale (x) and probability of the true class (y), "
                       "each cell its percentage."),
    # measured: the default run took 281 s on 2 cores of an AMD EPYC (2026-12-07); the rate
    # is set below that run's 28,000, so the estimate errs long
    rates={"sentence passes": 24_000})

# Work, in passes of one sentence through the default model: a training sentence through the
# batched trainer (its forward and backward, which read only the readout's row) costs about
# one pass; each optimizer step adds a fixed cost per run, as long as STEP_PASSES sentences
# (measured, ~0.8 ms: so a typo in batch_size shows in the estimate); a validation sentence
# at each evaluation a third of a pass (forward only); each test sentence is measured once
# at the end in FINAL_PASSES (the prediction, the ERASER probabilities and plausibility, one
# model at a time).
TRAIN_PASSES = 1
STEP_PASSES = 15
VALIDATION_PASSES = 1 / 3
FINAL_PASSES = 4
SENTENCES = 23_703  # in the four rated corpora
# "No cost in accuracy" is a one-sided test against this margin: a condition's test accuracy
# may be lower than matched's by less than one point
ACCURACY_MARGIN = 0.01



@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: a run of a few minutes on two CPU cores)."""

    neutral_band: float = parameter(
        ratings.NEUTRAL_BAND, number, at_least=0, below=4,
        doc="|raters' mean| up to this is neutral (the scale runs -4..4)")
    rationale_valence: float = parameter(
        ratings.RATIONALE_VALENCE, number, above=0, at_most=4,
        doc="the rationale: lexicon words rated at |valence| of at least this")
    train_fraction: float = parameter(
        0.8, number, above=0, below=1,
        doc="share of each corpus's documents trained on or validated on")
    validation_fraction: float = parameter(
        0.15, number, above=0, below=1,
        doc="share of those documents held out for validation (early stopping, the sweep)")
    split_seed: int = parameter(1234, integer, minimum=0, doc="which documents are held out")
    seeds: list = parameter(
        [1234, 1235, 1236], seed_list,
        doc="one run per condition, base rate and seed")
    conditions: list = parameter(
        [MATCHED, FASTER_QK, FASTER_QK_ONLY, ALL_FASTER, SLOW_OV], condition_list,
        doc="\"matched\" first")
    rates: list = parameter(
        [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2], rate_list,
        doc="the AdamW base rates swept (cosine schedule, 10% warmup, clip 1.0)")
    # 20, not the agreement figures' 30: at 30 and a base rate of 3e-4 faster QK's training
    # amplified rounding (a last-bit difference between torch's vector and scalar kernels grew
    # through training to the printed digits); at 20 it stayed below 1e-9 in the weights
    qk_multiplier: float = parameter(
        20.0, number, above=0,
        doc="the multiple m: faster QK puts W_Q, W_K, embeddings at rate * m")
    max_length: int = parameter(
        64, integer, minimum=2, maximum=512,
        doc="longest input: WordPiece tokens, plus the readout slot")
    vocab_size: int = parameter(
        8000, integer, minimum=300,
        doc="WordPiece vocabulary, trained on the training sentences")
    d_model: int = parameter(
        32, integer, minimum=1, maximum=1024,
        doc="residual width; each head is d_model / n_heads wide")
    n_heads: int = parameter(
        2, integer, minimum=1, maximum=32,
        doc="attention heads (one layer, no LayerNorm)")
    d_mlp: int = parameter(64, integer, minimum=0, maximum=8192, doc="the MLP's width (0: none)")
    epochs: int = parameter(
        3, integer, minimum=1,
        doc="the cap: most passes over the training sentences a run may take")
    evals_per_epoch: int = parameter(
        3, integer, minimum=1, doc="validation measurements per epoch")
    patience: int = parameter(
        3, integer, minimum=1,
        doc="a run stops after this many evaluations without a lower validation loss")
    matched_losses: list = parameter(
        [1.05, 1.0, 0.98, 0.96, 0.94, 0.92, 0.9, 0.85, 0.8], loss_list,
        doc="validation losses at which conditions are compared (where both reach them)")
    batch_size: int = parameter(64, integer, minimum=1, doc="sentences per step")
    weight_decay: float = parameter(
        0.01, number, at_least=0,
        doc="AdamW weight decay (the HateXplain pipeline's)")
    eraser_fraction: float = parameter(
        ERASER_FRACTION, number, above=0,
        doc="ERASER scores on this share of tokens by attention (at least 1 token)")
    workers: int = parameter(
        2, integer, minimum=1,
        doc="training processes (runs are independent; results do not depend on it)")
    dtype: str = parameter(
        "float64", dtype_name,
        doc="float64 or float32; float64: the printed digits survive rounding")
    progress: bool = parameter(
        True, boolean,
        doc="show a progress bar per training stack (on stderr; results do not depend on it)")

    def check(self):
        check_model_parameters(self)
        if len(self.seeds) < 2:
            raise ParameterError("seeds", "expected at least 2 seeds: the comparisons are "
                                 f"paired by seed, got {self.seeds!r}")

    def work(self) -> Work:
        """Passes of one sentence through the default model: per run (condition, base rate,
        seed), at most ``epochs`` passes over the training sentences (:data:`TRAIN_PASSES`
        each, plus :data:`STEP_PASSES` per optimizer step; early stopping only shortens
        this), ``evals_per_epoch`` measurements of the validation sentences per epoch, and
        :data:`FINAL_PASSES` per test sentence at the end. A larger model counts in
        proportion to its width and MLP. Settings trained as another's count once."""
        seen = SENTENCES * self.train_fraction
        validation = seen * self.validation_fraction
        train = seen - validation
        test = SENTENCES - seen
        size = self.d_model * (self.d_model + self.d_mlp / 2 + 32) / (32 * (32 + 32 + 32))
        steps = math.ceil(train / self.batch_size)
        per_run = (self.epochs * (TRAIN_PASSES * train
                                  + self.evals_per_epoch * VALIDATION_PASSES * validation)
                   + FINAL_PASSES * test) * size + self.epochs * steps * STEP_PASSES
        settings = {tuning.circuit_rates(setup(self, c, rate, 0)) for c in self.conditions
                    for rate in self.rates}
        return Work(len(self.seeds) * len(settings) * per_run,
                    "sentence passes", "of the default model")


@dataclass
class Prepared:
    data: ratings.RatedData  # train: the training and validation sentences; test: the test ones
    tokenizer: Tokenizer
    train: pipelines.TokenBatch
    validation: pipelines.TokenBatch
    test: pipelines.TokenBatch
    train_sentences: list  # the RatedSentence of each training row
    validation_sentences: list  # ... of each validation row
    test_sentences: list  # ... of each test row
    cut: int  # sentences whose tokens were cut to max_length - 1
    config: DecoderConfig
    steps_per_epoch: int


def encode(sentences, tokenizer: Tokenizer, max_length: int) -> tuple[pipelines.TokenBatch, int]:
    """WordPiece tokens of each sentence (its first ``max_length - 1``: the slot after the
    last is the readout), the class, and the tokens of rationale words marked (the
    ``language-hatexplain`` pipeline's encoding); and how many sentences were cut."""
    rows, marks, cut = [], [], 0
    for s in sentences:
        encoded = tokenizer.encode_words(list(s.words))
        cut += len(encoded.ids) > max_length - 1
        rows.append(encoded.ids[:max_length - 1])
        marks.append([s.rationale[w] for w in encoded.word_ids[:max_length - 1]])
    width = max(len(r) for r in rows) + 1
    return pipelines.padded_batch(rows, width, tokenizer.pad_id,
                                  labels=[s.label for s in sentences], rationale=marks), cut


def prepare(p: Parameters, files: dict | None = None) -> Prepared:
    """Read, label and split the rated sentences by document into training, validation and
    test sentences, train the WordPiece on the training ones alone, encode: everything that
    can fail on bad data fails before any training. Validation and test sentences are
    ordered by length (batches of like lengths compute less padding). ``files``: the
    archive's files (:func:`qkov.language.ratings.read_archive`'s)."""
    data = ratings.load_ratings(p.neutral_band, p.rationale_valence, p.train_fraction,
                                p.split_seed, files)
    if not data.train or not data.test:
        raise ParameterError("train_fraction", f"{p.train_fraction:g} leaves no training or no "
                             "test document")
    try:
        train, validation = split_examples(data.train, 1 - p.validation_fraction,
                                           derived_seed(p.split_seed, "split"), "document")
    except DataError as err:
        raise ParameterError("validation_fraction", f"cannot hold out a validation share of "
                             f"the training documents: {err}") from None
    for name, sentences, parameter_name in (("training", train, "validation_fraction"),
                                            ("validation", validation, "validation_fraction"),
                                            ("test", data.test, "train_fraction")):
        missing = [label for k, label in enumerate(ratings.SENTIMENT_LABELS)
                   if not any(s.label == k for s in sentences)]
        if missing:
            raise ParameterError(parameter_name, f"the {name} sentences have no "
                                 f"{' or '.join(missing)} one; choose another split")
    tokenizer = train_wordpiece([list(s.words) for s in train], vocab_size=p.vocab_size)

    def by_length(sentences):
        lengths = {id(s): len(tokenizer.encode_words(list(s.words)).ids) for s in sentences}
        return sorted(sentences, key=lambda s: lengths[id(s)])

    validation, test = by_length(validation), by_length(data.test)
    train_batch, cut_train = encode(train, tokenizer, p.max_length)
    validation_batch, cut_validation = encode(validation, tokenizer, p.max_length)
    test_batch, cut_test = encode(test, tokenizer, p.max_length)
    config = DecoderConfig(vocab_size=tokenizer.vocab_size, max_len=p.max_length,
                           d_model=p.d_model, n_heads=p.n_heads, d_head=p.d_model // p.n_heads,
                           d_mlp=p.d_mlp, n_layers=1, layer_norm="none",
                           n_classes=len(ratings.SENTIMENT_LABELS), pad_id=tokenizer.pad_id)
    return Prepared(data, tokenizer, train_batch, validation_batch, test_batch, train,
                    validation, test, cut_train + cut_validation + cut_test, config,
                    math.ceil(len(train) / p.batch_size))


COUNT_COLUMNS = ("split", "corpus", "documents", "sentences", *ratings.SENTIMENT_LABELS,
                 "with_rationale", "rationale_words")


def count_rows(prepared: Prepared) -> list[dict]:
    """Per split and corpus (and all corpora): documents, sentences, sentences per class,
    the share with a rationale word, and the mean number of rationale words of those."""
    out = []
    for split, sentences in (("train", prepared.train_sentences),
                             ("validation", prepared.validation_sentences),
                             ("test", prepared.test_sentences)):
        for corpus in (*ratings.CORPORA, "all"):
            chosen = [s for s in sentences if corpus in ("all", s.corpus)]
            counts = ratings.label_counts(chosen)
            marked = [sum(s.rationale) for s in chosen if any(s.rationale)]
            out.append({"split": split, "corpus": corpus,
                        "documents": len({s.document for s in chosen}),
                        "sentences": len(chosen),
                        **{label: counts[label] for label in ratings.SENTIMENT_LABELS},
                        "with_rationale": f"{len(marked) / len(chosen):.3f}",
                        "rationale_words": f"{np.mean(marked):.2f}"})
    return out


def source_lines(prepared: Prepared, p: Parameters) -> list[str]:
    """Where the sentences come from and how they are labelled (no machine's path)."""
    vader = SOURCES["vader"]
    d = prepared.data
    return [f"sentences: {vader.package} {vader.version} (PyPI sdist, SHA-256 "
            f"{vader.sha256[:16]}...), {ratings.ARCHIVE.split('/', 1)[1]}: "
            f"{len(d.train) + len(d.test):,} sentences rated by people on -4..4",
            f"classes: negative below {-p.neutral_band:g}, positive above "
            f"{p.neutral_band:g}, neutral between (the raters' mean)",
            f"rationale: words of VADER's lexicon ({d.lexicon_words:,} distinct tokens, each "
            f"rated by 10 people out of context) with |valence| >= {p.rationale_valence:g}: "
            f"{d.rationale_words:,} of them",
            f"tokens: a WordPiece of {prepared.tokenizer.vocab_size:,} trained on the training "
            f"sentences; {prepared.cut} sentences cut to {p.max_length - 1} tokens"]


def example_lines(prepared: Prepared, n: int, seed: int = 0) -> list[str]:
    """``n`` test sentences (drawn with ``seed``) with their class, mean rating and
    rationale words in [brackets]."""
    import random

    picked = sorted(random.Random(seed).sample(range(len(prepared.data.test)), n))
    lines = []
    for i in picked:
        s = prepared.data.test[i]
        text = " ".join(f"[{w}]" if r else w for w, r in zip(s.words, s.rationale))
        lines.append(f"{ratings.SENTIMENT_LABELS[s.label]} ({s.mean:+.2f}, {s.corpus}): "
                     f"{text}")
    return lines


BASELINE_COLUMNS = ("baseline", "value")


def baseline_rows(prepared: Prepared) -> list[dict]:
    """What the measures are worth without learning: the majority class's accuracy; that of a
    reader that knows only the lexicon (positive where a sentence's summed VADER valences are
    above 0, negative below, neutral at 0: no word rated); on the test sentences with a
    rationale, the attention a uniform reader puts on it (its share of the tokens); and the
    size k of the hard rationale that token and IOU F1 score."""
    labels = prepared.test.labels.numpy()
    lexicon = np.array([ratings.label_of(s.valence, 0.0) for s in prepared.test_sentences])
    majority = np.bincount(labels, minlength=len(ratings.SENTIMENT_LABELS))
    marks, mask = prepared.test.rationale, prepared.test.attention_mask
    has = marks.any(1)
    share = (marks.sum(1)[has].double() / mask.sum(1)[has].double()).mean()
    return [{"baseline": f"accuracy of always answering {ratings.SENTIMENT_LABELS[majority.argmax()]}",
             "value": f"{majority.max() / majority.sum():.3f}"},
            {"baseline": "accuracy of the lexicon alone (the sign of the summed valences)",
             "value": f"{np.mean(lexicon == labels):.3f}"},
            {"baseline": "uniform attention on the rationale (its share of the tokens)",
             "value": f"{float(share):.3f}"},
            {"baseline": "hard rationale size k of token and IOU F1 (tokens)",
             "value": str(pipelines.plausibility_k(prepared.test))}]


# --- training --------------------------------------------------------------------------------


def setup(p: Parameters, condition: str, rate: float, seed: int):
    """A run's training: AdamW at the base ``rate`` times the condition's multiples
    (:func:`~qkov.language.comparison.condition_setup`), with the HateXplain pipeline's
    weight decay, at most ``p.epochs`` epochs of ``p.batch_size``, a cosine schedule over
    them with 10% warm-up, clipping at 1.0; each batch cut to its longest sentence. As in the
    agreement figures, faster QK raises the position embedding with the token embedding (the
    HateXplain pipeline keeps it at the base rate)."""
    return condition_setup(condition, rate, p.qk_multiplier, optimizer="adamw",
                           epochs=p.epochs, batch_size=p.batch_size, schedule="cosine",
                           warmup_fraction=0.1, grad_clip=1.0, seed=seed,
                           weight_decay=p.weight_decay, trim_padding=True)


def runs(p: Parameters) -> list[tuple[str, float, int]]:
    """The runs: every condition, base rate and seed."""
    return [(condition, rate, seed) for condition in p.conditions for rate in p.rates
            for seed in p.seeds]


def train(p: Parameters, prepared: Prepared) -> list[dict]:
    """Every run (:func:`runs`), trained and measured: each worker's share of the runs as
    one stack (:func:`qkov.language.batched.train_classifiers`, the per-model loop's numbers
    to float64 rounding), on the pinned number of torch threads, so a run's rounding does
    not depend on where it ran. A setting another name shares is trained once
    (:func:`qkov.language.tuning.train_settings`)."""
    return tuning.train_settings(runs(p), lambda c, rate, seed: setup(p, c, rate, seed),
                                 train_stack, (p, prepared), p.workers)


def train_stack(p: Parameters, prepared: Prepared,
                share: list[tuple[str, float, int]]) -> list[dict]:
    """Train the runs ``share`` ((condition, rate, seed) each) together, each to its best
    validation loss, then measure each on the test sentences."""
    models = [Decoder(prepared.config, generator=init_generator(seed)).to(DTYPES[p.dtype])
              for _, _, seed in share]
    every = max(1, math.ceil(prepared.steps_per_epoch / p.evals_per_epoch))
    histories = train_classifiers(
        models, prepared.train, [setup(p, *run) for run in share],
        evaluate=lambda stack, _: tuning.validation_measures(stack, prepared.validation),
        eval_every=every, evaluate_at_start=True,
        stopping=Stopping("validation_loss", p.patience),
        progress=p.progress, desc=f"{len(share)} runs", position=bar_position(p.workers))
    out = []
    for (condition, rate, seed), model, history in zip(share, models, histories):
        measured = pipelines.evaluate_classifier(model, prepared.test, p.eraser_fraction)
        out.append({"condition": condition, "rate": rate, "seed": seed, "measured": measured,
                    **tuning.history_fields(history, prepared.steps_per_epoch),
                    "correct": measured["correct"], "attention": measured["attention_rollout"],
                    "overall_accuracy": float(measured["correct"].mean())})
    return out


# --- tables -----------------------------------------------------------------------------------

MEASURES = ("accuracy", *(f"attention_{m}" for m in ATTENTION_METHODS), *PLAUSIBILITY_MEASURES,
            "comprehensiveness", "sufficiency")
RECORD_COLUMNS = ("condition", "seed", "final_train_loss", *MEASURES)


def rows(results: list[dict]) -> list[dict]:
    """One record per (condition, seed): the test means (attention and plausibility over
    the sentences with a rationale) and the last epoch's training loss."""
    out = []
    for run in results:
        row = pipelines.classifier_row(run["condition"], run["seed"], _History(run["loss"]),
                                       run["measured"])
        out.append({"condition": row["condition"], "seed": row["seed"],
                    "final_train_loss": row["train_loss"], **{m: row[m] for m in MEASURES}})
    return out


@dataclass
class _History:  # what classifier_row reads of a training history
    loss: list


SUMMARY_COLUMNS = ("condition", "accuracy", "attention_rollout", "token_f1", "iou_f1", "auprc",
                   "comprehensiveness", "sufficiency")


def summary_table(records) -> list[dict]:
    """Per condition: mean over seeds ± the half-width of the 95% interval."""
    return [{"condition": c, **{m: interval_text(*records_interval(records, m, condition=c))
                                for m in SUMMARY_COLUMNS[1:]}}
            for c in comparison.conditions_in(records)]


GAP_COLUMNS = ("condition", "accuracy", "attention_rollout", "token_f1", "auprc",
               "comprehensiveness", "final_train_loss")


def gap_table(records) -> list[dict]:
    """Per condition but matched: its gap to the matched runs of the same seeds in each
    measure (mean of the paired per-seed differences ± the 95% interval's half-width)."""
    return [{"condition": c, **{m: interval_text(*comparison.paired_gap(records, m, c))
                                for m in GAP_COLUMNS[1:]}}
            for c in comparison.conditions_in(records) if c != MATCHED]


def heatmaps(prepared: Prepared, results: list[dict]) -> dict[str, np.ndarray]:
    """Per condition: the attention-vs-probability heatmap of the test sentences with a
    rationale (percent), mean over seeds."""
    has = prepared.test.rationale.any(1).numpy()
    maps = {}
    for c in comparison.conditions_in(results):
        maps[c] = np.mean([attention_probability_heatmap(
            run["measured"]["attention_rollout"][has], run["measured"]["probability"][has],
            HEATMAP_BINS) for run in results if run["condition"] == c], 0)
    return maps


def matched_loss_data(p: Parameters, results: list[dict], chosen: dict[str, float]) -> list[dict]:
    """matched-loss.csv: :func:`qkov.language.tuning.matched_loss_data` at the validation
    losses ``p.matched_losses``."""
    return tuning.matched_loss_data(results, chosen, p.matched_losses)


def class_bins(prepared: Prepared) -> list[tuple[str, np.ndarray]]:
    """("all", every test sentence), then one bin per class."""
    labels = prepared.test.labels.numpy()
    return [("all", np.ones(len(labels), dtype=bool)),
            *((name, labels == k) for k, name in enumerate(ratings.SENTIMENT_LABELS))]


def test_documents(prepared: Prepared) -> np.ndarray:
    """Per test sentence, its document (a review, an editorial, a tweet)."""
    return np.array([s.document for s in prepared.test_sentences])


def test_data(prepared: Prepared, results: list[dict], chosen: dict[str, float]) -> list[dict]:
    """test.csv: :func:`qkov.language.tuning.test_data` on the test sentences, overall and
    by class, the attention over the sentences with a rationale, the bootstrap drawing the
    test documents, "no cost" against :data:`ACCURACY_MARGIN`."""
    return tuning.test_data(results, chosen, test_documents(prepared), class_bins(prepared),
                            ACCURACY_MARGIN, rationale=prepared.test.rationale.any(1).numpy(),
                            bin_column="class")


TEST_DATA_COLUMNS = tuning.test_data_columns("class")
TEST_COLUMNS = tuning.test_columns("class")


def test_rows(data: list[dict], only: str | None = None) -> list[dict]:
    return tuning.test_rows(data, only, bin_column="class")


def rate_rows(results: list[dict], matched_loss: list[dict], test: list[dict]) -> list[dict]:
    return tuning.rate_rows(results, matched_loss, test, bin_column="class")


CURVE_COLUMNS = ("condition", "rate", "seed", *TRAJECTORY_COLUMNS)


def curve_rows(results: list[dict]) -> list[dict]:
    """curves.csv: every run's validation measurements."""
    return [{"condition": r["condition"], "rate": r["rate"], "seed": r["seed"],
             **dict(zip(TRAJECTORY_COLUMNS, row))}
            for r in results for row in r["trajectory"].tolist()]


AGAINST_COLUMNS = tuning.AGAINST_COLUMNS
AGAINST_ROW_COLUMNS = tuning.AGAINST_ROW_COLUMNS


def against_data(prepared: Prepared, results: list[dict]) -> list[dict]:
    """against.csv: per condition (``results``: its runs at its chosen rate), on the test
    sentences at each run's best checkpoint (:func:`qkov.language.tuning.against_row`, the
    bootstrap drawing the test documents):

    - its accuracy minus the lexicon reader's, paired by sentence;
    - on the sentences with a rated word, its AUPRC (the attention read as a ranking of the
      rated words: plausibility) and its attention on them, each minus all faster's, paired
      by seed and sentence. All faster learns every parameter at the multiple: where a
      condition learns W_Q and W_K at all faster's rate (its chosen base rate is all
      faster's), the difference is that of its slower rest (the OV circuit, the MLP and the
      readout), the ratio, not of a faster query-key rate.

    The chapter and the ledger both read these rows, so they quote one interval."""
    documents = test_documents(prepared)
    labels = prepared.test.labels.numpy()
    lexicon = np.array([ratings.label_of(s.valence, 0.0) for s in prepared.test_sentences])
    lexicon_right = (lexicon == labels).astype(float)
    has = prepared.test.rationale.any(1).numpy()
    by_condition = tuning.runs_by_condition(results)
    out = []
    for c, runs_of in by_condition.items():
        right = np.array([r["correct"] for r in runs_of])
        out.append(tuning.against_row(c, "lexicon reader", "accuracy", right - lexicon_right,
                                      documents, words=("above it", "below it")))
        if ALL_FASTER not in by_condition or c == ALL_FASTER:
            continue
        for measure, values_of in (("auprc", lambda r: r["measured"]["auprc"][has]),
                                   ("attention", lambda r: r["attention"][has])):
            mine = np.array([values_of(r) for r in runs_of])
            theirs = np.array([values_of(r) for r in by_condition[ALL_FASTER]])
            out.append(tuning.against_row(c, ALL_FASTER, measure, mine - theirs,
                                          documents[has]))
    return out


def against_rows(against: list[dict]) -> list[dict]:
    return tuning.against_rows(against)


def against_glued(against: list[dict]) -> dict[str, str]:
    """The chapter's names for :func:`against_data`'s rows."""
    return tuning.against_glued(against, "rs_", {
        ("lexicon reader", "accuracy"): "vs_lexicon",
        (ALL_FASTER, "auprc"): "auprc_vs_all_faster",
        (ALL_FASTER, "attention"): "attention_vs_all_faster"})


def glued(p: Parameters, prepared: Prepared, results: list[dict], chosen: dict[str, float],
          matched_loss: list[dict], test: list[dict], records,
          against: list[dict]) -> dict[str, str]:
    """The values the chapter quotes (myst-nb glue names, ``rs_`` first), from this run."""
    def key(condition):
        return condition.replace(" ", "_")

    d = prepared.data
    out = {"rs_n_seeds": str(len(p.seeds)), "rs_epochs": str(p.epochs),
           "rs_qk_multiplier": f"{p.qk_multiplier:g}", "rs_d_model": str(p.d_model),
           "rs_n_heads": str(p.n_heads), "rs_d_mlp": str(p.d_mlp),
           "rs_batch_size": str(p.batch_size), "rs_weight_decay": f"{p.weight_decay:g}",
           "rs_neutral_band": f"{p.neutral_band:g}", "rs_valence": f"{p.rationale_valence:g}",
           "rs_sentences": f"{len(d.train) + len(d.test):,}",
           "rs_train": f"{len(prepared.train_sentences):,}",
           "rs_validation": f"{len(prepared.validation_sentences):,}",
           "rs_test": f"{len(d.test):,}", "rs_lexicon_words": f"{d.lexicon_words:,}",
           "rs_rationale_words": f"{d.rationale_words:,}",
           "rs_vocab": f"{prepared.tokenizer.vocab_size:,}",
           "rs_eraser_percent": f"{100 * p.eraser_fraction:g}%",
           "rs_validation_fraction": f"{100 * p.validation_fraction:g}%",
           "rs_rates": ", ".join(f"{r:g}" for r in p.rates[:-1]) + f" and {p.rates[-1]:g}",
           "rs_n_runs": str(len(results)),
           "rs_n_trained": str(len(tuning.trained(results))), "rs_patience": str(p.patience),
           "rs_evals_per_epoch": str(p.evals_per_epoch),
           "rs_accuracy_margin": f"{100 * ACCURACY_MARGIN:g} point",
           "rs_matched_losses": ", ".join(f"{x:g}" for x in p.matched_losses),
           "rs_same_runs": "; ".join(f"{c} at {rate:g} is {c2} at {rate2:g}"
                                     for c, rate, c2, rate2 in same_runs(results)) or "none"}
    for row in count_rows(prepared):
        if row["split"] == "test" and row["corpus"] == "all":
            out["rs_test_with_rationale"] = row["with_rationale"]
            for label in ratings.SENTIMENT_LABELS:
                out[f"rs_test_{label}"] = f"{row[label]:,}"
    majority, lexicon, uniform, k = (row["value"] for row in baseline_rows(prepared))
    out.update({"rs_majority": majority, "rs_lexicon_accuracy": lexicon,
                "rs_uniform_attention": uniform, "rs_k": k})
    out.update(against_glued(against))
    for row in summary_table(records):
        for m in SUMMARY_COLUMNS[1:]:
            out[f"rs_{m}_{key(row['condition'])}"] = row[m]
    for row in gap_table(records):
        for m in GAP_COLUMNS[1:]:
            out[f"rs_gap_{m}_{key(row['condition'])}"] = row[m]
    sweep = rates_of(results)
    for c in conditions_of(results):
        rate = chosen[c]
        out[f"rs_rate_{key(c)}"] = f"{rate:g}"
        out[f"rs_rate_place_{key(c)}"] = tuning.rate_place(rate, sweep)
        qk, _, other = tuning.circuit_rates(setup(p, c, rate, 0))
        out[f"rs_qk_rate_{key(c)}"] = f"{qk:g}"
        out[f"rs_ov_rate_{key(c)}"] = f"{other:g}"
        out[f"rs_best_loss_{key(c)}"] = f"{mean_best_loss(results, c, rate):.3f}"
        out[f"rs_epochs_trained_{key(c)}"] = \
            f"{np.mean([r['epochs_trained'] for r in of_setting(results, c, rate).values()]):.1f}"
        for row in test:
            if row["condition"] == c and row["chosen"] and row["class"] == "all":
                out[f"rs_test_accuracy_{key(c)}"] = bracket(
                    row["accuracy"], row["accuracy_low"], row["accuracy_high"])
                out[f"rs_test_attention_{key(c)}"] = bracket(
                    row["attention"], row["attention_low"], row["attention_high"])
                if "accuracy_gap" in row:
                    for measure in ("accuracy", "attention"):
                        out[f"rs_test_{measure}_gap_{key(c)}"] = bracket(
                            row[f"{measure}_gap"], row[f"{measure}_gap_low"],
                            row[f"{measure}_gap_high"])
                    out[f"rs_no_cost_{key(c)}"] = row["no_cost"]
        if c == MATCHED:
            continue
        for name, value in tuning.lowest_shared_values(matched_loss, c, rate).items():
            out[f"rs_ml_{name}_{key(c)}"] = value
    return out


def glued_sweep(p: Parameters, results: list[dict], matched_loss: list[dict],
                test: list[dict]) -> dict[str, str]:
    """The values the chapter quotes from every setting of the sweep, the chosen rates or
    not (``rs_`` first): how many runs stopped early and the verdicts at every base rate.
    Apart from :func:`glued`, because some settings' runs (the highest query-key rates)
    amplify the last bits of the CPU's rounding, so these values are one draw of it (the
    notebook glues them in a cell tagged rounding-sensitive: tests/full_scale.py)."""
    out = {"rs_stopped_early": str(sum(r["ended_by"] == "patience"
                                          for r in tuning.trained(results)))}
    for c in conditions_of(results)[1:]:
        key = c.replace(" ", "_")
        out[f"rs_ml_by_rate_{key}"] = "; ".join(
            f"{d['attention_verdict']} at {rate:g}" if d else f"no shared loss at {rate:g}"
            for rate in rates_of(results) for d in [lowest_shared(matched_loss, c, rate)])
        out[f"rs_no_cost_by_rate_{key}"] = "; ".join(
            f"{row['no_cost']} at {row['rate']:g}" for row in test
            if row["condition"] == c and row["class"] == "all")
    return out


def heatmap_cells(maps) -> list[dict]:
    return comparison.heatmap_cells(maps)


# --- the figure -------------------------------------------------------------------------------


def plot(p: Parameters, prepared: Prepared, results: list[dict], chosen: dict[str, float],
         test: list[dict], maps):
    """(a) best validation loss against the base rate (mean over seeds, bars: 95%); (b) the
    validation attention on the rationale against the validation loss, each run at its
    condition's chosen rate (the matched losses dotted); (c, d) test accuracy and attention
    on the rationale, overall and by class, at the chosen rates (bars: 95% over seeds and
    test documents), with the majority class, the lexicon reader and a uniform reader.
    Below: one attention-vs-probability heatmap per condition (mean over seeds)."""
    conditions = conditions_of(results)
    rates = rates_of(results)
    bins = [name for name, _ in class_bins(prepared)]
    majority, lexicon, uniform, _ = (float(row["value"]) for row in baseline_rows(prepared))
    with house_style():
        heat_rows = -(-len(conditions) // HEATMAPS_PER_ROW)
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 3.0 * 2 + 2.5 * heat_rows + 0.6))
        # Two subfigures, each laid out on its own: the panels' column edges above do not
        # squeeze the heatmaps below (two heatmaps' tick labels met where they did)
        top, bottom = fig.subfigures(2, 1, height_ratios=[2 * 3.0 + 0.6, 2.5 * heat_rows])
        grid = top.add_gridspec(2, 2)
        axes = [top.add_subplot(grid[row, col]) for row in (0, 1) for col in (0, 1)]
        width = 0.8 / len(conditions)
        for k, c in enumerate(conditions):
            style = dict(color=COLORS[c], marker=MARKERS[c], markeredgecolor="black",
                         markeredgewidth=0.5)
            stats = [seed_interval([r["best"]["validation_loss"]
                                    for r in of_setting(results, c, rate).values()])
                     for rate in rates]
            axes[0].errorbar(rates, [m for m, _ in stats], yerr=[h for _, h in stats],
                             capsize=3, label=c, **style)
            for r in of_setting(results, c, chosen[c]).values():
                axes[1].plot(r["trajectory"][:, 1], r["trajectory"][:, 3], color=COLORS[c],
                             linewidth=0.9, alpha=0.8)
            found = {row["class"]: row for row in test if row["condition"] == c and row["chosen"]}
            x = np.arange(len(bins)) + (k - (len(conditions) - 1) / 2) * width
            for ax, measure in ((axes[2], "accuracy"), (axes[3], "attention")):
                means = np.array([found[b][measure] for b in bins])
                low = means - np.array([found[b][f"{measure}_low"] for b in bins])
                high = np.array([found[b][f"{measure}_high"] for b in bins]) - means
                ax.errorbar(x, means, yerr=[low, high], capsize=2, linestyle="none", **style)
        axes[2].axhline(majority, color="0.5", linestyle=":", label="majority class")
        axes[2].axhline(lexicon, color="black", linestyle="--", label="lexicon reader")
        axes[3].axhline(uniform, color="0.5", linestyle=":", label="uniform attention")
        for level in p.matched_losses:
            axes[1].axvline(level, color="0.6", linestyle=":", linewidth=0.8)
        axes[0].set_xscale("log")
        axes[0].set_xticks(rates, [f"{rate:g}" for rate in rates])
        axes[0].minorticks_off()
        axes[0].set_xlabel("base learning rate")
        axes[0].set_ylabel("best validation loss")
        axes[1].set_xscale("log")
        axes[1].invert_xaxis()  # training runs from left to right
        lows, highs = zip(*((r["trajectory"][:, 1].min(), r["trajectory"][:, 1].max())
                            for r in at_chosen_rates(results, chosen)))
        ticks = [x for x in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2) if min(lows) <= x <= max(highs)]
        axes[1].set_xticks(ticks, [f"{x:g}" for x in ticks])
        axes[1].minorticks_off()
        axes[1].set_xlabel("validation loss")
        axes[1].set_ylabel("attention on the rationale")
        for ax in axes[2:]:
            ax.set_xticks(range(len(bins)), bins)
            ax.set_ylim(0, 1.02)
            ax.legend(loc="upper right")
        titles = ("(a) the rate sweep", "(b) validation, chosen rates", "(c) test accuracy",
                  "(d) test attention on the rationale")
        for ax, title in zip(axes, titles):
            ax.set_title(title)
        top.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=3)
        comparison.draw_heatmaps(bottom, bottom.add_gridspec(heat_rows, 2 * HEATMAPS_PER_ROW),
                                 0, maps, conditions, "attention on rationale",
                                 "P(true class)", "% of sentences", "efghijklmn")
    return fig


__all__ = ["SPEC", "Parameters", "prepare", "runs", "train", "rows", "summary_table", "gap_table",
           "heatmaps", "heatmap_cells", "plot", "count_rows", "COUNT_COLUMNS", "baseline_rows",
           "BASELINE_COLUMNS", "SUMMARY_COLUMNS", "GAP_COLUMNS", "chosen_rates",
           "at_chosen_rates", "sweep_rows", "SWEEP_COLUMNS", "run_rows", "RUN_COLUMNS",
           "matched_loss_data", "matched_loss_rows", "MATCHED_LOSS_COLUMNS",
           "MATCHED_LOSS_DATA_COLUMNS", "test_data", "test_rows", "TEST_COLUMNS",
           "TEST_DATA_COLUMNS", "rate_rows", "RATE_COLUMNS", "curve_rows", "CURVE_COLUMNS",
           "glued", "glued_sweep", "same_runs", "against_data", "against_rows",
           "AGAINST_COLUMNS", "AGAINST_ROW_COLUMNS"]
