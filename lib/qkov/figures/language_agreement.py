"""language-agreement: faster query-key learning on a synthetic subject-verb agreement task
(the companion's own language experiment, in the spirit of the paper's section 5).

A one-layer decoder reads a sentence prefix from :mod:`qkov.language.agreement` and predicts
the number of the verb at the first pad position. Each seed trains one model per condition
(:data:`CONDITIONS`) from the same initialisation and batch order: *matched* (every
parameter at the base learning rate) and *faster QK* (W_Q, W_K and the embeddings at
``qk_multiplier`` times it, as the paper's faster-QK runs), and three controls that tell
what the faster rate does where: *faster QK only* (W_Q, W_K alone at the multiplier), *all
faster* (every parameter at the multiplier) and *slow OV* (faster QK's ratio between the
circuits at matched's QK rate: every parameter but W_Q, W_K and the embeddings at the base
rate divided by the multiplier). All are measured on held-out sets with a fixed number of
modifiers and 0, 1, ... attractors: accuracy, attention on the subject from the readout
position (rollout, layer mean, layer max), ERASER comprehensiveness and sufficiency at the
top ``eraser_fraction`` of tokens by attention rollout
(:func:`qkov.language.metrics.eraser`, as every language figure), and the
attention-vs-probability heatmap. After every epoch: the accuracy on each held-out set, and
on the sentences with one attractor, split by whether the attractor is the noun nearest the
verb (:func:`nearest_noun_table`).

Each seed also trains every condition on a harder variant (:data:`RARE`, parameter
``rare_attractors``): fewer training sentences, in which attractors are rare, measured on
the same held-out sets, where they are common. Its accuracy is below the ceiling, so the
conditions can differ in it.

:class:`Parameters` are the notebook's (with the run's :meth:`~Parameters.work`, which
bounds its time before it starts, and size bounds, which keep a typo from filling the
memory); :func:`runs` are every (variant, condition, seed), :func:`train` trains them all;
:func:`rows` are the records (:func:`of_variant` picks one variant's: the default
variant's are stored as ``data.csv``, the harder one's as ``rare-attractors.csv``),
:func:`summary_table` / :func:`attractor_table` / :func:`nearest_noun_table` the printed
tables, :func:`plot` and :func:`plot_rare` the drawings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.ticker import MaxNLocator

from ..checks import ParameterError, boolean, integer, number, seed_list
from ..cost import Work
from ..language import agreement
from ..language.batched import train_classifiers
from ..language.comparison import (  # noqa: F401  (the notebook and tests read them from here)
    ATTRACTOR_COLUMNS,
    COLORS,
    COMPARISON_COLUMNS,
    CONDITIONS,
    DEFAULT,
    DTYPES,
    HEATMAP_BINS,
    HEATMAPS_PER_ROW,
    MARKERS,
    MEASURES,
    RECORD_COLUMNS,
    SUMMARY_COLUMNS,
    accuracy_title,
    against_attractors,
    agreement_setup,
    attractor_table,
    bar_position,
    check_model_parameters,
    comparison_table,
    condition_list,
    condition_setup,
    conditions_in,
    draw_heatmaps,
    dtype_name,
    heatmap_cells,
    heatmaps,
    of_variant,
    on_pinned_threads,
    one_variant,
    paired_gap,
    rows,
    summary_table,
)
from ..language.metrics import (
    ATTENTION_METHODS,
    ERASER_FRACTION,
    ERASER_MEASURES,
    accuracy,
    eraser,
    rationale_attention_mass,
)
from ..language.models import Decoder, DecoderConfig
from ..language.train import TrainingSetup
from ..params import FigureParameters, parameter
from ..plotting import COLUMN_WIDTH_IN, house_style, new_figure
from ..processes import map_in_processes
from ..seeding import derived_seed, init_generator
from ..spec import Drawing, FigureSpec
from ..stats import interval_text, seed_interval

# The companion's own synthetic stand-in for the paper's section 5; it computes in its
# `dtype` parameter (float64 by default: see the book's "Precision" section).
SPEC = FigureSpec(id="language-agreement", reproduces=None, page="book/language",
                  tables=("heatmaps.csv", "curves.csv", "nearest-noun.csv",
                          "rare-attractors.csv"), threads=2,
                  dtype=None, resources={"mem_mb": 4000, "runtime": 30},
                  alt=("Six line plots, one line per learning-rate condition: held-out accuracy, "
                       "attention on the subject, and comprehensiveness and sufficiency against the "
                       "number of attractors in a sentence; then against the epoch, accuracy on "
                       "sentences whose modifiers all carry the other number, and on sentences with one "
                       "attractor, when it is the noun nearest the verb and when it is not; below, one "
                       "heatmap per condition of test sentences binned by attention on the subject (x) "
                       "and probability of the true number (y), each cell its percentage."),
                  extra_drawings=(Drawing("rare", None, alt=(
                      "Two line plots against the number of attractors in a held-out sentence, one "
                      "line per learning-rate condition, for models trained on sentences in which "
                      "attractors are rare: held-out accuracy (left) and attention on the subject "
                      "(right), mean over seeds with 95% intervals.")),),
    # measured: the default run took 31 s on 2 cores of an AMD EPYC (2026-12-07)
    rates={"sentence passes": 90_000})

# The variants every (condition, seed) trains on: the default one, and one in which the
# training sentences rarely hold an attractor (Parameters.rare_*). Both are measured on the
# same held-out sets.
RARE = "rare attractors"
VARIANTS = (DEFAULT, RARE)


# Size bounds: far above the paper-scale defaults, below what fills a laptop's memory before
# the first step (the weights and AdamW state of MAX_LAYERS layers of width MAX_D_MODEL in
# float64 are about 1.6 GB per training process; the sentences are generated all at once).
MAX_MODIFIERS = 20  # sentences of up to agreement.width(20) = 104 positions
MAX_LAYERS = 12
MAX_D_MODEL = 1024
MAX_HEADS = 32
MAX_TRAIN_SENTENCES = 1_000_000
MAX_TEST_SENTENCES = 100_000  # per attractor count
# A held-out set is measured in one batch, and a training step is one batch: the attention
# maps of such a batch (every layer's [rows, heads, positions, positions]) must fit in this.
MAX_ATTENTION_GB = 8.0

# The work of a run, in forward passes of one sentence through the default model (see
# Parameters.work): a training sentence through the batched trainer (its forward, backward
# and optimizer step, which reads only the readout's row, shared by the seed's stack) costs
# about one pass; each optimizer step adds a small fixed cost per run (measured: 117 more
# steps of a stack of the 5 conditions took 0.05 s, about STEP_PASSES sentence passes per
# run and step); the final measurement of a held-out sentence is 4 passes (the prediction
# and the ERASER probabilities: full, without and with only the top tokens), one model at a
# time.
TRAIN_PASSES = 1
STEP_PASSES = 4
FINAL_PASSES = 4


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: a run of about two minutes on two CPU cores)."""

    seeds: list = parameter(
        [1234, 1235, 1236, 1237, 1238], seed_list,
        doc="one run per condition and seed")
    conditions: list = parameter(list(CONDITIONS), condition_list, doc="\"matched\" first")
    # Sentences: training ones per seed, held-out ones per attractor count. Sizes are bounded
    # (MAX_TRAIN_SENTENCES ... MAX_HEADS): see there.
    train_sentences: int = parameter(
        2000, integer, minimum=1, maximum=MAX_TRAIN_SENTENCES,
        doc="training sentences per seed, 0 to max_modifiers modifiers")
    test_sentences: int = parameter(
        500, integer, minimum=1, maximum=MAX_TEST_SENTENCES,
        doc="held-out sentences per attractor count (max_modifiers modifiers)")
    # PPs / relative clauses per sentence
    max_modifiers: int = parameter(
        3, integer, minimum=1, maximum=MAX_MODIFIERS,
        doc="prepositional phrases / relative clauses after the subject")
    n_layers: int = parameter(
        1, integer, minimum=1, maximum=MAX_LAYERS,
        doc="decoder layers (attention output only, no MLP, no LayerNorm)")
    d_model: int = parameter(
        32, integer, minimum=1, maximum=MAX_D_MODEL,
        doc="residual width; each head is d_model / n_heads wide")
    # attention heads (d_head: d_model / n_heads)
    n_heads: int = parameter(2, integer, minimum=1, maximum=MAX_HEADS, doc="attention heads")
    epochs: int = parameter(20, integer, minimum=1, doc="passes over the training sentences")
    # The harder variant: every condition and seed trained again on rare_train_sentences
    # sentences in which a modifier's noun is an attractor with probability rare_attractor_prob
    # (0.5 in the default variant), measured on the same held-out sets
    rare_attractors: bool = parameter(
        True, boolean,
        doc="also train every condition and seed on the harder variant")
    rare_train_sentences: int = parameter(
        1000, integer, minimum=1, maximum=MAX_TRAIN_SENTENCES,
        doc="training sentences per seed in the harder variant")
    rare_attractor_prob: float = parameter(
        0.1, number, at_least=0, at_most=1,
        doc="its chance that a modifier's noun is an attractor (default variant: 0.5)")
    batch_size: int = parameter(64, integer, minimum=1, doc="sentences per step")
    lr: float = parameter(
        1e-3, number, above=0,
        doc="AdamW base learning rate (cosine schedule, 10% warmup, clip 1.0)")
    qk_multiplier: float = parameter(
        30.0, number, above=0,
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
        most = max(self.train_sentences, self.rare_train_sentences if self.rare_attractors else 0)
        for n, what in ((self.test_sentences, "test_sentences (a held-out set is one batch)"),
                        (min(self.batch_size, most), "batch_size")):
            gb = attention_bytes(self, n) / 1e9
            if gb > MAX_ATTENTION_GB:
                raise ParameterError(what.split()[0], (
                    f"the attention maps of one batch of {n:,} sentences would take {gb:.3g} GB "
                    f"(rows x n_layers x n_heads x positions^2, {self.dtype}), above "
                    f"{MAX_ATTENTION_GB:g} GB; lower {what}, n_layers, n_heads or max_modifiers"))

    def work(self) -> Work:
        """Forward passes of one sentence through the default-size model that the run asks
        for: per (condition, seed), every epoch trains on ``train_sentences``
        (:data:`TRAIN_PASSES` each; each optimizer step adds :data:`STEP_PASSES`) and
        measures the accuracy on ``max_modifiers + 1`` held-out sets of ``test_sentences``
        (one pass each; the split of the one-attractor set by its nearest noun reuses that
        pass); at the end each held-out sentence is measured in :data:`FINAL_PASSES`
        passes. With ``rare_attractors`` each (condition, seed) trains once more, on
        ``rare_train_sentences`` for as many epochs, without the measurement after every
        epoch, and is measured at the end as the default variant. A pass through a larger
        model counts more: per position
        and layer as ``d_model + n_heads * positions + d_model**2 / 64``, which followed the
        time of a run of the per-model loop on a CPU to within about a factor 2 (timed one
        run at a time, changing one of batch_size 8-2000, d_model 32-256, n_heads 2-8,
        n_layers 1-4, max_modifiers 3-10, test_sentences 500-2000); the rate is the batched
        trainer's at the default size, and that scaling has not been timed again for it.
        The estimate in minutes counts ``workers`` (:mod:`qkov.cost`)."""
        held_out = (self.max_modifiers + 1) * self.test_sentences
        size = pass_size(self) / pass_size(type(self).defaults())

        def run(sentences: int, measured_per_epoch: bool) -> float:
            steps = math.ceil(sentences / self.batch_size)
            per_epoch = TRAIN_PASSES * sentences + (held_out if measured_per_epoch else 0)
            return ((self.epochs * per_epoch + FINAL_PASSES * held_out) * size
                    + self.epochs * steps * STEP_PASSES)

        per_run = run(self.train_sentences, True) \
            + (run(self.rare_train_sentences, False) if self.rare_attractors else 0)
        return Work(len(self.seeds) * len(self.conditions) * per_run,
                    "sentence passes", "of the default model")


def pass_size(p) -> float:
    """How much one sentence's forward pass computes, relative units (see Parameters.work);
    ``p`` has the parameters as attributes or keys."""
    get = p.get if isinstance(p, dict) else lambda name: getattr(p, name)
    d, positions = get("d_model"), agreement.width(get("max_modifiers"))
    return positions * get("n_layers") * (d + get("n_heads") * positions + d * d / 64)


def attention_bytes(p: Parameters, sentences: int) -> int:
    """The bytes of every layer's attention probabilities for one batch of ``sentences``
    sentences: what a batch holds at least, beyond the weights."""
    positions = agreement.width(p.max_modifiers)
    return sentences * p.n_layers * p.n_heads * positions ** 2 * DTYPES[p.dtype].itemsize


def model_config(p: Parameters) -> DecoderConfig:
    """One layer, attention output only (no MLP), residual, no LayerNorm: the paper's
    agreement model, smaller."""
    return DecoderConfig(vocab_size=len(agreement.VOCABULARY),
                         max_len=agreement.width(p.max_modifiers), n_layers=p.n_layers,
                         d_model=p.d_model,
                         n_heads=p.n_heads, d_head=p.d_model // p.n_heads, d_mlp=0,
                         n_classes=2, pad_id=agreement.VOCABULARY.pad_id)


def setup(p: Parameters, condition: str, seed: int) -> TrainingSetup:
    """The condition's learning rates: the base rate times 1, ``qk_multiplier`` or its
    inverse per circuit, as :data:`CONDITIONS` says."""
    return agreement_setup(p, condition, seed)


def held_out_sets(p: Parameters, seed: int) -> dict[int, agreement.AgreementData]:
    """Held-out sentences with ``max_modifiers`` modifiers (a fixed distance) and each
    attractor count 0..max_modifiers."""
    return {a: agreement.generate(p.test_sentences, derived_seed(seed, "eval") + a,
                                  modifiers=p.max_modifiers, attractors=a)
            for a in range(p.max_modifiers + 1)}


def evaluate(model, data: agreement.AgreementData, fraction: float) -> dict:
    """Per-sentence measurements of one model on one held-out set."""
    with torch.no_grad():
        out = model(data.tokens, data.attention_mask)

        def predict_proba(tokens, mask):
            return torch.softmax(model(tokens, mask).logits, -1)

        probability = torch.softmax(out.logits, -1).gather(1, data.labels[:, None]).squeeze(1)
        readout = out.readout_index
        attention = {m: rationale_attention_mass(out.attentions, data.rationale, readout,
                                                 data.attention_mask, m).numpy()
                     for m in ATTENTION_METHODS}
        scores = eraser(predict_proba, data.tokens, data.attention_mask, data.labels,
                        out.attentions, readout, fraction, agreement.VOCABULARY.pad_id)
        return {"accuracy": accuracy(out.logits, data.labels),
                "probability": probability.numpy(), "attention": attention,
                **{m: scores[m].numpy() for m in ERASER_MEASURES}}


def nearest_attractor(data: agreement.AgreementData) -> torch.Tensor:
    """Per sentence: whether the noun nearest the verb carries the other number than the
    subject (an attractor; in a set with one attractor per sentence, whether that attractor
    is the nearest noun)."""
    return agreement.nearest_noun_number(data.tokens) != data.labels


def subset_accuracy(right: torch.Tensor, subset: torch.Tensor) -> float:
    """The share of ``right`` among the sentences of ``subset`` (NaN for none)."""
    return float(right[subset].double().mean()) if subset.any() else float("nan")


def train(p: Parameters) -> list[dict]:
    """Every run of :func:`runs`, measured, in the order of :func:`runs`. The conditions of
    one seed (and variant) read the same sentences, so they train as one stack
    (:func:`qkov.language.batched.train_classifiers`, the per-model loop's numbers to float64
    rounding); the stacks run on ``p.workers`` processes, on the pinned number of torch
    threads, and a run's numbers do not depend on how they are split."""
    groups = list(dict.fromkeys((variant, seed) for _, _, seed, variant in runs(p)))
    found = map_in_processes(on_pinned_threads,
                             [(train_group, p, variant, seed) for variant, seed in groups],
                             p.workers)
    by_run = {(r["variant"], r["condition"], r["seed"]): r for group in found for r in group}
    return [by_run[(variant, condition, seed)] for _, condition, seed, variant in runs(p)]


def training_sentences(p: Parameters, seed: int, variant: str) -> agreement.AgreementData:
    """The training sentences of a seed: 0 to ``max_modifiers`` modifiers, each modifier's
    noun an attractor with probability 0.5 (default variant) or ``rare_attractor_prob``
    (:data:`RARE`, ``rare_train_sentences`` of them); drawn from the same seed."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    n, prob = ((p.train_sentences, 0.5) if variant == DEFAULT
               else (p.rare_train_sentences, p.rare_attractor_prob))
    return agreement.generate(n, derived_seed(seed, "data"), modifiers=(0, p.max_modifiers),
                              attractor_prob=prob)


def train_group(p: Parameters, variant: str, seed: int) -> list[dict]:
    """Every condition of one seed and variant, trained together on the seed's sentences,
    then measured on every held-out set."""
    data = training_sentences(p, seed, variant)
    # Initialised in float32 and then converted: both dtypes start from the same weights.
    # Training runs in float64 by default: at the faster QK rates float32 rounding is
    # amplified until the printed digits depend on the CPU (the book's reproducibility page).
    models = [Decoder(model_config(p), generator=init_generator(seed)).to(DTYPES[p.dtype])
              for _ in p.conditions]
    tests = held_out_sets(p, seed)
    one = tests[1]  # max_modifiers modifiers, one of them an attractor
    nearest = nearest_attractor(one)

    def measure(stack, trained):
        """After every epoch, per run: the accuracy on each held-out set, then on the
        one-attractor sentences whose attractor is the nearest noun and on the others."""
        logits = {a: stack.readout(t.tokens, t.attention_mask)[0]
                  for a, t in tests.items()}
        found = []
        for run in range(len(trained)):
            right = logits[1][run].argmax(-1) == one.labels
            found.append({"accuracy": [accuracy(logits[a][run], t.labels) for a, t in tests.items()]
                          + [subset_accuracy(right, nearest), subset_accuracy(right, ~nearest)]})
        return found

    # The harder variant is measured at the end only (the run's cost, Parameters.work).
    histories = train_classifiers(
        models, data, [setup(p, condition, seed) for condition in p.conditions],
        evaluate=measure if variant == DEFAULT else None, progress=p.progress,
        desc=f"seed {seed}" + ("" if variant == DEFAULT else f", {variant}"),
        position=bar_position(p.workers))
    results = []
    for condition, model, history in zip(p.conditions, models, histories):
        evaluations = [e["accuracy"] for e in history.evaluations]
        by_epoch = np.array(evaluations, dtype=float).reshape(len(evaluations), len(tests) + 2)
        results.append({
            "variant": variant, "condition": condition, "seed": seed, "loss": history.loss,
            "accuracy_by_epoch": by_epoch[:, :len(tests)],  # [epochs, attractor counts]
            # [epochs, 2]: one-attractor sentences, attractor nearest / elsewhere
            "nearest_by_epoch": by_epoch[:, len(tests):],
            "nearest_sentences": (int(nearest.sum()), int((~nearest).sum())),
            "evaluation": {a: evaluate(model, test, p.eraser_fraction)
                           for a, test in tests.items()}})
    return results


def runs(p: Parameters) -> list[tuple]:
    """The runs, (parameters, condition, seed, variant) each: every condition and seed of the
    default variant, then, with ``rare_attractors``, of the harder one."""
    variants = VARIANTS if p.rare_attractors else (DEFAULT,)
    return [(p, condition, seed, variant) for variant in variants
            for condition in p.conditions for seed in p.seeds]


# --- rows and tables ------------------------------------------------------------------------

CURVE_COLUMNS = ("condition", "seed", "epoch", "train_loss", "attractors", "accuracy")


def curve_rows(results: list[dict]) -> list[dict]:
    """Per (condition, seed, epoch, attractor count) of the default variant: the epoch's
    training loss and the held-out accuracy after it."""
    return [{"condition": run["condition"], "seed": run["seed"], "epoch": epoch + 1,
             "train_loss": run["loss"][epoch], "attractors": attractors,
             "accuracy": float(run["accuracy_by_epoch"][epoch, k])}
            for run in of_variant(results, DEFAULT) for epoch in range(len(run["loss"]))
            for k, attractors in enumerate(sorted(run["evaluation"]))]


NEAREST_COLUMNS = ("condition", "seed", "epoch", "nearest_attractor_accuracy",
                   "other_attractor_accuracy", "nearest_attractor_sentences",
                   "other_attractor_sentences")


def nearest_rows(results: list[dict]) -> list[dict]:
    """Per (condition, seed, epoch) of the default variant, on the held-out sentences with one
    attractor: the accuracy where the attractor is the noun nearest the verb and where it is
    not, and how many sentences each has."""
    return [{"condition": run["condition"], "seed": run["seed"], "epoch": epoch + 1,
             "nearest_attractor_accuracy": float(run["nearest_by_epoch"][epoch, 0]),
             "other_attractor_accuracy": float(run["nearest_by_epoch"][epoch, 1]),
             "nearest_attractor_sentences": run["nearest_sentences"][0],
             "other_attractor_sentences": run["nearest_sentences"][1]}
            for run in of_variant(results, DEFAULT) for epoch in range(len(run["loss"]))]


SOLVED_ACCURACY = 0.95  # nearest_noun_table's "solved": this accuracy, mean over seeds


def worst_epoch(results: list[dict], condition: str) -> int:
    """The epoch (from 1) after which ``condition``'s models, mean over seeds, get the
    fewest held-out sentences right whose modifiers all carry the other number (the first
    such epoch where several tie)."""
    return int(np.argmin(_all_attractor_curve(results, condition))) + 1


def solved_epoch(results: list[dict], condition: str) -> int | None:
    """The first epoch after which ``condition``'s models, mean over seeds, get at least
    :data:`SOLVED_ACCURACY` of the held-out sentences right whose modifiers all carry the
    other number; None if none."""
    reached = np.flatnonzero(_all_attractor_curve(results, condition) >= SOLVED_ACCURACY)
    return int(reached[0]) + 1 if len(reached) else None


def _all_attractor_curve(results, condition) -> np.ndarray:
    return np.mean([run["accuracy_by_epoch"][:, -1] for run in of_variant(results, DEFAULT)
                    if run["condition"] == condition], 0)


def nearest_noun_columns(results: list[dict]) -> tuple[str, ...]:
    """:func:`nearest_noun_table`'s columns: one accuracy per attractor count."""
    counts = sorted(of_variant(results, DEFAULT)[0]["evaluation"])
    return ("condition", "epoch", *(f"attractors_{a}" for a in counts), "one_nearest",
            "one_elsewhere", "solved")


def nearest_noun_table(results: list[dict]) -> list[dict]:
    """Per condition, after its :func:`worst_epoch`: the held-out accuracy with each number
    of attractors, and on the sentences with one attractor where it is the noun nearest the
    verb ("one_nearest") and where it is not ("one_elsewhere"), mean over seeds ± 95%
    interval; and the condition's :func:`solved_epoch` ("-" if none). A model that
    followed the nearest noun would fail one_nearest as it fails the sentences with every
    modifier an attractor; one that followed the number most nouns carry would not."""
    results = of_variant(results, DEFAULT)
    counts = sorted(results[0]["evaluation"])
    table = []
    for c in [c for c in CONDITIONS if any(run["condition"] == c for run in results)]:
        runs = [run for run in results if run["condition"] == c]
        e = worst_epoch(results, c)
        solved = solved_epoch(results, c)
        columns = [(f"attractors_{a}", [run["accuracy_by_epoch"][e - 1, k] for run in runs])
                   for k, a in enumerate(counts)]
        columns += [("one_nearest", [run["nearest_by_epoch"][e - 1, 0] for run in runs]),
                    ("one_elsewhere", [run["nearest_by_epoch"][e - 1, 1] for run in runs])]
        table.append({"condition": c, "epoch": e,
                      **{name: interval_text(*seed_interval(v)) for name, v in columns},
                      "solved": "-" if solved is None else solved})
    return table


# --- the figure ---------------------------------------------------------------------------

def plot(records, maps, results):
    """The default variant. Top three rows: accuracy, rollout attention on the subject, and
    comprehensiveness / sufficiency against the number of attractors (mean over seeds, bars:
    95% interval); after each epoch, held-out accuracy with the most attractors, and on the
    sentences with one attractor where it is the noun nearest the verb and where it is not.
    Below them, three a row: one attention-vs-probability heatmap per condition (mean over
    seeds)."""
    records, results = one_variant(records), one_variant(results)
    attractors = sorted({r["attractors"] for r in records})
    conditions = conditions_in(records)
    with house_style():
        # Three rows of two line panels, then the heatmaps three a row: at the book's width a
        # row of four heatmaps leaves no room for the numbers in their cells. Rows lower than
        # the other language figures' (3.0 and 2.5 inches): the PDF fits a figure's height to
        # the page, so a taller one prints narrower, its text smaller than the others'.
        heat_rows = -(-len(conditions) // HEATMAPS_PER_ROW)
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 2.5 * 3 + 2.2 * heat_rows + 0.5))
        # Six columns: a line panel spans three, a heatmap two.
        grid = fig.add_gridspec(3 + heat_rows, 2 * HEATMAPS_PER_ROW,
                                height_ratios=[1, 1, 1] + [0.95] * heat_rows)
        axes = [fig.add_subplot(grid[row, 3 * col:3 * col + 3])
                for row in (0, 1, 2) for col in (0, 1)]
        accuracy_means = against_attractors(
            axes, records, conditions, attractors,
            ((axes[0], "accuracy", "-"), (axes[1], "attention_rollout", "-"),
             (axes[2], "comprehensiveness", "-"), (axes[2], "sufficiency", "--")))
        per_epoch = ((axes[3], lambda run: run["accuracy_by_epoch"][:, -1]),
                     (axes[4], lambda run: run["nearest_by_epoch"][:, 0]),
                     (axes[5], lambda run: run["nearest_by_epoch"][:, 1]))
        for c in conditions:
            for ax, curve in per_epoch:
                curves = np.array([curve(run) for run in results if run["condition"] == c])
                ax.plot(np.arange(1, curves.shape[1] + 1), curves.mean(0),
                        color=COLORS[c], marker=MARKERS[c], markersize=4,
                        markeredgecolor="black", markeredgewidth=0.5, label=c)
        titles = (accuracy_title("(a) held-out accuracy", accuracy_means),
                  "(b) attention on the subject\n(rollout)",
                  "(c) comprehensiveness (solid),\nsufficiency (dashed)",
                  f"(d) accuracy, {attractors[-1]} attractors in\n{attractors[-1]} modifiers, per epoch",
                  "(e) accuracy, 1 attractor: the noun\nnearest the verb, per epoch",
                  "(f) accuracy, 1 attractor: another\nnoun than the nearest, per epoch")
        for ax, title in zip(axes, titles):
            ax.set_title(title)
        axes[0].set_ylim(0.45, 1.02)  # chance is 0.5
        axes[1].set_ylim(0, 1.02)
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center",
                   ncols=3)
        for ax, _ in per_epoch:
            ax.set_ylim(-0.02, 1.02)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("epoch")
        draw_heatmaps(fig, grid, 3, maps, conditions, "attention on subject",
                      "P(true number)", "% of sentences", "ghijklmnop")
    return fig


def plot_rare(records):
    """The harder variant (:data:`RARE`): held-out accuracy and rollout attention on the
    subject against the number of attractors, one line per condition (mean over seeds,
    bars: 95% interval)."""
    records = one_variant(records)
    attractors = sorted({r["attractors"] for r in records})
    conditions = conditions_in(records)
    if not records:  # a run without the harder variant (rare_attractors False)
        with house_style():
            fig = new_figure(figsize=(COLUMN_WIDTH_IN, 1.0))
            fig.text(0.5, 0.5, "The harder variant was not run (rare_attractors False).",
                     ha="center", va="center")
        return fig
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 3.9))
        axes = fig.subplots(1, 2)
        means = against_attractors(axes, records, conditions, attractors,
                                    ((axes[0], "accuracy", "-"),
                                     (axes[1], "attention_rollout", "-")))
        axes[0].set_title(accuracy_title("(a) held-out accuracy", means))
        axes[1].set_title("(b) attention on the subject\n(rollout)")
        axes[0].set_ylim(-0.02, 1.02)
        axes[0].axhline(0.5, color="0.5", linewidth=0.8, linestyle=":")
        axes[1].set_ylim(0, 1.02)
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center",
                   ncols=3)
    return fig
