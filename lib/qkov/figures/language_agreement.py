"""language-agreement: faster query-key learning on a synthetic subject-verb agreement task
(the companion's own language experiment, in the spirit of the paper's section 5).

A one-layer decoder reads a sentence prefix from :mod:`qkov.language.agreement` and predicts
the number of the verb at the first pad position. Each seed trains one model per condition
(:data:`CONDITIONS`) from the same initialisation and batch order: *matched* (every
parameter at the base learning rate) and *faster QK* (W_Q, W_K and the embeddings at
``qk_multiplier`` times it, as the paper's faster-QK runs), and two controls that tell what
the faster rate does where: *faster QK only* (W_Q, W_K alone at the multiplier) and *all
faster* (every parameter at the multiplier). All are measured on held-out sets with a fixed
number of modifiers and 0, 1, ... attractors: accuracy, attention on the subject from the
readout position (rollout, layer mean, layer max), ERASER comprehensiveness and sufficiency
at the top ``eraser_fraction`` of tokens by attention rollout
(:func:`qkov.language.metrics.eraser`, as every language figure), and the
attention-vs-probability heatmap.

:class:`Parameters` are the notebook's (with the run's :meth:`~Parameters.work`, which
bounds its time before it starts, and size bounds, which keep a typo from filling the
memory); :func:`train` runs every (condition, seed), each with a progress bar;
:func:`rows` are the stored records, :func:`summary_table` / :func:`attractor_table` the
printed tables, :func:`plot` the figure.
"""

from __future__ import annotations

import math
import multiprocessing
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.ticker import MaxNLocator

from .. import pinned_threads
from ..language import agreement
from ..language.metrics import (
    ATTENTION_METHODS,
    ERASER_FRACTION,
    ERASER_MEASURES,
    accuracy,
    attention_probability_heatmap,
    eraser,
    rationale_attention_mass,
)
from ..language.models import Decoder, DecoderConfig
from ..language.train import (
    ALL_FASTER,
    FASTER_QK,
    FASTER_QK_ONLY,
    MATCHED,
    TrainingSetup,
    train_classifier,
)
from ..params import (
    FigureParameters,
    ParameterError,
    Work,
    boolean,
    integer,
    number,
    optional_path,
    parameter,
    seed_list,
)
from ..plotting import COLUMN_WIDTH_IN, house_style, new_figure
from ..processes import map_in_processes
from ..seeding import derived_seed, init_generator
from ..spec import FigureSpec
from ..stats import interval_text, records_interval, seed_interval

# The companion's own synthetic stand-in for the paper's section 5; it computes in its
# `dtype` parameter (float64 by default: see the book's "Precision" section).
SPEC = FigureSpec(id="language-agreement", reproduces=None, page="book/language",
                  tables=("heatmaps.csv", "curves.csv"), threads=2, dtype=None,
                  resources={"mem_mb": 4000, "runtime": 30},
                  alt=("Four line plots against the number of attractors in a sentence or the epoch, one "
                       "line per learning-rate condition: held-out accuracy, attention on the subject, "
                       "comprehensiveness and sufficiency, and accuracy per epoch; below, one heatmap per "
                       "condition of test sentences binned by attention on the subject (x) and probability "
                       "of the true number (y), each cell its percentage."))

# condition: (multiplier of W_Q and W_K, of the embeddings, of every other parameter)
# (the names are qkov.language.train's, shared with the real-data figures)
CONDITIONS = {MATCHED: ("1", "1", "1"), FASTER_QK: ("m", "m", "1"),
              FASTER_QK_ONLY: ("m", "1", "1"), ALL_FASTER: ("m", "m", "m")}


def condition_list(name: str, value) -> list[str]:
    """A non-empty list of distinct condition names, "matched" first (the reference)."""
    if not isinstance(value, (list, tuple)) or not value \
            or any(not isinstance(c, str) or c not in CONDITIONS for c in value) \
            or len(set(value)) != len(value) or value[0] != MATCHED:
        raise ParameterError(name, f"expected a list of distinct conditions from "
                             f"{list(CONDITIONS)}, \"matched\" first; got {value!r}")
    return list(value)


HEATMAP_BINS = 5
DTYPES = {"float64": torch.float64, "float32": torch.float32}

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
# Parameters.work): a training sentence is a forward and a backward pass, about 3 forward
# ones; every optimizer step adds a fixed cost (optimizer, clipping, schedule: on a CPU at the
# default size about as long as STEP_PASSES sentence passes); the final measurement of a
# held-out sentence is 4 passes (the prediction and the ERASER probabilities: full, without
# and with only the top tokens).
TRAIN_PASSES = 3
STEP_PASSES = 60
FINAL_PASSES = 4


def dtype_name(name: str, value) -> str:
    if value not in DTYPES:
        raise ParameterError(name, f"expected one of {list(DTYPES)}, got {value!r}")
    return value


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: a run of about two minutes on two CPU cores)."""

    seeds: list = parameter([1234, 1235, 1236, 1237, 1238], seed_list)
    conditions: list = parameter(list(CONDITIONS), condition_list)  # see CONDITIONS
    # Sentences: training ones per seed, held-out ones per attractor count. Sizes are bounded
    # (MAX_TRAIN_SENTENCES ... MAX_HEADS): see there.
    train_sentences: int = parameter(2000, integer, minimum=1, maximum=MAX_TRAIN_SENTENCES)
    test_sentences: int = parameter(500, integer, minimum=1, maximum=MAX_TEST_SENTENCES)
    # PPs / relative clauses per sentence
    max_modifiers: int = parameter(3, integer, minimum=1, maximum=MAX_MODIFIERS)
    n_layers: int = parameter(1, integer, minimum=1, maximum=MAX_LAYERS)  # decoder layers
    d_model: int = parameter(32, integer, minimum=1, maximum=MAX_D_MODEL)  # residual width
    # attention heads (d_head: d_model / n_heads)
    n_heads: int = parameter(2, integer, minimum=1, maximum=MAX_HEADS)
    epochs: int = parameter(20, integer, minimum=1)
    batch_size: int = parameter(64, integer, minimum=1)
    lr: float = parameter(1e-3, number, above=0)  # AdamW base learning rate
    qk_multiplier: float = parameter(30.0, number, above=0)  # the conditions' multiplier m
    eraser_fraction: float = parameter(ERASER_FRACTION, number, above=0)  # top share (>= 1 token)
    workers: int = parameter(2, integer, minimum=1)  # training processes
    dtype: str = parameter("float64", dtype_name)  # float64: printed digits survive rounding
    progress: bool = parameter(True, boolean)  # a progress bar per training run, on stderr
    artifacts_dir: str | None = parameter(None, optional_path)

    def check(self):
        if self.eraser_fraction > 1:
            raise ParameterError("eraser_fraction", f"expected a share in (0, 1], got "
                                 f"{self.eraser_fraction:g}")
        if self.d_model % self.n_heads:
            raise ParameterError("n_heads", f"expected a divisor of d_model={self.d_model}, "
                                 f"got {self.n_heads}")
        for rows, what in ((self.test_sentences, "test_sentences (a held-out set is one batch)"),
                           (min(self.batch_size, self.train_sentences), "batch_size")):
            gb = attention_bytes(self, rows) / 1e9
            if gb > MAX_ATTENTION_GB:
                raise ParameterError(what.split()[0], (
                    f"the attention maps of one batch of {rows:,} sentences would take {gb:.3g} GB "
                    f"(rows x n_layers x n_heads x positions^2, {self.dtype}), above "
                    f"{MAX_ATTENTION_GB:g} GB; lower {what}, n_layers, n_heads or max_modifiers"))

    def work(self) -> Work:
        """Forward passes of one sentence through the default-size model that the run asks
        for: per (condition, seed), every epoch trains on ``train_sentences`` (forward and
        backward, :data:`TRAIN_PASSES`; each optimizer step adds :data:`STEP_PASSES`) and
        measures the accuracy on ``max_modifiers + 1`` held-out sets of ``test_sentences``
        (one pass each); at the end each held-out sentence is measured in
        :data:`FINAL_PASSES` passes. A pass through a larger model counts more: per position
        and layer as ``d_model + n_heads * positions + d_model**2 / 64``, which follows the
        time of a run on a CPU to within about a factor 2 (timed one run at a time, changing
        one of batch_size 8-2000, d_model 32-256, n_heads 2-8, n_layers 1-4, max_modifiers
        3-10, test_sentences 500-2000). The estimate in minutes counts ``workers``
        (:meth:`~qkov.params.FigureParameters.cost`)."""
        held_out = (self.max_modifiers + 1) * self.test_sentences
        steps = math.ceil(self.train_sentences / self.batch_size)
        size = pass_size(self) / pass_size(type(self).defaults())
        per_run = (self.epochs * (TRAIN_PASSES * self.train_sentences + held_out)
                   + FINAL_PASSES * held_out) * size + self.epochs * steps * STEP_PASSES
        return Work(len(self.seeds) * len(self.conditions) * per_run,
                    "sentence passes of the default model")


def pass_size(p) -> float:
    """How much one sentence's forward pass computes, relative units (see Parameters.work);
    ``p`` has the parameters as attributes or keys."""
    get = p.get if isinstance(p, dict) else lambda name: getattr(p, name)
    d, positions = get("d_model"), agreement.width(get("max_modifiers"))
    return positions * get("n_layers") * (d + get("n_heads") * positions + d * d / 64)


def attention_bytes(p: Parameters, rows: int) -> int:
    """The bytes of every layer's attention probabilities for one batch of ``rows``
    sentences: what a batch holds at least, beyond the weights."""
    positions = agreement.width(p.max_modifiers)
    return rows * p.n_layers * p.n_heads * positions ** 2 * DTYPES[p.dtype].itemsize


def model_config(p: Parameters) -> DecoderConfig:
    """One layer, attention output only (no MLP), residual, no LayerNorm: the paper's
    agreement model, smaller."""
    return DecoderConfig(vocab_size=len(agreement.VOCABULARY),
                         max_len=agreement.width(p.max_modifiers), n_layers=p.n_layers,
                         d_model=p.d_model,
                         n_heads=p.n_heads, d_head=p.d_model // p.n_heads, d_mlp=0,
                         n_classes=2, pad_id=agreement.VOCABULARY.pad_id)


def setup(p: Parameters, condition: str, seed: int) -> TrainingSetup:
    """The condition's learning rates: the base rate times 1 or ``qk_multiplier`` per
    circuit, as :data:`CONDITIONS` says."""
    qk, embedding, other = (p.qk_multiplier if k == "m" else 1.0 for k in CONDITIONS[condition])
    return TrainingSetup(optimizer="adamw", lr=p.lr * other, qk_multiplier=qk / other,
                         embedding_multiplier=embedding / other, epochs=p.epochs,
                         batch_size=p.batch_size, schedule="cosine", warmup_fraction=0.1,
                         grad_clip=1.0, seed=seed)


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


def train_one(p: Parameters, condition: str, seed: int) -> dict:
    """Train one model and measure it on every held-out set, on the pinned number of torch
    threads as in a worker process (the float rounding of a run then does not depend on
    where it ran)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(pinned_threads())
    try:
        return _train_one(p, condition, seed)
    finally:
        torch.set_num_threads(threads)


def bar_position(workers: int) -> int:
    """The progress bar's line: this worker's own among the ``workers`` processes of the
    pool that runs it (a pool's processes are numbered one after another), 0 in the main
    process."""
    identity = multiprocessing.current_process()._identity
    return (identity[0] - 1) % workers if identity else 0


def _train_one(p: Parameters, condition: str, seed: int) -> dict:
    data = agreement.generate(p.train_sentences, derived_seed(seed, "data"),
                              modifiers=(0, p.max_modifiers))
    # Initialised in float32 and then converted: both dtypes start from the same weights.
    # Training runs in float64 by default: at the faster QK rates float32 rounding is
    # amplified until the printed digits depend on the CPU (the book's reproducibility page).
    model = Decoder(model_config(p), generator=init_generator(seed)).to(DTYPES[p.dtype])
    tests = held_out_sets(p, seed)

    def accuracies(model):  # after every epoch, on each held-out set
        return [accuracy(model(t.tokens, t.attention_mask).logits, t.labels)
                for t in tests.values()]

    history = train_classifier(model, data, setup(p, condition, seed), device="cpu",
                               eval_fn=accuracies, progress=p.progress,
                               desc=f"{condition}, seed {seed}",
                               position=bar_position(p.workers))
    return {"condition": condition, "seed": seed, "loss": history.loss,
            "accuracy_by_epoch": np.array(history.eval),  # [epochs, attractor counts]
            "evaluation": {a: evaluate(model, test, p.eraser_fraction)
                           for a, test in tests.items()}}


def train(p: Parameters) -> list[dict]:
    """Every (condition, seed), spread over ``workers`` processes (a run's result does not
    depend on where it ran). With ``progress`` each run shows a bar of its steps on stderr,
    one line per worker process."""
    jobs = [(p, condition, seed) for condition in p.conditions for seed in p.seeds]
    return map_in_processes(train_one, jobs, p.workers)


# --- rows and tables ------------------------------------------------------------------------

MEASURES = ("accuracy", "attention_rollout", "attention_layer_mean", "attention_layer_max",
            "comprehensiveness", "sufficiency", "probability")


def rows(results: list[dict]) -> list[dict]:
    """One record per (condition, seed, attractors): the held-out means, and the run's last
    training-epoch loss."""
    out = []
    for run in results:
        for attractors, e in run["evaluation"].items():
            out.append({"condition": run["condition"], "seed": run["seed"],
                        "attractors": attractors, "final_train_loss": run["loss"][-1],
                        "accuracy": e["accuracy"],
                        **{f"attention_{m}": float(e["attention"][m].mean())
                           for m in ATTENTION_METHODS},
                        "comprehensiveness": float(e["comprehensiveness"].mean()),
                        "sufficiency": float(e["sufficiency"].mean()),
                        "probability": float(e["probability"].mean())})
    return out


SUMMARY_COLUMNS = ("condition", "accuracy", "attention_rollout", "attention_layer_mean",
                   "attention_layer_max", "comprehensiveness", "sufficiency")


def _conditions(records) -> list[str]:
    return [c for c in CONDITIONS if any(r["condition"] == c for r in records)]


def summary_table(records) -> list[dict]:
    """Per condition, every held-out set together: mean over seeds ± 95% interval."""
    return [{"condition": c, **{m: interval_text(*records_interval(records, m, condition=c))
                                for m in SUMMARY_COLUMNS[1:]}} for c in _conditions(records)]


ATTRACTOR_COLUMNS = ("attractors", "condition", "accuracy", "attention_rollout",
                     "gap_to_matched")


def attractor_table(records) -> list[dict]:
    """Per attractor count and condition: accuracy and rollout attention on the subject
    (mean over seeds ± 95% interval), and the attention gap to the matched runs of the same
    seeds (its interval from the paired per-seed differences; "-" for matched itself)."""
    table = []
    for a in sorted({r["attractors"] for r in records}):
        pick = {(r["condition"], r["seed"]): r for r in records if r["attractors"] == a}
        for c in _conditions(records):
            seeds = sorted(s for cond, s in pick if cond == c)
            gap = [pick[c, s]["attention_rollout"] - pick[MATCHED, s]["attention_rollout"]
                   for s in seeds]
            table.append({"attractors": a, "condition": c,
                          **{m: interval_text(*records_interval(records, m, condition=c,
                                                                attractors=a))
                             for m in ("accuracy", "attention_rollout")},
                          "gap_to_matched": "-" if c == MATCHED
                          else interval_text(*seed_interval(gap))})
    return table


CURVE_COLUMNS = ("condition", "seed", "epoch", "train_loss", "attractors", "accuracy")


def curve_rows(results: list[dict]) -> list[dict]:
    """Per (condition, seed, epoch, attractor count): the epoch's training loss and the
    held-out accuracy after it."""
    return [{"condition": run["condition"], "seed": run["seed"], "epoch": epoch + 1,
             "train_loss": run["loss"][epoch], "attractors": attractors,
             "accuracy": float(run["accuracy_by_epoch"][epoch, k])}
            for run in results for epoch in range(len(run["loss"]))
            for k, attractors in enumerate(sorted(run["evaluation"]))]


def heatmaps(results: list[dict], method: str = "rollout") -> dict[str, np.ndarray]:
    """Per condition: the attention-vs-probability heatmap over all held-out sentences of a
    run (percent), mean over seeds."""
    maps = {}
    for c in [c for c in CONDITIONS if any(run["condition"] == c for run in results)]:
        per_seed = []
        for run in results:
            if run["condition"] == c:
                e = run["evaluation"].values()
                per_seed.append(attention_probability_heatmap(
                    np.concatenate([x["attention"][method] for x in e]),
                    np.concatenate([x["probability"] for x in e]), HEATMAP_BINS))
        maps[c] = np.mean(per_seed, 0)
    return maps


def heatmap_cells(maps) -> list[dict]:
    edges = np.linspace(0, 1, HEATMAP_BINS + 1)
    return [{"condition": c, "probability_low": edges[i], "attention_low": edges[j],
             "percent": float(m[i, j])}
            for c, m in maps.items() for i in range(HEATMAP_BINS) for j in range(HEATMAP_BINS)]


# --- the figure ---------------------------------------------------------------------------

COLORS = {MATCHED: "#440154", FASTER_QK: "#35b779", FASTER_QK_ONLY: "#31688e",
          ALL_FASTER: "#fde725"}
MARKERS = {MATCHED: "o", FASTER_QK: "s", FASTER_QK_ONLY: "^", ALL_FASTER: "D"}


def plot(records, maps, results):
    """Top two rows: accuracy, rollout attention on the subject, and comprehensiveness /
    sufficiency against the number of attractors (mean over seeds, bars: 95% interval), and
    held-out accuracy with the most attractors after each epoch. Below them, two a row: one
    attention-vs-probability heatmap per condition (mean over seeds)."""
    attractors = sorted({r["attractors"] for r in records})
    conditions = _conditions(records)
    with house_style():
        # Two rows of two line panels, then the heatmaps two a row: at the book's width a
        # row of four heatmaps leaves no room for the numbers in their cells.
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 13.0))
        heat_rows = (len(conditions) + 1) // 2
        grid = fig.add_gridspec(2 + heat_rows, 2, height_ratios=[1, 1] + [1.05] * heat_rows)
        axes = [fig.add_subplot(grid[row, col]) for row in (0, 1) for col in (0, 1)]
        accuracy_means = []
        for c in conditions:
            for ax, measure, style in ((axes[0], "accuracy", "-"),
                                       (axes[1], "attention_rollout", "-"),
                                       (axes[2], "comprehensiveness", "-"),
                                       (axes[2], "sufficiency", "--")):
                stats = [records_interval(records, measure, condition=c, attractors=a)
                         for a in attractors]
                if measure == "accuracy":
                    accuracy_means += [m for m, _ in stats]
                ax.errorbar(attractors, [s[0] for s in stats], yerr=[s[1] for s in stats],
                            color=COLORS[c], linestyle=style, marker=MARKERS[c], capsize=3,
                            markeredgecolor="black", markeredgewidth=0.5,
                            label=None if measure == "sufficiency" else c)
            curves = np.array([run["accuracy_by_epoch"] for run in results
                               if run["condition"] == c])  # [seeds, epochs, attractor counts]
            axes[3].plot(np.arange(1, curves.shape[1] + 1), curves[:, :, -1].mean(0),
                         color=COLORS[c], marker=MARKERS[c], markersize=4,
                         markeredgecolor="black", markeredgewidth=0.5, label=c)
        # At the default parameters every condition learns the task: a panel of points at 1
        # says so in its title rather than look like a finding.
        lowest = min(accuracy_means)
        # Floored, so the title never rounds a mean up ("0.998", not "1").
        titles = ("(a) held-out accuracy" + (f"\n(every mean {math.floor(lowest * 1000) / 1000:.3f}"
                                             " or more)" if lowest >= 0.99 else ""),
                  "(b) attention on the subject\n(rollout)",
                  "(c) comprehensiveness (solid),\nsufficiency (dashed)")
        for ax, title in zip(axes, titles):
            ax.set_xlabel("attractors in the sentence")
            ax.set_xticks(attractors)
            ax.set_title(title)
        axes[0].set_ylim(0.45, 1.02)  # chance is 0.5
        axes[1].set_ylim(0, 1.02)
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center",
                   ncols=len(conditions))
        axes[3].set_ylim(-0.02, 1.02)
        axes[3].xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[3].set_xlabel("epoch")
        axes[3].set_title(f"(d) accuracy with {attractors[-1]} attractors,\nper epoch")
        edges = np.linspace(0, 1, HEATMAP_BINS + 1)
        heat_axes = []
        for k, c in enumerate(conditions):
            ax = fig.add_subplot(grid[2 + k // 2, k % 2])
            image = ax.imshow(maps[c], origin="lower", extent=(0, 1, 0, 1), cmap="viridis",
                              vmin=0, vmax=100, aspect="auto")
            for i in range(HEATMAP_BINS):
                for j in range(HEATMAP_BINS):
                    ax.text((edges[j] + edges[j + 1]) / 2, (edges[i] + edges[i + 1]) / 2,
                            f"{maps[c][i, j]:.0f}", ha="center", va="center", fontsize=9,
                            color="white" if maps[c][i, j] < 50 else "black")
            ax.grid(False)
            ax.set_xticks(edges)
            ax.set_yticks(edges)
            if k >= len(conditions) - 2:
                ax.set_xlabel("attention on subject")
            if k % 2 == 0:
                ax.set_ylabel("P(true number)")
            else:
                ax.set_yticklabels([])
            ax.set_title(f"({'efgh'[k]}) {c}")
            heat_axes.append(ax)
        fig.colorbar(image, ax=heat_axes, shrink=0.6, label="% of sentences")
    return fig
