"""Comparing learning-rate conditions as a referee would ask, on real text: every condition
at every base rate of a sweep, each run trained until its validation loss stops falling (and
ending at its best checkpoint), each condition at the base rate of its lowest validation loss
- the baseline's chosen by the same rule as the treatments' - and the conditions compared,
paired by seed, (1) on the validation examples at matched validation losses and (2) on the
test examples at the best checkpoints, with intervals that draw the seeds and the test
documents again and a one-sided test of "no cost in accuracy". Shared by ``real-agreement``
and ``real-sentiment``.

A *result* (one trained run) is a dict with ``condition``, ``rate``, ``seed``, ``trajectory``
(its validation measurements, [evaluations, :data:`TRAJECTORY_COLUMNS`]), ``best`` (the
measurement it ended at, by column), ``ended_by`` ("cap" or "patience"), ``steps``,
``best_step``, ``epochs_trained``, ``trained_as`` (:func:`train_settings`), the test
measures per example that :func:`test_data` reads, and ``overall_accuracy``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..stats import (
    HIGHER,
    LOWER,
    NOT_RESOLVED,
    document_bootstrap,
    interval_text,
    non_inferiority,
    paired_verdict,
    seed_interval,
)
from ..synthetic.metrics import at_loss
from .batches import TokenBatch
from .comparison import in_stacks
from .train import MATCHED, TrainingSetup

Run = tuple[str, float, int]  # (condition, base rate, seed)


# --- training ------------------------------------------------------------------------------


def circuit_rates(setup: TrainingSetup) -> tuple[float, float, float]:
    """:meth:`TrainingSetup.circuit_rates`: W_Q and W_K, the embeddings, every other
    parameter."""
    return setup.circuit_rates()


def train_settings(runs: Sequence[Run], setup_of: Callable[[str, float, int], TrainingSetup],
                   train_stack, common: tuple, workers: int) -> list[dict]:
    """Every run of ``runs``, trained by ``train_stack(*common, share)`` on ``workers``
    processes (:func:`qkov.language.comparison.in_stacks`), one result per run in its order.

    Two runs of one seed whose circuits learn at the same rates (:func:`circuit_rates` of
    ``setup_of(condition, rate, seed)``) are one run under two names: with multiple m, all
    faster at a base rate r is matched at r * m, and slow OV at r is faster QK at r / m.
    Where a sweep holds both, the run is trained once and reported under both; its result's
    ``trained_as`` names the (condition, rate) it was trained as, its ``circuit_rates`` the
    rates of :func:`circuit_rates`."""
    def key(run):
        condition, rate, seed = run
        return circuit_rates(setup_of(condition, rate, seed)), seed

    keys = [key(run) for run in runs]
    unique: dict[tuple, Run] = {}
    for k, run in zip(keys, runs):
        unique.setdefault(k, run)
    trained = dict(zip(unique, in_stacks(train_stack, common, list(unique.values()), workers)))
    return [{**trained[k], "condition": run[0], "rate": run[1], "trained_as": unique[k][:2],
             "circuit_rates": k[0]} for k, run in zip(keys, runs)]


def same_runs(results: list[dict]) -> list[tuple[str, float, str, float]]:
    """The settings trained as another's (:func:`train_settings`): (condition, rate, the condition
    and rate it was trained as)."""
    return list(dict.fromkeys((r["condition"], r["rate"], *r["trained_as"]) for r in results
                              if r["trained_as"] != (r["condition"], r["rate"])))


def trained(results: list[dict]) -> list[dict]:
    """One result per run actually trained: a setting reported under two names (condition,
    rate) counts once, under the name it was trained as."""
    return [r for r in results if r["trained_as"] == (r["condition"], r["rate"])]


def validation_measures(stack, data: TokenBatch) -> list[dict]:
    """Each run of ``stack`` (a :class:`~qkov.language.batched.StackedClassifier`) on
    ``data``: the mean cross-entropy, the accuracy, and the attention from the readout on the
    rationale (the heads' mean, summed over the rationale's tokens; with one layer and the
    readout at a slot that attends only to real tokens, the rollout measure), averaged over
    the examples that have a rationale."""
    loss, right, attention, has_rationale = [], [], [], []
    for chunk in data.batches(512):
        chunk = chunk.trimmed()
        has_rationale.append(chunk.rationale.any(1))
        logits, pattern, _ = stack.readout(chunk.tokens, chunk.attention_mask)
        labels = chunk.labels.expand(len(logits), -1)
        loss.append(F.cross_entropy(logits.flatten(0, 1), labels.flatten(),
                                    reduction="none").view(len(logits), -1))
        right.append(logits.argmax(-1) == labels)
        attention.append((pattern.mean(2) * chunk.rationale).sum(-1))
    loss, right, attention = (torch.cat(x, dim=1).double() for x in (loss, right, attention))
    has_rationale = torch.cat(has_rationale)
    if not has_rationale.any():
        raise ValueError("validation data: no example has a rationale to measure attention on")
    return [{"validation_loss": float(losses.mean()), "validation_accuracy": float(r.mean()),
             "validation_attention": float(a[has_rationale].mean())}
            for losses, r, a in zip(loss, right, attention)]


TRAJECTORY_COLUMNS = ("step", "validation_loss", "validation_accuracy", "validation_attention")


def history_fields(history, steps_per_epoch: int) -> dict:
    """What a result keeps of a run's :class:`~qkov.language.batched.RunHistory` (whose
    evaluations are :func:`validation_measures`'): its trajectory, the measurement it ended
    at, why it ended and how long it trained."""
    trajectory = np.array([[e[c] for c in TRAJECTORY_COLUMNS] for e in history.evaluations],
                          dtype=float)
    best = int(np.flatnonzero(trajectory[:, 0] == history.best_step)[0])
    return {"loss": history.loss, "trajectory": trajectory, "ended_by": history.ended_by,
            "steps": history.steps, "best_step": history.best_step,
            "best": dict(zip(TRAJECTORY_COLUMNS, trajectory[best])),
            "epochs_trained": history.steps / steps_per_epoch}


# --- the rate each condition gets, and the comparisons --------------------------------------


def of_setting(results: list[dict], condition: str, rate: float) -> dict[int, dict]:
    """The runs of ``condition`` at base rate ``rate``, by seed."""
    return {r["seed"]: r for r in results if r["condition"] == condition and r["rate"] == rate}


def conditions_of(results: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["condition"] for r in results))


def rates_of(results: list[dict]) -> list[float]:
    return sorted({r["rate"] for r in results})


def mean_best_loss(results: list[dict], condition: str, rate: float) -> float:
    return float(np.mean([r["best"]["validation_loss"]
                          for r in of_setting(results, condition, rate).values()]))


def chosen_rates(results: list[dict]) -> dict[str, float]:
    """Per condition, the base rate of the sweep whose runs reach the lowest validation loss
    (the mean over seeds of each run's best): the same rule for the baseline and for the
    treatments."""
    return {c: min(rates_of(results), key=lambda rate: (mean_best_loss(results, c, rate), rate))
            for c in conditions_of(results)}


def at_chosen_rates(results: list[dict], chosen: dict[str, float]) -> list[dict]:
    return [r for r in results if r["rate"] == chosen[r["condition"]]]


SWEEP_COLUMNS = ("condition", "rate", "chosen", "best_validation_loss", "validation_accuracy",
                 "validation_attention", "epochs", "stopped_early")


def sweep_rows(results: list[dict], chosen: dict[str, float]) -> list[dict]:
    """Per condition and base rate (every one tried): the best validation loss (mean over
    seeds ± 95%), the validation accuracy and attention on the subject at that checkpoint,
    the epochs trained (mean) and how many runs stopped early rather than at the cap; the
    chosen rate marked."""
    out = []
    for c in conditions_of(results):
        for rate in rates_of(results):
            settings = list(of_setting(results, c, rate).values())
            best = [r["best"] for r in settings]
            out.append({"condition": c, "rate": f"{rate:g}",
                        "chosen": "yes" if chosen[c] == rate else "",
                        "best_validation_loss": interval_text(
                            *seed_interval([b["validation_loss"] for b in best]), digits=3),
                        "validation_accuracy": f"{np.mean([b['validation_accuracy'] for b in best]):.3f}",
                        "validation_attention": f"{np.mean([b['validation_attention'] for b in best]):.3f}",
                        "epochs": f"{np.mean([r['epochs_trained'] for r in settings]):.2f}",
                        "stopped_early": f"{sum(r['ended_by'] == 'patience' for r in settings)} "
                                         f"of {len(settings)}"})
    return out


RUN_COLUMNS = ("condition", "rate", "seed", "best_validation_loss", "validation_accuracy",
               "validation_attention", "best_step", "steps", "epochs_trained", "ended_by",
               "test_accuracy", "test_attention")


def run_rows(results: list[dict]) -> list[dict]:
    """sweep.csv: every run, how it trained and where it ended."""
    return [{"condition": r["condition"], "rate": r["rate"], "seed": r["seed"],
             "best_validation_loss": r["best"]["validation_loss"],
             "validation_accuracy": r["best"]["validation_accuracy"],
             "validation_attention": r["best"]["validation_attention"],
             "best_step": r["best_step"], "steps": r["steps"],
             "epochs_trained": r["epochs_trained"], "ended_by": r["ended_by"],
             "test_accuracy": r["overall_accuracy"],
             "test_attention": float(np.nanmean(r["attention"]))}
            for r in results]


ATTENTION_WORDS = {HIGHER: "sharper", LOWER: "blunter", NOT_RESOLVED: "not resolved"}
ACCURACY_WORDS = {HIGHER: "higher", LOWER: "lower", NOT_RESOLVED: "not resolved"}


# the trajectory's columns at_loss reads: the attention, then the accuracy
AT_LOSS_COLUMNS = (TRAJECTORY_COLUMNS.index("validation_attention"),
                   TRAJECTORY_COLUMNS.index("validation_accuracy"))


def crossing(result: dict, level: float) -> tuple[float, float] | None:
    """A run's (attention, accuracy) on the validation examples when its validation loss
    first reaches ``level``, interpolated in log loss between the evaluations around it; None
    if it never does, or if its first evaluation is already at or below ``level`` (when it
    crossed is not known; the figures measure each run before its first step, so this leaves
    out only the levels above the initial loss)."""
    trajectory = result["trajectory"]
    if trajectory[0, TRAJECTORY_COLUMNS.index("validation_loss")] <= level:
        return None
    return at_loss(trajectory, level, AT_LOSS_COLUMNS)


def matched_loss_data(results: list[dict], chosen: dict[str, float],
                      losses: Sequence[float]) -> list[dict]:
    """Each condition other than matched, at every base rate, against matched at its chosen
    rate, at each of the validation ``losses``: where every run of both is seen to cross
    that validation loss (:func:`crossing`), the attention on the subject and the accuracy on
    the validation examples when it first does (interpolated in log loss between
    evaluations, as ``fig2-controls``), their gaps paired by seed (95% t interval) and the
    verdicts."""
    reference = of_setting(results, MATCHED, chosen[MATCHED])
    out = []
    for c in [c for c in conditions_of(results) if c != MATCHED]:
        for rate in rates_of(results):
            treated = of_setting(results, c, rate)
            seeds = sorted(set(treated) & set(reference))
            for level in losses:
                row = {"condition": c, "rate": rate, "chosen": chosen[c] == rate, "loss": level}
                a = [crossing(treated[s], level) for s in seeds]
                b = [crossing(reference[s], level) for s in seeds]
                if any(x is None for x in a + b):
                    out.append({**row, "reached": False})
                    continue
                attention = paired_verdict([x[0] - y[0] for x, y in zip(a, b)])
                accuracy = paired_verdict([x[1] - y[1] for x, y in zip(a, b)])
                out.append({**row, "reached": True,
                            "attention": float(np.mean([x[0] for x in a])),
                            "matched_attention": float(np.mean([y[0] for y in b])),
                            "attention_gap": attention[1], "attention_gap_ci95": attention[2],
                            "attention_verdict": ATTENTION_WORDS[attention[0]],
                            "accuracy_gap": accuracy[1], "accuracy_gap_ci95": accuracy[2],
                            "accuracy_verdict": ACCURACY_WORDS[accuracy[0]]})
    return out


MATCHED_LOSS_DATA_COLUMNS = ("condition", "rate", "chosen", "loss", "reached", "attention",
                             "matched_attention", "attention_gap", "attention_gap_ci95",
                             "attention_verdict", "accuracy_gap", "accuracy_gap_ci95",
                             "accuracy_verdict")
MATCHED_LOSS_COLUMNS = ("condition", "rate", "loss", "attention", "matched_attention",
                        "attention_gap", "verdict", "accuracy_gap")


def matched_loss_rows(data: list[dict], chosen_only: bool = True) -> list[dict]:
    """The rows of :func:`matched_loss_data` that both reach (the chosen rates only, by
    default), as printed."""
    return [{"condition": d["condition"], "rate": f"{d['rate']:g}", "loss": f"{d['loss']:g}",
             "attention": f"{d['attention']:.3f}", "matched_attention": f"{d['matched_attention']:.3f}",
             "attention_gap": interval_text(d["attention_gap"], d["attention_gap_ci95"], digits=3),
             "verdict": d["attention_verdict"],
             "accuracy_gap": interval_text(d["accuracy_gap"], d["accuracy_gap_ci95"], digits=3)}
            for d in data if d["reached"] and (d["chosen"] or not chosen_only)]


def lowest_shared(data: list[dict], condition: str, rate: float) -> dict | None:
    """The comparison at the lowest of the matched losses both reach; None if none."""
    reached = [d for d in data if d["condition"] == condition and d["rate"] == rate
               and d["reached"]]
    return min(reached, key=lambda d: d["loss"]) if reached else None


def lowest_shared_values(data: list[dict], condition: str, rate: float) -> dict[str, str]:
    """What the chapters quote of :func:`lowest_shared`, as printed: the loss ("none"), the
    attention gap and its verdict ("not reached"), and the accuracy gap ("-" where none)."""
    shared = lowest_shared(data, condition, rate)
    if shared is None:
        return {"loss": "none", "attention_gap": "-", "verdict": "not reached",
                "accuracy_gap": "-"}
    return {"loss": f"{shared['loss']:g}",
            "attention_gap": interval_text(shared["attention_gap"],
                                           shared["attention_gap_ci95"], digits=3),
            "verdict": shared["attention_verdict"],
            "accuracy_gap": interval_text(shared["accuracy_gap"], shared["accuracy_gap_ci95"],
                                          digits=3)}


def rate_place(rate: float, sweep: Sequence[float]) -> str:
    """Where a chosen base rate lies in the sweep, in words."""
    if rate == sweep[0]:
        return "the lowest rate of the sweep"
    if rate == sweep[-1]:
        return "the highest rate of the sweep"
    return "inside the sweep"


def test_data(results: list[dict], chosen: dict[str, float], documents: np.ndarray,
              bins: Sequence[tuple[str, np.ndarray]], margin: float,
              rationale: np.ndarray | None = None, bin_column: str = "bin") -> list[dict]:
    """Each condition at every base rate, on the test examples at each run's best
    checkpoint, per bin of examples (``bins``: (name, mask) pairs, the first "all"; the name
    in the column ``bin_column``), with the rates its circuits learn at (W_Q and W_K, the
    OV circuit and the rest): accuracy (a result's
    ``correct``) and attention on the rationale (its ``attention``; over the examples with a
    rationale, ``rationale`` their mask, None: all), the mean over seeds and examples with a
    95% interval that draws the seeds and the test ``documents`` (one per example) again;
    their gaps to matched at its chosen rate, paired by seed and example; and whether the
    accuracy is no worse than matched's by more than ``margin`` (one-sided, 95%)."""
    if rationale is None:
        rationale = np.ones(len(documents), dtype=bool)
    reference = of_setting(results, MATCHED, chosen[MATCHED])
    out = []
    for c in conditions_of(results):
        for rate in rates_of(results):
            treated = of_setting(results, c, rate)
            seeds = sorted(set(treated) & set(reference))
            qk_rate, _, ov_rate = treated[seeds[0]]["circuit_rates"]
            for name, in_bin in bins:
                row = {"condition": c, "rate": rate, "chosen": chosen[c] == rate,
                       "qk_rate": qk_rate, "ov_rate": ov_rate,
                       bin_column: name, "examples": int(in_bin.sum())}
                for measure, key in (("accuracy", "correct"), ("attention", "attention")):
                    picked = in_bin & rationale if measure == "attention" else in_bin
                    if not picked.any():  # a bin without a rationale: nothing to measure
                        row.update({f"{measure}{part}": math.nan for part in (
                            "", "_low", "_high", "_gap", "_gap_low", "_gap_high")})
                        continue
                    values = np.array([treated[s][key][picked] for s in seeds])
                    row[measure], row[f"{measure}_low"], row[f"{measure}_high"] = \
                        document_bootstrap(values, documents[picked])
                    if c == MATCHED and rate == chosen[MATCHED]:
                        continue
                    gaps = values - np.array([reference[s][key][picked] for s in seeds])
                    (row[f"{measure}_gap"], row[f"{measure}_gap_low"],
                     row[f"{measure}_gap_high"]) = document_bootstrap(gaps, documents[picked])
                    if measure == "accuracy":
                        row["no_cost"] = non_inferiority(gaps, documents[picked], margin)[0]
                out.append(row)
    return out


def test_data_columns(bin_column: str = "bin") -> tuple[str, ...]:
    """The columns of :func:`test_data`'s rows, as stored."""
    return ("condition", "rate", "chosen", "qk_rate", "ov_rate", bin_column, "examples",
            *(f"{measure}{end}" for measure in ("accuracy", "attention")
              for end in ("", "_low", "_high", "_gap", "_gap_low", "_gap_high")),
            "no_cost")


def bracket(mean: float, low: float, high: float, digits: int = 3) -> str:
    """A mean and its interval, as "0.873 [0.851, 0.890]"; "-" where nothing was measured
    (NaN)."""
    if math.isnan(mean):
        return "-"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def test_columns(bin_column: str = "bin") -> tuple[str, ...]:
    """The columns :func:`test_rows` prints."""
    return ("condition", "rate", bin_column, "examples", "accuracy", "accuracy_gap", "no_cost",
            "attention", "attention_gap")


def test_rows(data: list[dict], only: str | None = None, chosen_only: bool = True,
              bin_column: str = "bin") -> list[dict]:
    """The rows of :func:`test_data` as printed (columns :func:`test_columns`): the chosen
    rates only (by default), one bin (``only``) or all."""
    out = []
    for d in data:
        if (chosen_only and not d["chosen"]) or (only and d[bin_column] != only):
            continue
        gap = "accuracy_gap" in d
        out.append({"condition": d["condition"], "rate": f"{d['rate']:g}",
                    bin_column: d[bin_column], "examples": d["examples"],
                    "accuracy": bracket(d["accuracy"], d["accuracy_low"], d["accuracy_high"]),
                    "accuracy_gap": bracket(d["accuracy_gap"], d["accuracy_gap_low"],
                                            d["accuracy_gap_high"]) if gap else "-",
                    "no_cost": d["no_cost"] if gap else "-",
                    "attention": bracket(d["attention"], d["attention_low"], d["attention_high"]),
                    "attention_gap": bracket(d["attention_gap"], d["attention_gap_low"],
                                             d["attention_gap_high"]) if gap else "-"})
    return out


AGAINST_COLUMNS = ("condition", "against", "measure", "mean", "low", "high", "reading")
AGAINST_ROW_COLUMNS = ("condition", "against", "measure", "difference", "reading")


def against_row(condition: str, against: str, measure: str, differences, documents,
                words: tuple[str, str] = ("higher", "lower")) -> dict:
    """One row of a figure's against.csv: ``condition`` minus a baseline (``against``) in
    ``measure``, from ``differences`` [seeds, examples] paired by example (and by seed where
    the baseline is a condition), the mean with the interval of :func:`document_bootstrap`
    (95%, the seeds and the test ``documents`` drawn again), and its reading: ``words``
    where the interval is above or below 0, else "not resolved"."""
    mean, low, high = document_bootstrap(differences, documents)
    if low > 0:
        reading = words[0]
    elif high < 0:
        reading = words[1]
    else:
        reading = NOT_RESOLVED
    return {"condition": condition, "against": against, "measure": measure,
            "mean": mean, "low": low, "high": high, "reading": reading}


def runs_by_condition(results: list[dict]) -> dict[str, list[dict]]:
    """Per condition, its runs (``results``: each condition's runs at one rate) in the order
    of their seeds, so that two conditions' arrays pair by seed; every condition must have
    the same seeds."""
    by_condition = {c: sorted((r for r in results if r["condition"] == c),
                              key=lambda r: r["seed"]) for c in conditions_of(results)}
    seeds = {c: [r["seed"] for r in runs] for c, runs in by_condition.items()}
    first = next(iter(seeds.values()), [])
    for c, of_c in seeds.items():
        if of_c != first or len(set(of_c)) != len(of_c):
            raise ValueError(f"results: expected one run per seed {first} for every condition, "
                             f"got seeds {of_c} for {c!r}")
    return by_condition


def against_glued(against: list[dict], prefix: str, names: dict) -> dict[str, str]:
    """A figure's glue names for its against.csv rows: per row, ``<prefix><name>_<condition>``
    (the interval) and ``<prefix><name>_verdict_<condition>`` (its reading), ``names``
    giving the name of each (against, measure)."""
    out = {}
    for row in against:
        name = names[(row["against"], row["measure"])]
        key = row["condition"].replace(" ", "_")
        out[f"{prefix}{name}_{key}"] = bracket(row["mean"], row["low"], row["high"])
        out[f"{prefix}{name}_verdict_{key}"] = row["reading"]
    return out


def against_rows(against: list[dict]) -> list[dict]:
    """The rows of a figure's against.csv as printed: the difference as mean [low, high]."""
    return [{"condition": r["condition"], "against": r["against"], "measure": r["measure"],
             "difference": bracket(r["mean"], r["low"], r["high"]), "reading": r["reading"]}
            for r in against]


RATE_COLUMNS = ("condition", "rate", "best_validation_loss", "loss", "attention_gap",
                "verdict", "test_accuracy_gap", "no_cost")


def rate_rows(results: list[dict], matched_loss: list[dict], test: list[dict],
              bin_column: str = "bin") -> list[dict]:
    """How each verdict depends on the base rate: every condition other than matched at
    every rate of the sweep, against matched at its chosen rate - at the lowest matched
    loss both reach, the attention gap and its verdict; on all the test examples (the bin
    "all" of :func:`test_data`), the accuracy gap and the no-cost verdict."""
    out = []
    for c in [c for c in conditions_of(results) if c != MATCHED]:
        for rate in rates_of(results):
            shared = lowest_shared(matched_loss, c, rate)
            overall = next(d for d in test if d["condition"] == c and d["rate"] == rate
                           and d[bin_column] == "all")
            out.append({"condition": c, "rate": f"{rate:g}",
                        "best_validation_loss": f"{mean_best_loss(results, c, rate):.3f}",
                        "loss": f"{shared['loss']:g}" if shared else "none shared",
                        "attention_gap": interval_text(shared["attention_gap"],
                                                       shared["attention_gap_ci95"], digits=3)
                        if shared else "-",
                        "verdict": shared["attention_verdict"] if shared else "-",
                        "test_accuracy_gap": bracket(overall["accuracy_gap"],
                                                     overall["accuracy_gap_low"],
                                                     overall["accuracy_gap_high"]),
                        "no_cost": overall["no_cost"]})
    return out


