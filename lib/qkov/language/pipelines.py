"""Steps the real-data figures share (``language-hatexplain``, ``language-sva``,
``language-squad``): what to print when the data are not there, token batches from loaded
records, training faster-QK and matched-learning-rate models over seeds, measuring them and
drawing the comparison.

Two conditions per seed (:data:`CONDITIONS`, spelt as in :mod:`qkov.language.train`), from
the same initial weights: "matched" (every parameter at the base learning rate) and
"faster QK" (``W_Q``, ``W_K`` - and, where the paper says so, the embeddings - at a multiple
of it). ERASER scores are :func:`qkov.language.metrics.eraser`'s, as in every language
figure.

Without the data a figure's ``prepare`` prints where to get them (:func:`missing_data`) and
gives None; :func:`run_classifier` (and each figure's ``show``, ``plot`` and ``publish``)
takes that None and does nothing, so a notebook says "no data" once and its later cells need
no condition of their own.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from .. import seeding
from ..checks import ParameterError, integer
from ..plotting import COLUMN_WIDTH_IN, HEATMAP_CMAP, house_style, new_figure
from .batches import TokenBatch
from .metrics import (
    ATTENTION_METHODS,
    ERASER_FRACTION,
    PLAUSIBILITY_MEASURES,
    attention_probability_heatmap,
    attention_rollout,
    eraser,
    plausibility,
    ranked_tokens,
    rationale_attention_mass,
)
from .models import Decoder
from .train import FASTER_QK, MATCHED, TrainingSetup, resolve_device, train_classifier

CONDITIONS = (MATCHED, FASTER_QK)
CONDITION_LABELS = {MATCHED: "matched learning rates", FASTER_QK: "faster QK"}
CONDITION_COLORS = {MATCHED: "#444444", FASTER_QK: "#1b9e77"}  # as qkov.language.comparison's

MESSAGE_WIDTH = 64  # columns of the no-data message

# Where a reader gets each data set (none can be downloaded on the project's machines).
SOURCES = {
    "hatexplain": "HateXplain (Mathew et al. 2021): dataset.json and post_id_divisions.json "
                  "from the Data/ folder of the GitHub repository hate-alert/HateXplain",
    "agreement": "the Linzen et al. (2016) agreement data agr_50_mostcommon_10K.tsv(.gz): "
                 "linked from the README of the GitHub repository TalLinzen/rnn_agreement "
                 "(gunzip it)",
    "squad": "SQuAD 2.0 (Rajpurkar et al. 2018): train-v2.0.json and dev-v2.0.json from "
             "rajpurkar.github.io/SQuAD-explorer",
    "glove": "GloVe vectors (Pennington et al. 2014): glove.840B.300d.txt or glove.6B.300d.txt "
             "(in glove.6B.zip) from nlp.stanford.edu/projects/glove",
}


def missing_data(figure_id: str, inputs: Mapping[str, tuple[str | None, str]],
                 example: str, inside: Mapping[str, Sequence[str]] | None = None) -> bool:
    """True - and what to get and the command to run printed - if an input is not given
    (None). ``inputs``: parameter name -> (its value, key of SOURCES); ``example``: the
    papermill ``-p`` arguments of a full run; ``inside``: per folder parameter, the files it
    holds. A path that is given must be there (:func:`check_data_path`): a mistyped path is
    an error, not "no data"."""
    for name, (value, source) in inputs.items():
        check_data_path(name, value, source, (inside or {}).get(name, ()))
    missing = [(name, source) for name, (value, source) in inputs.items() if value is None]
    if not missing:
        return False
    # Short lines: the book shows this output as it is printed, on narrow screens too.
    def wrapped(text, indent=""):
        return textwrap.fill(text, MESSAGE_WIDTH, subsequent_indent=indent,
                             break_long_words=False, break_on_hyphens=False)

    lines = [wrapped(f"No data, so nothing is trained or drawn: {figure_id} needs data sets "
                     "that cannot be downloaded on the machines that build this book.")]
    named = set()
    for name, source in missing:
        where = "the same download as above" if source in named else SOURCES[source]
        named.add(source)
        lines += [f"- {name} (not given):", wrapped("  " + where, "  ")]
    arguments = [f"{figure_id}-run.ipynb"] + ["-p " + a for a in example.split("-p ") if a]
    lines += [wrapped("Then run, from the repository root (a GPU is recommended: device "
                      "'auto' uses one when present):"),
              f"  papermill notebooks/{figure_id}.ipynb \\\n" +
              " \\\n".join("    " + a.strip() for a in arguments)]
    print("\n".join(lines))
    return True


def check_data_path(name: str, value: str | None, source: str, files: Sequence[str] = ()
                    ) -> None:
    """A data path parameter, if given (None: not given, the no-data case), must be a file -
    or, with ``files``, a folder holding them: else a ParameterError naming the parameter,
    the path and what was expected."""
    if value is None:
        return
    path = Path(value)
    expected = (f"a folder with {' and '.join(files)}" if files else "a file") + \
        f": {SOURCES[source]}"
    if not path.exists():
        problem = "does not exist"
    elif files and not path.is_dir():
        problem = "is not a folder"
    elif not files and not path.is_file():
        problem = "is not a file"
    else:
        absent = [f for f in files if not (path / f).is_file()]
        if not absent:
            return
        problem = f"has no {', '.join(absent)}"
    raise ParameterError(name, f"{value!r} {problem}; expected {expected}")


def padded_batch(rows: Sequence[Sequence[int]], width: int, pad_id: int = 0, *,
                 labels: Sequence[int] | None = None,
                 rationale: Sequence[Sequence[bool]] | None = None,
                 loss_mask: Sequence[Sequence[bool]] | None = None) -> TokenBatch:
    """Right-padded [N, width] batch of token rows (each at most ``width`` long), with the
    per-token ``rationale`` / ``loss_mask`` rows (as long as their token rows) if given."""
    n = len(rows)
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    if n and lengths.max() > width:
        i = int(lengths.argmax())
        raise ValueError(f"row {i}: {lengths[i]} tokens, more than the width {width}")
    mask = np.arange(width)[None, :] < lengths[:, None]
    # Filled through the mask in one go (row-major order = the rows concatenated).
    tokens = np.full((n, width), pad_id, dtype=np.int64)
    tokens[mask] = np.fromiter((t for row in rows for t in row), np.int64, int(lengths.sum()))
    extra = {}
    for name, value in (("rationale", rationale), ("loss_mask", loss_mask)):
        if value is not None:
            if len(value) != n or any(len(v) != len(r) for v, r in zip(value, rows)):
                raise ValueError(f"{name}: expected one mark per token of each row")
            marks = np.zeros((n, width), dtype=bool)
            marks[mask] = np.fromiter((bool(m) for row in value for m in row), bool,
                                      int(lengths.sum()))
            extra[name] = torch.from_numpy(marks)
    label_tensor = None if labels is None else torch.as_tensor(list(labels), dtype=torch.long)
    return TokenBatch(tokens=torch.from_numpy(tokens), attention_mask=torch.from_numpy(mask),
                      labels=label_tensor, **extra)


def conditions(matched: TrainingSetup, **faster) -> dict[str, TrainingSetup]:
    """The two conditions a figure compares: ``matched`` (every parameter at its base
    learning rate) and faster QK, the same setup with the ``faster`` fields changed (its
    ``qk_multiplier`` and, where the paper says so, ``embedding_multiplier``; where the
    authors' notebooks gave faster QK another weight decay - a confound, offered only to
    reproduce them - also that)."""
    return {MATCHED: matched, FASTER_QK: replace(matched, **faster)}


class Results(NamedTuple):
    """What a real-data figure's runs give: the rows (one per condition and seed), per
    condition the attention-vs-probability heatmap (percent), and per run (condition, seed,
    its per-example measurements)."""

    rows: list[dict]
    heatmaps: dict[str, np.ndarray]
    runs: list[tuple[str, int, dict[str, np.ndarray]]]


# --- classifiers: HateXplain and agreement ------------------------------------------------


ATTENTION_ROWS = ("readout", "padded_end")


@torch.no_grad()
def evaluate_classifier(model: Decoder, data: TokenBatch, fraction: float = ERASER_FRACTION,
                        batch_size: int = 256, readout: str = "first_pad",
                        attention_row: str = "readout") -> dict[str, np.ndarray]:
    """Per test example: correct, probability of the true class, attention mass on the
    rationale from the readout position (rollout, layer mean, layer max), whether it has a
    rationale, ERASER comprehensiveness / sufficiency (:func:`~qkov.language.metrics.eraser`:
    the top ``fraction`` of the tokens by rollout attention from the readout position) and
    ERASER's plausibility (:func:`~qkov.language.metrics.plausibility`: token F1, IOU F1,
    AUPRC of the rollout attention against the rationale; NaN without one). The hard
    rationale of token and IOU F1 is the top k tokens by rollout, k the mean number of
    rationale tokens of the examples that have any (:func:`plausibility_k`). ``readout``: the
    position the model classifies at ("first_pad", the slot after the input, or "last", its
    last token). ``attention_row "padded_end"``: the attention on the rationale (the three
    ways) is read instead as the authors' HateXplain notebooks read it, from the last
    position of the row padded to the model's ``max_len``, padding included in the rollout -
    a padding slot the classifier never reads; offered to reproduce their numbers, not as a
    measure of the readout."""
    if attention_row not in ATTENTION_ROWS:
        raise ValueError(f"attention_row: expected one of {ATTENTION_ROWS}, got {attention_row!r}")
    model.eval()
    device = next(model.parameters()).device
    pad_id = model.config.pad_id
    k = plausibility_k(data)

    def predict_proba(tokens, mask):
        return torch.softmax(model(tokens, mask, readout=readout).logits, -1)

    parts: dict[str, list] = {}
    for chunk in data.batches(batch_size):
        chunk = chunk.trimmed().to(device)  # padding no row of the chunk needs: not computed
        out = model(chunk.tokens, chunk.attention_mask, readout=readout)
        probs = torch.softmax(out.logits, -1)
        rows = torch.arange(len(chunk), device=device)
        found = {
            "correct": (probs.argmax(-1) == chunk.labels).float(),
            "probability": probs[rows, chunk.labels],
            "has_rationale": chunk.rationale.any(1).float(),
        }
        for method in ATTENTION_METHODS:
            found[f"attention_{method}"] = rationale_attention_mass(
                out.attentions, chunk.rationale, out.readout_index, chunk.attention_mask, method)
        if attention_row == "padded_end":
            full = chunk.widened(model.config.max_len, pad_id)
            end = model(full.tokens, full.attention_mask, readout=readout)
            last = torch.full((len(chunk),), model.config.max_len - 1, device=device)
            for method in ATTENTION_METHODS:
                found[f"attention_{method}"] = rationale_attention_mass(
                    end.attentions, full.rationale, last, None, method)
        found.update(eraser(predict_proba, chunk.tokens, chunk.attention_mask, chunk.labels,
                            out.attentions, out.readout_index, fraction, pad_id))
        scores = attention_rollout(out.attentions, chunk.attention_mask)[rows, out.readout_index]
        found.update(plausibility(scores, chunk.rationale,
                                  ranked_tokens(chunk.attention_mask, out.readout_index), k))
        for name, value in found.items():
            parts.setdefault(name, []).append(value.double().cpu().numpy())
    return {name: np.concatenate(values) for name, values in parts.items()}


def plausibility_k(data: TokenBatch) -> int:
    """The size of the hard rationale that plausibility scores: the mean number of
    rationale tokens of the examples with any, rounded (at least 1; 1 without any)."""
    counts = data.rationale.sum(1)
    counts = counts[counts > 0]
    return max(1, round(float(counts.double().mean()))) if counts.numel() else 1


def classifier_row(condition: str, seed: int, history, measured: Mapping[str, np.ndarray]) -> dict:
    """One stored row: accuracy, ERASER scores over every test example, attention on the
    rationale and plausibility over the examples that have one (HateXplain's normal posts
    have none)."""
    with_rationale = measured["has_rationale"] > 0
    row = {"condition": condition, "seed": seed, "train_loss": history.loss[-1],
           "accuracy": float(measured["correct"].mean()),
           "comprehensiveness": float(measured["comprehensiveness"].mean()),
           "sufficiency": float(measured["sufficiency"].mean()),
           "n_test": int(len(measured["correct"])), "n_with_rationale": int(with_rationale.sum())}
    for method in ATTENTION_METHODS:
        values = measured[f"attention_{method}"][with_rationale]
        row[f"attention_{method}"] = float(values.mean()) if values.size else math.nan
    for measure in PLAUSIBILITY_MEASURES:
        values = measured[measure][with_rationale]
        row[measure] = float(values.mean()) if values.size else math.nan
    return row


def run_classifier(data, conditions: Mapping[str, TrainingSetup], seeds: Sequence[int],
                   device: str, fraction: float, bins: int = 5, progress: bool = True,
                   readout: str = "first_pad", attention_row: str = "readout"
                   ) -> Results | None:
    """Per seed, every condition from the same initial weights (and the same batches):
    train a ``data.config`` decoder on ``data.train`` (:func:`train_classifier`), then
    measure it on ``data.test`` (:func:`evaluate_classifier`). Returns the rows, per
    condition the attention-vs-probability heatmap of all seeds' test examples with a
    rationale, and the runs' per-example measurements; None, training nothing, where
    ``data`` is None (no data: the notebook said so when it prepared them)."""
    if data is None:
        return None
    device = str(resolve_device(device))
    rows, runs, pooled = [], [], {c: ([], []) for c in conditions}
    for seed in seeds:
        for condition, setup in conditions.items():
            model = Decoder(data.config, generator=seeding.init_generator(seed))
            history = train_classifier(model, data.train, replace(setup, seed=seed),
                                       device=device, progress=progress, readout=readout)
            measured = evaluate_classifier(model, data.test, fraction, readout=readout,
                                           attention_row=attention_row)
            rows.append(classifier_row(condition, seed, history, measured))
            runs.append((condition, seed, measured))
            keep = measured["has_rationale"] > 0
            pooled[condition][0].append(measured["attention_rollout"][keep])
            pooled[condition][1].append(measured["probability"][keep])
    heatmaps = {}
    for condition, (attention, probability) in pooled.items():
        attention, probability = np.concatenate(attention), np.concatenate(probability)
        heatmaps[condition] = (attention_probability_heatmap(attention, probability, bins)
                               if attention.size else np.zeros((bins, bins)))
    return Results(rows, heatmaps, runs)


def heatmap_rows(heatmaps: Mapping[str, np.ndarray]) -> list[dict]:
    """The heatmaps as table rows (condition, probability bin, attention bin, percent)."""
    return [{"condition": c, "probability_bin": i, "attention_bin": j, "percent": float(v)}
            for c, grid in heatmaps.items() for (i, j), v in np.ndenumerate(grid)]


def condition_means(rows: Sequence[Mapping], keys: Sequence[str]) -> list[dict]:
    """Per condition: the number of seeds and the mean over them of each key (NaN ignored)."""
    out = []
    for condition in CONDITIONS:
        picked = [r for r in rows if r["condition"] == condition]
        summary = {"condition": condition, "seeds": len(picked)}
        for key in keys:
            values = np.array([r[key] for r in picked], dtype=float)
            summary[key] = float(np.nanmean(values)) if values.size else math.nan
        out.append(summary)
    return out


def bars(ax, rows, keys, labels):
    """Grouped bars: per key, one bar per condition at the seeds' mean, each seed a dot."""
    width = 0.38
    for k, condition in enumerate(CONDITIONS):
        picked = [r for r in rows if r["condition"] == condition]
        for j, key in enumerate(keys):
            values = np.array([r[key] for r in picked], dtype=float)
            x = j + (k - 0.5) * width
            ax.bar(x, np.nanmean(values), width, color=CONDITION_COLORS[condition],
                   alpha=0.8, label=CONDITION_LABELS[condition] if j == 0 else None)
            ax.plot(np.full(values.size, x), values, "o", color="black", markersize=3)
    ax.set_xticks(range(len(keys)), labels)


def classifier_alt(task: str, examples: str, rationale: str, target: str) -> str:
    """The alt text of plot_classifier's drawing of ``task``."""
    return (f"Bar charts comparing matched learning rates with faster QK on {task}, bars the "
            "mean over seeds and dots each seed: test accuracy, attention on the "
            f"{rationale} measured three ways, and the ERASER comprehensiveness and "
            f"sufficiency; below, one heatmap per condition of test {examples} binned by "
            f"attention on the {rationale} (x) and probability of the {target} (y).")


def plot_classifier(rows: Sequence[Mapping], heatmaps: Mapping[str, np.ndarray], title: str,
                    top_fraction: float = ERASER_FRACTION):
    """(a) test accuracy, (b) attention on the rationale three ways, (c) ERASER scores (bars:
    the seeds' mean, dots: each seed); (d), (e) the attention-vs-probability heatmap per
    condition (percent of test examples). Drawn for the book's column
    (qkov.plotting.COLUMN_WIDTH_IN); ``title`` may break onto a second line."""
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 8.6))
        top, bottom = fig.subfigures(2, 1, height_ratios=[1.55, 1])
        grid = top.add_gridspec(2, 2, width_ratios=[1, 3])
        axes = [top.add_subplot(grid[0, 0]), top.add_subplot(grid[0, 1]),
                top.add_subplot(grid[1, :])]
        bars(axes[0], rows, ["accuracy"], ["accuracy"])
        axes[0].set_ylim(0, 1)
        axes[0].set_title("(a) test accuracy")
        bars(axes[1], rows, [f"attention_{m}" for m in ATTENTION_METHODS],
             ["rollout", "layer mean", "layer max"])
        axes[1].set_ylim(0, 1)
        axes[1].set_title("(b) attention from the readout on the rationale")
        bars(axes[2], rows, ["comprehensiveness", "sufficiency"],
             ["comprehensiveness", "sufficiency"])
        axes[2].set_title(f"(c) ERASER, top {100 * top_fraction:g}% tokens by rollout")
        axes[2].axhline(0, color="black", linewidth=0.6)
        top.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=2)
        heatmap_panels(bottom, heatmaps, "de", "attention on the rationale (rollout)",
                       "P(true class)", "% of test examples")
        fig.suptitle(title)
    return fig


def heatmap_panels(subfigure, heatmaps: Mapping[str, np.ndarray], letters: str, xlabel: str,
                   ylabel: str, unit: str) -> None:
    """One attention-vs-probability heatmap per condition, side by side in ``subfigure``."""
    for ax, condition, letter in zip(subfigure.subplots(1, len(CONDITIONS)), CONDITIONS,
                                     letters):
        grid = heatmaps[condition]
        bins = grid.shape[0]
        image = ax.imshow(grid, origin="lower", extent=(0, 1, 0, 1), cmap=HEATMAP_CMAP,
                          vmin=0, aspect="auto")
        ax.grid(False)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"({letter}) {CONDITION_LABELS[condition]}")
        subfigure.colorbar(image, ax=ax, shrink=0.9, label=unit)
        ax.set_xticks(np.linspace(0, 1, bins + 1))
        ax.set_yticks(np.linspace(0, 1, bins + 1))


# --- parameter checks the three figures share ---------------------------------------------

DEVICES = ("auto", "cpu", "cuda")


def device_name(name: str, value) -> str:
    """"auto" (a GPU when there is one), "cpu" or "cuda"."""
    if value not in DEVICES:
        raise ParameterError(name, f"expected one of {', '.join(DEVICES)}, got {value!r}")
    return value


def optional_count(name: str, value, minimum: int = 1) -> int | None:
    """None (all) or an integer >= ``minimum``."""
    return None if value is None else integer(name, value, minimum)
