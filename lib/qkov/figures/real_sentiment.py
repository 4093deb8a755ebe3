"""real-sentiment: faster query-key learning on human-rated sentences whose words carry human
ratings - the proxy this companion can run for the paper's HateXplain experiment, never
HateXplain itself (:mod:`qkov.language.ratings`: Hutto and Gilbert's VADER data, from PyPI).

Each sentence is classed negative, neutral or positive by its raters' mean score; its
rationale is the words VADER's lexicon rates at ``|valence| >= rationale_valence``. The
model is the ``language-hatexplain`` pipeline's: a one-layer decoder with an MLP and no
LayerNorm reads the sentence's WordPiece tokens (a vocabulary trained on the training
sentences) and classifies at the next, empty position. Each seed trains one model per
learning-rate condition (:data:`qkov.language.comparison.CONDITIONS`) from the same initial
weights on the same batches, with the HateXplain pipeline's AdamW setup (weight decay,
cosine schedule with warm-up, clipping) at a base rate and for a number of epochs that fit a
few minutes on two cores. The split is by document (a review's or an editorial's snippets
stay together). Measured on the test sentences: accuracy; on those with a rationale, the
attention from the readout on it (rollout, layer mean, layer max) and ERASER's plausibility
(token F1, IOU F1, AUPRC: :func:`qkov.language.metrics.plausibility`); on all of them, ERASER
comprehensiveness and sufficiency (:func:`qkov.language.metrics.eraser`), and the attention-
vs-probability heatmap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..checks import ParameterError, boolean, integer, number, seed_list
from ..cost import Work
from ..language import comparison, pipelines, ratings
from ..language.batched import train_classifiers
from ..language.comparison import (
    COLORS,
    DTYPES,
    HEATMAP_BINS,
    HEATMAPS_PER_ROW,
    MARKERS,
    agreement_setup,
    bar_position,
    check_model_parameters,
    condition_list,
    dtype_name,
)
from ..language.metrics import (
    ATTENTION_METHODS,
    ERASER_FRACTION,
    PLAUSIBILITY_MEASURES,
    attention_probability_heatmap,
)
from ..language.models import Decoder, DecoderConfig
from ..language.sources import SOURCES
from ..language.tokenizers import Tokenizer, train_wordpiece
from ..language.train import ALL_FASTER, FASTER_QK, MATCHED
from ..params import FigureParameters, parameter
from ..plotting import COLUMN_WIDTH_IN, house_style, new_figure
from ..seeding import init_generator
from ..spec import FigureSpec
from ..stats import interval_text, records_interval

SPEC = FigureSpec(id="real-sentiment", reproduces=None, page="book/real-text",
                  tables=("heatmaps.csv", "data-counts.csv"), threads=2, dtype=None,
                  resources={"mem_mb": 4000, "runtime": 30},
                  alt=("Four panels of points, one per learning-rate condition, for held-out "
                       "human-rated sentences (a proxy for HateXplain): test accuracy, attention "
                       "on the rationale words, the plausibility scores token F1, IOU F1 and "
                       "AUPRC, and the ERASER comprehensiveness and sufficiency; below, one "
                       "heatmap per condition of test sentences binned by attention on the "
                       "rationale (x) and probability of the true class (y), each cell its "
                       "percentage."),
    # measured: the default run took 44 s on 2 cores of an AMD EPYC (2026-12-07)
    rates={"sentence passes": 30_000})

# Work, in passes of one sentence through the default model: a training sentence through the
# batched trainer (its forward and backward, which read only the readout's row) costs about
# one pass; each optimizer step adds a fixed cost per run, as long as STEP_PASSES sentences
# (measured, ~0.8 ms: so a typo in batch_size shows in the estimate); each test sentence is
# measured once at the end in FINAL_PASSES (the prediction, the ERASER probabilities and
# plausibility, one model at a time).
TRAIN_PASSES = 1
STEP_PASSES = 15
FINAL_PASSES = 4
SENTENCES = 23_703  # in the four rated corpora


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
        doc="share of each corpus's documents trained on")
    split_seed: int = parameter(1234, integer, minimum=0, doc="which documents are held out")
    seeds: list = parameter(
        [1234, 1235, 1236, 1237, 1238], seed_list,
        doc="one run per condition and seed")
    # "slow OV" also runs (a fourth more time)
    conditions: list = parameter(
        [MATCHED, FASTER_QK, ALL_FASTER], condition_list,
        doc="\"matched\" first; also \"slow OV\"")
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
    epochs: int = parameter(3, integer, minimum=1, doc="passes over the training sentences")
    batch_size: int = parameter(64, integer, minimum=1, doc="sentences per step")
    # AdamW base learning rate; real-agreement's. At 3e-3 both 30x conditions fail to learn
    lr: float = parameter(
        3e-4, number, above=0,
        doc="AdamW base learning rate (cosine schedule, 10% warmup, clip 1.0)")
    weight_decay: float = parameter(
        0.01, number, at_least=0,
        doc="AdamW weight decay (the HateXplain pipeline's)")
    # 20, not the agreement figures' 30: at 30 faster QK's training amplified rounding (a
    # last-bit difference between torch's vector and scalar kernels grew through training to
    # the printed digits, which then differed between an Intel and an AMD CPU); at 20 it
    # stays below 1e-9 in the weights (the chapter, tests/full-scale/real-sentiment.json)
    qk_multiplier: float = parameter(
        20.0, number, above=0,
        doc="the multiple m: faster QK puts W_Q, W_K, embeddings at lr * m")
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
        doc="show a progress bar per training run (on stderr; results do not depend on it)")

    def check(self):
        check_model_parameters(self)

    def work(self) -> Work:
        """Passes of one sentence through the default model: per (condition, seed), every
        epoch trains on the training sentences (:data:`TRAIN_PASSES` each, plus
        :data:`STEP_PASSES` per optimizer step); at the end each test sentence takes
        :data:`FINAL_PASSES`. A larger model counts in proportion to its width and MLP."""
        train = SENTENCES * self.train_fraction
        test = SENTENCES - train
        size = self.d_model * (self.d_model + self.d_mlp / 2 + 32) / (32 * (32 + 32 + 32))
        steps = math.ceil(train / self.batch_size)
        per_run = (self.epochs * TRAIN_PASSES * train + FINAL_PASSES * test) * size \
            + self.epochs * steps * STEP_PASSES
        return Work(len(self.seeds) * len(self.conditions) * per_run,
                    "sentence passes", "of the default model")


@dataclass
class Prepared:
    data: ratings.RatedData
    tokenizer: Tokenizer
    train: pipelines.TokenBatch
    test: pipelines.TokenBatch
    test_sentences: list  # the RatedSentence of each test row
    cut: int  # sentences whose tokens were cut to max_length - 1
    config: DecoderConfig


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
    """Read, label and split the rated sentences, train the WordPiece on the training ones,
    encode both splits: everything that can fail on bad data fails before any training.
    Test sentences are ordered by length (batches of like lengths compute less padding).
    ``files``: the archive's files (:func:`qkov.language.ratings.read_archive`'s)."""
    data = ratings.load_ratings(p.neutral_band, p.rationale_valence, p.train_fraction,
                                p.split_seed, files)
    if not data.train or not data.test:
        raise ParameterError("train_fraction", f"{p.train_fraction:g} leaves no training or no "
                             "test document")
    tokenizer = train_wordpiece([list(s.words) for s in data.train], vocab_size=p.vocab_size)
    lengths = {id(s): len(tokenizer.encode_words(list(s.words)).ids) for s in data.test}
    test = sorted(data.test, key=lambda s: lengths[id(s)])
    train_batch, cut_train = encode(data.train, tokenizer, p.max_length)
    test_batch, cut_test = encode(test, tokenizer, p.max_length)
    config = DecoderConfig(vocab_size=tokenizer.vocab_size, max_len=p.max_length,
                           d_model=p.d_model, n_heads=p.n_heads, d_head=p.d_model // p.n_heads,
                           d_mlp=p.d_mlp, n_layers=1, layer_norm="none",
                           n_classes=len(ratings.SENTIMENT_LABELS), pad_id=tokenizer.pad_id)
    return Prepared(data, tokenizer, train_batch, test_batch, test, cut_train + cut_test, config)


COUNT_COLUMNS = ("split", "corpus", "documents", "sentences", *ratings.SENTIMENT_LABELS,
                 "with_rationale", "rationale_words")


def count_rows(prepared: Prepared) -> list[dict]:
    """Per split and corpus (and all corpora): documents, sentences, sentences per class,
    the share with a rationale word, and the mean number of rationale words of those."""
    out = []
    for split in ("train", "test"):
        sentences = getattr(prepared.data, split)
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


def setup(p: Parameters, condition: str, seed: int):
    """The agreement figures' AdamW training at the condition's rates
    (:func:`~qkov.language.comparison.agreement_setup`: cosine schedule with 10% warm-up,
    clipping at 1.0), with the HateXplain pipeline's weight decay, each batch cut to its
    longest sentence. As in the agreement figures, faster QK raises the position embedding
    with the token embedding (the HateXplain pipeline keeps it at the base rate)."""
    return agreement_setup(p, condition, seed, weight_decay=p.weight_decay, trim_padding=True)


def train(p: Parameters, prepared: Prepared) -> list[dict]:
    """Every run (:func:`runs`: condition and seed), measured: each worker's share of the
    runs trained as one stack (:func:`qkov.language.batched.train_classifiers`, the
    per-model loop's numbers to float64 rounding), on the pinned number of torch threads,
    so a run's rounding does not depend on where it ran."""
    return comparison.in_stacks(train_stack, (p, prepared), runs(p), p.workers)


def train_stack(p: Parameters, prepared: Prepared, share: list[tuple[str, int]]) -> list[dict]:
    """Train the runs ``share`` ((condition, seed) each) together, then measure each."""
    models = [Decoder(prepared.config, generator=init_generator(seed)).to(DTYPES[p.dtype])
              for _, seed in share]
    names = ", ".join(f"{condition} {seed}" for condition, seed in share)
    histories = train_classifiers(models, prepared.train,
                                  [setup(p, condition, seed) for condition, seed in share],
                                  progress=p.progress, desc=names,
                                  position=bar_position(p.workers))
    return [{"condition": condition, "seed": seed, "loss": history.loss,
             "measured": pipelines.evaluate_classifier(model, prepared.test, p.eraser_fraction)}
            for (condition, seed), model, history in zip(share, models, histories)]


def runs(p: Parameters) -> list[tuple[str, int]]:
    """The runs: every condition and seed."""
    return [(condition, seed) for condition in p.conditions for seed in p.seeds]


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


def glued(p: Parameters, prepared: Prepared, records) -> dict[str, str]:
    """The values the chapter quotes (myst-nb glue names, ``rs_`` first), from this run."""
    def key(condition):
        return condition.replace(" ", "_")

    d = prepared.data
    out = {"rs_n_seeds": str(len(p.seeds)), "rs_epochs": str(p.epochs), "rs_lr": f"{p.lr:g}",
           "rs_qk_multiplier": f"{p.qk_multiplier:g}", "rs_d_model": str(p.d_model),
           "rs_n_heads": str(p.n_heads), "rs_d_mlp": str(p.d_mlp),
           "rs_batch_size": str(p.batch_size), "rs_weight_decay": f"{p.weight_decay:g}",
           "rs_neutral_band": f"{p.neutral_band:g}", "rs_valence": f"{p.rationale_valence:g}",
           "rs_sentences": f"{len(d.train) + len(d.test):,}", "rs_train": f"{len(d.train):,}",
           "rs_test": f"{len(d.test):,}", "rs_lexicon_words": f"{d.lexicon_words:,}",
           "rs_rationale_words": f"{d.rationale_words:,}",
           "rs_vocab": f"{prepared.tokenizer.vocab_size:,}",
           "rs_eraser_percent": f"{100 * p.eraser_fraction:g}%"}
    for row in count_rows(prepared):
        if row["split"] == "test" and row["corpus"] == "all":
            out["rs_test_with_rationale"] = row["with_rationale"]
            for label in ratings.SENTIMENT_LABELS:
                out[f"rs_test_{label}"] = f"{row[label]:,}"
    majority, lexicon, uniform, k = (row["value"] for row in baseline_rows(prepared))
    out.update({"rs_majority": majority, "rs_lexicon_accuracy": lexicon,
                "rs_uniform_attention": uniform, "rs_k": k})
    for row in summary_table(records):
        for m in SUMMARY_COLUMNS[1:]:
            out[f"rs_{m}_{key(row['condition'])}"] = row[m]
    for row in gap_table(records):
        for m in GAP_COLUMNS[1:]:
            out[f"rs_gap_{m}_{key(row['condition'])}"] = row[m]
    return out


def heatmap_cells(maps) -> list[dict]:
    return comparison.heatmap_cells(maps)


# --- the figure -------------------------------------------------------------------------------


def _points(ax, records, conditions, measures, labels):
    """Per measure, one point per condition at the seeds' mean with its 95% interval, and
    each seed a small dot."""
    width = 0.8 / len(conditions)
    for k, c in enumerate(conditions):
        for j, m in enumerate(measures):
            x = j + (k - (len(conditions) - 1) / 2) * width
            mean, half = records_interval(records, m, condition=c)
            ax.errorbar([x], [mean], yerr=[half], color=COLORS[c], marker=MARKERS[c],
                        markeredgecolor="black", markeredgewidth=0.5, capsize=3,
                        label=c if j == 0 else None)
            seeds = [r[m] for r in records if r["condition"] == c]
            ax.plot(np.full(len(seeds), x), seeds, ".", color="black", markersize=2)
    ax.set_xticks(range(len(measures)), labels)


def plot(records, maps, baselines: dict):
    """(a) test accuracy, (b) attention on the rationale by rollout, (c) plausibility,
    (d) ERASER scores (the seeds' mean with its 95% interval, each seed a dot), with the
    baselines as dotted grey lines (the caption says which); below, one attention-vs-
    probability heatmap per condition (mean over seeds), three a row. ``baselines``:
    "majority", "uniform" (floats)."""
    conditions = comparison.conditions_in(records)
    with house_style():
        heat_rows = -(-len(conditions) // HEATMAPS_PER_ROW)
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 3.0 * 2 + 2.5 * heat_rows + 0.5))
        # Two subfigures, each laid out on its own: the panels' column edges above do not
        # squeeze the heatmaps below (two heatmaps' tick labels met where they did)
        top, bottom = fig.subfigures(2, 1, height_ratios=[2 * 3.0 + 0.5, 2.5 * heat_rows])
        grid = top.add_gridspec(2, 6)
        axes = [top.add_subplot(grid[0, 0:2]), top.add_subplot(grid[0, 2:6]),
                top.add_subplot(grid[1, 0:3]), top.add_subplot(grid[1, 3:6])]
        _points(axes[0], records, conditions, ["accuracy"], ["accuracy"])
        axes[0].axhline(baselines["majority"], color="grey", linestyle=":", linewidth=1)
        axes[0].set_title("(a) accuracy")
        _points(axes[1], records, conditions, [f"attention_{m}" for m in ATTENTION_METHODS],
                ["rollout", "layer mean", "layer max"])
        axes[1].axhline(baselines["uniform"], color="grey", linestyle=":", linewidth=1)
        axes[1].set_title("(b) attention on the rationale")
        _points(axes[2], records, conditions, list(PLAUSIBILITY_MEASURES),
                ["token F1", "IOU F1", "AUPRC"])
        axes[2].set_title("(c) plausibility")
        _points(axes[3], records, conditions, ["comprehensiveness", "sufficiency"],
                ["comprehen-\nsiveness", "sufficiency"])
        axes[3].axhline(0, color="black", linewidth=0.6)
        axes[3].set_title("(d) ERASER")
        for ax in axes[:3]:
            ax.set_ylim(0, 1.02)
        top.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=4)
        comparison.draw_heatmaps(bottom, bottom.add_gridspec(heat_rows, 2 * HEATMAPS_PER_ROW),
                                 0, maps, conditions, "attention on rationale",
                                 "P(true class)", "% of sentences", "efghijklmn")
    return fig


def plot_baselines(prepared: Prepared) -> dict:
    majority, _, uniform, _ = (float(row["value"]) for row in baseline_rows(prepared))
    return {"majority": majority, "uniform": uniform}


__all__ = ["SPEC", "Parameters", "prepare", "runs", "train", "rows", "summary_table", "gap_table",
           "heatmaps", "heatmap_cells", "plot", "count_rows", "COUNT_COLUMNS", "baseline_rows",
           "BASELINE_COLUMNS", "SUMMARY_COLUMNS", "GAP_COLUMNS"]
