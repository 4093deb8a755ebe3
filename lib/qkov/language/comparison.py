"""Comparing learning-rate conditions on an agreement task, shared by the figures that train
them (``language-agreement`` on generated sentences, ``real-agreement`` on real ones): the
conditions (:data:`CONDITIONS`) and their training setups, records of measured runs by
condition, seed and attractor count, the printed tables (mean over seeds with 95% intervals,
gaps to the matched runs paired by seed), heatmaps and the drawing's pieces.

A *result* is one trained run: ``{"condition", "seed", "loss": [per epoch], "evaluation":
{attractors: {"accuracy", "probability", "attention": {method: [...]}, "comprehensiveness",
"sufficiency"}}}`` (and ``"variant"`` where a figure has several); :func:`rows` turns results
into *records*, one per (variant, condition, seed, attractors).
"""

from __future__ import annotations

import math
import multiprocessing

import numpy as np
import torch

from .. import pinned_threads
from ..checks import ParameterError
from ..plotting import HEATMAP_CMAP, heatmap_text_color
from ..processes import map_in_processes
from ..stats import interval_text, records_interval, seed_interval
from .metrics import ATTENTION_METHODS, attention_probability_heatmap
from .train import ALL_FASTER, FASTER_QK, FASTER_QK_ONLY, MATCHED, SLOW_OV, TrainingSetup

# condition: (multiplier of W_Q and W_K, of the embeddings, of every other parameter), "m"
# the parameter qk_multiplier (the names are qkov.language.train's). Faster QK counts the
# embeddings with the QK circuit, as the paper's faster-QK runs do; slow OV is faster QK
# with every rate divided by m - the same ratio between the circuits, at matched's QK rate -
# so that it keeps the embeddings with QK at the base rate too: slow OV is to faster QK what
# matched is to all faster, and the four make a 2 x 2 of the ratio (1 or m) by the QK rate
# (1 or m). W_V, W_O and the classifier head (every "other" parameter,
# qkov.language.models.circuit_of) learn at the base rate / m.
CONDITIONS = {MATCHED: ("1", "1", "1"), FASTER_QK: ("m", "m", "1"),
              FASTER_QK_ONLY: ("m", "1", "1"), ALL_FASTER: ("m", "m", "m"),
              SLOW_OV: ("1", "1", "1/m")}

# The variant of a run or record where a figure trains on more than one kind of data
# (language-agreement: also on sentences where attractors are rare); records without a
# "variant" are of the default one.
DEFAULT = "default"




def condition_setup(condition: str, lr: float, qk_multiplier: float, **training) -> TrainingSetup:
    """The condition's learning rates: the base rate ``lr`` times 1, ``qk_multiplier`` or
    its inverse per circuit, as :data:`CONDITIONS` says; ``training``: the rest of the
    :class:`~qkov.language.train.TrainingSetup`."""
    factor = {"1": 1.0, "m": qk_multiplier, "1/m": 1.0 / qk_multiplier}
    qk, embedding, other = (factor[k] for k in CONDITIONS[condition])
    return TrainingSetup(lr=lr * other, qk_multiplier=qk / other,
                         embedding_multiplier=embedding / other, **training)



def agreement_setup(p, condition: str, seed: int, **extra) -> TrainingSetup:
    """The training both agreement figures give a condition: AdamW at ``p.lr`` times the
    condition's multiples (:func:`condition_setup`), ``p.epochs`` epochs of ``p.batch_size``,
    a cosine schedule with 10% warm-up, clipping at 1.0; ``extra``: the rest of the setup."""
    return condition_setup(condition, p.lr, p.qk_multiplier, optimizer="adamw",
                           epochs=p.epochs, batch_size=p.batch_size, schedule="cosine",
                           warmup_fraction=0.1, grad_clip=1.0, seed=seed, **extra)


# The floating-point types the agreement figures train in (their ``dtype`` parameter).
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def dtype_name(name: str, value) -> str:
    if value not in DTYPES:
        raise ParameterError(name, f"expected one of {list(DTYPES)}, got {value!r}")
    return value


def check_model_parameters(p) -> None:
    """The checks of an agreement figure's parameters that its model needs: an ERASER share
    in (0, 1] and heads that divide the width."""
    if p.eraser_fraction > 1:
        raise ParameterError("eraser_fraction", f"expected a share in (0, 1], got "
                             f"{p.eraser_fraction:g}")
    if p.d_model % p.n_heads:
        raise ParameterError("n_heads", f"expected a divisor of d_model={p.d_model}, "
                             f"got {p.n_heads}")


def bar_position(workers: int) -> int:
    """The progress bar's line: this worker's own among the ``workers`` processes of the
    pool that runs it (a pool's processes are numbered one after another), 0 in the main
    process."""
    identity = multiprocessing.current_process()._identity
    return (identity[0] - 1) % workers if identity else 0


def in_stacks(train_stack, common: tuple, runs: list, workers: int) -> list:
    """``train_stack(*common, share)`` on each worker's share of ``runs`` (every
    ``workers``-th run), the shares on ``workers`` processes at once; the results, one per
    run, in the order of ``runs``. A share trains as one stack (qkov.language.batched), whose
    runs' numbers do not depend on the others in it, so the results do not depend on
    ``workers``."""
    shares = [share for share in (runs[w::workers] for w in range(workers)) if share]
    found = map_in_processes(on_pinned_threads, [(train_stack, *common, share) for share in shares],
                             len(shares))
    ordered = [None] * len(runs)
    for w, results in enumerate(found):
        if len(results) != len(shares[w]):
            raise RuntimeError(f"train_stack returned {len(results)} results for "
                               f"{len(shares[w])} runs")
        for k, result in enumerate(results):
            ordered[w + k * workers] = result
    return ordered


def on_pinned_threads(function, *args):
    """``function(*args)`` on the pinned number of torch threads, as in a worker process
    (the float rounding of a run then does not depend on where it ran)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(pinned_threads())
    try:
        return function(*args)
    finally:
        torch.set_num_threads(threads)


def condition_list(name: str, value) -> list[str]:
    """A non-empty list of distinct condition names, "matched" first (the reference)."""
    if not isinstance(value, (list, tuple)) or not value \
            or any(not isinstance(c, str) or c not in CONDITIONS for c in value) \
            or len(set(value)) != len(value) or value[0] != MATCHED:
        raise ParameterError(name, f"expected a list of distinct conditions from "
                             f"{list(CONDITIONS)}, \"matched\" first; got {value!r}")
    return list(value)




HEATMAP_BINS = 5


def of_variant(items: list[dict], variant: str = DEFAULT) -> list[dict]:
    """The results or records of one variant."""
    return [x for x in items if x.get("variant", DEFAULT) == variant]




MEASURES = ("accuracy", "attention_rollout", "attention_layer_mean", "attention_layer_max",
            "comprehensiveness", "sufficiency", "probability")


RECORD_COLUMNS = ("variant", "condition", "seed", "attractors", "final_train_loss",
                  "accuracy", *(f"attention_{m}" for m in ATTENTION_METHODS),
                  "comprehensiveness", "sufficiency", "probability")


def rows(results: list[dict]) -> list[dict]:
    """One record per (variant, condition, seed, attractors): the held-out means, and the
    run's last training-epoch loss."""
    out = []
    for run in results:
        for attractors, e in run["evaluation"].items():
            out.append({"variant": run["variant"], "condition": run["condition"],
                        "seed": run["seed"],
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


def conditions_in(records) -> list[str]:
    return [c for c in CONDITIONS if any(r["condition"] == c for r in records)]


def one_variant(items) -> list:
    """``items`` (records or results), refused where they mix variants: a table or a
    drawing is of one variant (:func:`of_variant`)."""
    items = list(items)
    variants = sorted({x.get("variant", DEFAULT) for x in items})
    if len(variants) > 1:
        raise ValueError(f"expected the records of one variant, got {variants}; pick one with "
                         "of_variant")
    return items


def summary_table(records) -> list[dict]:
    """Per condition, every held-out set together: mean over seeds ± 95% interval."""
    records = one_variant(records)
    return [{"condition": c, **{m: interval_text(*records_interval(records, m, condition=c))
                                for m in SUMMARY_COLUMNS[1:]}} for c in conditions_in(records)]


def paired_differences(records, measure: str, condition: str, reference: str = MATCHED,
                       **match) -> list[float]:
    """``condition`` minus ``reference`` in ``measure``, seed by seed (each seed's mean over
    the records that ``match``), in the order of the seeds."""
    def per_seed(c):
        values: dict = {}
        for r in records:
            if r["condition"] == c and all(r[k] == v for k, v in match.items()):
                values.setdefault(r["seed"], []).append(r[measure])
        return {seed: float(np.mean(v)) for seed, v in values.items()}

    mine, theirs = per_seed(condition), per_seed(reference)
    return [mine[seed] - theirs[seed] for seed in sorted(mine)]


def paired_gap(records, measure: str, condition: str, **match) -> tuple[float, float]:
    """``condition`` minus matched in ``measure``, seed by seed (:func:`paired_differences`):
    mean over seeds and the half-width of the 95% interval of the paired differences."""
    return seed_interval(paired_differences(records, measure, condition, **match))


COMPARISON_COLUMNS = ("condition", "accuracy", "accuracy_gap", "attention_rollout",
                      "attention_gap", "probability", "final_train_loss")


def comparison_table(records) -> list[dict]:
    """Per condition, every held-out set together: accuracy and rollout attention on the
    subject (mean over seeds ± 95% interval) and each one's gap to the matched runs of the
    same seeds (the interval from the paired per-seed differences; "-" for matched); the
    mean probability of the true number, and the last epoch's training loss."""
    records = one_variant(records)
    table = []
    for c in conditions_in(records):
        row = {"condition": c}
        for m in COMPARISON_COLUMNS[1:]:
            if m.endswith("_gap"):
                measure = m.replace("_gap", "_rollout" if m.startswith("attention") else "")
                row[m] = "-" if c == MATCHED \
                    else interval_text(*paired_gap(records, measure, c))
            else:
                row[m] = interval_text(*records_interval(records, m, condition=c))
        table.append(row)
    return table


ATTRACTOR_COLUMNS = ("attractors", "condition", "accuracy", "accuracy_gap",
                     "attention_rollout", "attention_gap")


def attractor_table(records) -> list[dict]:
    """Per attractor count and condition: accuracy and rollout attention on the subject
    (mean over seeds ± 95% interval), and each one's gap to the matched runs of the same
    seeds (the interval from the paired per-seed differences; "-" for matched itself)."""
    records = one_variant(records)
    table = []
    for a in sorted({r["attractors"] for r in records}):
        for c in conditions_in(records):
            table.append({"attractors": a, "condition": c})
            for m, gap in (("accuracy", "accuracy_gap"), ("attention_rollout", "attention_gap")):
                table[-1][m] = interval_text(*records_interval(records, m, condition=c,
                                                               attractors=a))
                table[-1][gap] = "-" if c == MATCHED \
                    else interval_text(*paired_gap(records, m, c, attractors=a))
    return table




def heatmaps(results: list[dict], method: str = "rollout") -> dict[str, np.ndarray]:
    """Per condition: the attention-vs-probability heatmap over all held-out sentences of a
    run (percent), mean over seeds; of the default variant."""
    results = of_variant(results, DEFAULT)
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




# Conditions, not an order: distinct hues, each at least 3:1 against white.
COLORS = {MATCHED: "#444444", FASTER_QK: "#1b9e77", FASTER_QK_ONLY: "#7570b3",
          ALL_FASTER: "#d95f02", SLOW_OV: "#e7298a"}
MARKERS = {MATCHED: "o", FASTER_QK: "s", FASTER_QK_ONLY: "^", ALL_FASTER: "D", SLOW_OV: "v"}
HEATMAPS_PER_ROW = 3


def against_attractors(axes, records, conditions, attractors, measures):
    """Lines against the attractor count, one per condition and (axis, measure, style); the
    accuracy means drawn."""
    means = []
    for c in conditions:
        for ax, measure, style in measures:
            stats = [records_interval(records, measure, condition=c, attractors=a)
                     for a in attractors]
            if measure == "accuracy":
                means += [m for m, _ in stats]
            ax.errorbar(attractors, [s[0] for s in stats], yerr=[s[1] for s in stats],
                        color=COLORS[c], linestyle=style, marker=MARKERS[c], capsize=3,
                        markeredgecolor="black", markeredgewidth=0.5,
                        label=None if measure == "sufficiency" else c)
    for ax in {ax for ax, _, _ in measures}:
        ax.set_xlabel("attractors in the sentence")
        ax.set_xticks(attractors)
    return means


def accuracy_title(title: str, means) -> str:
    """At the default parameters every condition learns the task: a panel of points at 1
    says so in its title rather than look like a finding (floored, so the title never
    rounds a mean up: "0.998", not "1")."""
    lowest = min(means)
    return title + (f"\n(every mean {math.floor(lowest * 1000) / 1000:.3f} or more)"
                    if lowest >= 0.99 else "")


def draw_heatmaps(fig, grid, first_row: int, maps, conditions, xlabel: str, ylabel: str,
                  unit: str, letters: str) -> None:
    """One attention-vs-probability heatmap per condition (percent, each cell's number
    written in it), :data:`HEATMAPS_PER_ROW` a row from row ``first_row`` of ``grid`` (a
    heatmap spans two of its columns), and one colour bar for them all."""
    edges = np.linspace(0, 1, HEATMAP_BINS + 1)
    heat_axes = []
    for k, c in enumerate(conditions):
        row, col = divmod(k, HEATMAPS_PER_ROW)
        ax = fig.add_subplot(grid[first_row + row, 2 * col:2 * col + 2])
        image = ax.imshow(maps[c], origin="lower", extent=(0, 1, 0, 1), cmap=HEATMAP_CMAP,
                          vmin=0, vmax=100, aspect="auto")
        for i in range(HEATMAP_BINS):
            for j in range(HEATMAP_BINS):
                ax.text((edges[j] + edges[j + 1]) / 2, (edges[i] + edges[i + 1]) / 2,
                        f"{maps[c][i, j]:.0f}", ha="center", va="center", fontsize=9,
                        color=heatmap_text_color(maps[c][i, j], 100))
        ax.grid(False)
        ax.set_xticks(edges)
        ax.set_yticks(edges)
        if k + HEATMAPS_PER_ROW >= len(conditions):  # nothing below it
            ax.set_xlabel(xlabel)
        if col == 0:
            ax.set_ylabel(ylabel)
        else:
            ax.set_yticklabels([])
        ax.set_title(f"({letters[k]}) {c}")
        heat_axes.append(ax)
    fig.colorbar(image, ax=heat_axes, shrink=0.6, label=unit)
