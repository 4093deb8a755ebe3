"""fig2-controls: paper Fig. 2's row 2 against controls at a matched loss.

Row 2 of paper Fig. 2 raises the QK learning rate, but its panels differ from row 1 in more
than the rate: the FAFO panels start every factor at 1e-6 I (row 1's FAFO starts W_Q, W_K at
PyTorch's default), and the CACO panels read sequences of T = 128 (row 1: 64). Comparing
the rows confounds the rate with the start and the length. This figure trains the missing
controls - each row-2 setting at equal rates (r = 1), with the same epochs - and the CACO
QK-rate sweep the authors' notebook names (QK 0.02-0.1 at OV 0.01, T = 128), and compares
every row-2 panel with its own control at matched held-out losses, seed by seed (the runs
of one seed see the same batches). It also trains row 1's FAFO with the authors' early-stop
rule, to say what that rule changes.

The row-2 panels themselves are paper-fig2's: their trajectories are read from its
``trajectories.csv`` (and its heatmap cells from ``heatmaps.csv``), so nothing is trained
twice.

:class:`Parameters` are the notebook's; :func:`configs` the runs; :func:`comparison_rows` and
:func:`sweep_rows` the matched-loss tables; :func:`authors_stop_rows` the early stop's
effect; :func:`plot` the drawing.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from .. import artifacts
from ..checks import (
    ParameterError,
    boolean,
    integer,
    number,
    number_list,
    optional_path,
    seed_list,
)
from ..cost import Work
from ..params import FigureParameters, parameter
from ..plotting import COLUMN_WIDTH_IN, house_style, new_figure
from ..spec import FigureSpec
from ..stats import (
    EQUIVALENT,
    HIGHER,
    LOWER,
    NOT_RESOLVED,
    interval_text,
    paired_verdict,
    range_text,
    seed_interval,
)
from ..synthetic import authors, metrics, tasks, trajectories
from ..synthetic.models import ModelConfig
from ..synthetic.train import RunConfig

SPEC = FigureSpec(
    id="fig2-controls", reproduces=None, page="book/paper-fig2",
    tables=("authors-stop.csv", trajectories.FILE),
    reads=("paper-fig2/summary.json", f"paper-fig2/{trajectories.FILE}",
           "paper-fig2/heatmaps.csv", "paper-fig2/data.csv"),
    threads=2, resources={"mem_mb": 4000, "runtime": 60},
    alt=("Three plots of attention on the distinct tokens against held-out loss during "
         "training (loss decreasing to the right): (a) FAFO from 1e-6 I with the QK rate 20 "
         "times the OV rate, ramped to 40 times, and at equal rates; (b) CACO at T = 128 with "
         "the QK rate 5 times, ramped to 10 times, and equal; (c) attention at two matched "
         "losses against the QK rate of CACO at T = 128 (OV rate 0.01), mean and 95% interval "
         "over seeds."),
    rates={"model-steps": 100_000})

SEEDS = (1234, 1235, 1236, 1237, 1238)
EARLY_STOP_LOSS = 1e-3  # paper-fig2's
# The row-2 settings at equal rates, with the epochs of the longest row-2 panel of each:
# FAFO from 1e-6 I at T = 64 (2000 x 100, as FAFO-ramp40x; early stop as FAFO-qk20x), CACO
# from the default initialisation at T = 128 (2000 x 100, no early stop, as both CACO panels).
FAFO_CONTROL = RunConfig("FAFO-r1", ModelConfig("FAFO", qk_init="identity", ov_init="identity"),
                         SEEDS[0], 2000, 100, lr_qk=0.01, lr_ov=0.01,
                         early_stop_loss=EARLY_STOP_LOSS)
CACO_CONTROL = RunConfig("CACO-T128-r1", ModelConfig("CACO"), SEEDS[0], 2000, 100, lr_qk=0.01,
                         lr_ov=0.01, T=128)
# Row 1's FAFO (W_Q, W_K default, W_V, W_O 1e-6 I; 2500 x 250), stopped by the authors' rule.
FAFO_AUTHORS_STOP = RunConfig("FAFO-authors-stop", ModelConfig("FAFO", qk_init="default",
                                                             ov_init="identity"),
                              SEEDS[0], 2500, 250, early_stop_loss=EARLY_STOP_LOSS,
                              early_stop_rule="authors")

# Each row-2 panel of paper-fig2 and its control here.
PAIRS = (("FAFO-qk20x", "FAFO-r1"), ("FAFO-ramp40x", "FAFO-r1"),
         ("CACO-qk5x", "CACO-T128-r1"), ("CACO-ramp10x", "CACO-T128-r1"))
FIG2_QK5X = ("CACO-qk5x", 0.05)  # paper-fig2's panel at one of the sweep's rates
OV_RATE = 0.01
TRAJECTORY_DENSE_EPOCHS, TRAJECTORY_EVERY = 100, 10  # as paper-fig2


def sweep_key(rate: float) -> str:
    return f"CACO-T128-qk{rate:g}"


def _rates(name, value) -> list[float]:
    rates = number_list(name, value, above=0, at_most=1.0, distinct=True)
    taken = [r for r in rates if r in (OV_RATE, FIG2_QK5X[1])]
    if taken:
        raise ParameterError(name, f"{taken[0]:g} is trained elsewhere (0.01: the control "
                                   "here, 0.05: paper-fig2's CACO-qk5x); give the other rates")
    return sorted(rates)


def _losses(name, value) -> list[float]:
    return sorted(number_list(name, value, above=0, below=3.9, distinct=True), reverse=True)


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters; the notebook then reads paper-fig2's files
    (:func:`fig2_inputs`), so a missing or stale paper-fig2 run fails before any work."""

    seeds: list = parameter(
        list(SEEDS), seed_list,
        doc="the seeds of paper-fig2's runs (compared seed by seed)")
    epochs_scale: float = parameter(
        1.0, number, above=0, at_most=1,
        doc="fraction of each run's epochs, in (0, 1]")
    qk_rates: list = parameter(
        [0.02, 0.03, 0.04, 0.1], _rates,
        doc="CACO sweep at T 128, OV rate 0.01 (0.01 and 0.05 are trained elsewhere)")
    matched_losses: list = parameter(
        [1.0, 0.3, 0.1, 0.03, 0.01, 0.003], _losses,
        doc="held-out losses to compare attention at")
    eval_batches: int = parameter(
        200, integer, minimum=1, maximum=10_000,
        doc="held-out batches of 32 for the heatmap of the authors' stop; 1 to 10,000")
    trajectory_batches: int = parameter(
        16, integer, minimum=1, maximum=1_000,
        doc="held-out batches of 32 per measurement during training, as paper-fig2")
    fig2_summary: str | None = parameter(
        None, optional_path,
        doc="paper-fig2's summary.json; None: the pipeline's")
    workers: int = parameter(
        2, integer, minimum=1,
        doc="training processes (results do not depend on it)")
    progress: bool = parameter(True, boolean, doc="show a progress bar while training")

    def work(self) -> Work:
        """Optimizer steps of every run to its last epoch (the FAFO runs stop early, so this
        bounds them), each weighted by max(1, T / 64)."""
        return Work(sum(c.steps * max(1.0, c.T / 64) for c in configs(self)), "model-steps")


def fig2_inputs(p: Parameters) -> dict:
    """paper-fig2's files this run reads (:func:`read_fig2`), from ``fig2_summary`` or the
    pipeline's folder; a ParameterError naming ``fig2_summary`` if they are missing or from
    another run."""
    summary = (Path(p.fig2_summary) if p.fig2_summary is not None
               else artifacts.default_dir("paper-fig2") / "summary.json")
    return read_fig2(summary, {"seeds": p.seeds, "trajectory_batches": p.trajectory_batches,
                               "epochs_scale": p.epochs_scale, "eval_batches": p.eval_batches})


def read_fig2(path: Path, expected: dict) -> dict:
    """paper-fig2's trajectories of the row-2 panels and its row-1 FAFO heatmap cells
    (mean over seeds) from the files next to its ``summary.json`` (``path``): per panel
    key, the runs' trajectories in seed order (``trajectories``) and, for "FAFO", the top
    row of the heatmap (``fafo_top_row``), the epochs trained (``fafo_epochs``) and its
    early-stop rule. Its parameters must be ``expected``'s (this run's seeds, trajectory
    batches, epochs scale and held-out batches): the comparison is seed by seed, at the same
    training lengths, on the same held-out sets."""
    runs_file, cells_file = path.parent / trajectories.FILE, path.parent / "heatmaps.csv"
    for needed in (path, runs_file, cells_file):
        if not needed.is_file():
            raise ParameterError("fig2_summary", f"no file {needed}: run "
                                 "notebooks/paper-fig2.ipynb first (`make figures` does)")
    try:
        try:
            summary = json.loads(path.read_text())
        except ValueError as err:
            raise ValueError(f"{path}: not JSON ({err})") from None
        if not isinstance(summary, dict) or summary.get("figure") != "paper-fig2":
            raise ValueError(f"{path}: not written by paper-fig2")
        given = summary.get("parameters", {})
        seeds = expected["seeds"]
        for name, mine in expected.items():
            if given.get(name) != mine:
                raise ValueError(f"{path}: paper-fig2 ran with {name} = {given.get(name)!r}, "
                                 f"this run has {mine!r}; the comparison needs the same "
                                 "seeds, lengths and held-out sets")
        wanted = {a for a, _ in PAIRS} | {FIG2_QK5X[0]}
        runs = [t for t in trajectories.read(runs_file) if t.panel in wanted]
        by_panel = {k: sorted((t for t in runs if t.panel == k), key=lambda t: t.seed)
                    for k in wanted}
        for k, mine in by_panel.items():
            if [t.seed for t in mine] != sorted(seeds):
                raise ValueError(f"{runs_file}: expected the runs of {k} for seeds "
                                 f"{sorted(seeds)}, found {[t.seed for t in mine]}")
        with cells_file.open(newline="") as handle:
            cells = [row for row in csv.DictReader(handle)
                     if row.get("panel") == "FAFO" and row.get("probability_lo") == "0.8"]
        if len(cells) != len(metrics.HEATMAP_BINS) - 1:
            raise ValueError(f"{cells_file}: expected the FAFO top row of "
                             f"{len(metrics.HEATMAP_BINS) - 1} cells")
        top_row = [float(row["pct_mean"]) for row in sorted(
            cells, key=lambda row: float(row["attention_lo"]))]
        with (path.parent / "data.csv").open(newline="") as handle:
            fafo = [row for row in csv.DictReader(handle) if row.get("panel") == "FAFO"]
        if not fafo or "epochs_mean" not in fafo[0]:
            raise ValueError(f"{path.parent / 'data.csv'}: expected FAFO's epochs_mean")
        epochs = interval_text(float(fafo[0]["epochs_mean"]), float(fafo[0]["epochs_ci95"]))
        rule = given.get("early_stop_rule", "epoch")
    except ValueError as err:
        raise ParameterError("fig2_summary", f"{err}; re-run notebooks/paper-fig2.ipynb") \
            from None
    return {"trajectories": {k: [t.points for t in v] for k, v in by_panel.items()},
            "fafo_top_row": top_row, "fafo_epochs": epochs, "early_stop_rule": rule}


def configs(p: Parameters) -> list[RunConfig]:
    """The controls, the QK sweep and row-1 FAFO by the authors' stop, for every seed."""
    templates = [FAFO_CONTROL, CACO_CONTROL, FAFO_AUTHORS_STOP]
    templates += [replace(CACO_CONTROL, name=sweep_key(rate), lr_qk=rate) for rate in p.qk_rates]
    out = []
    for t in templates:
        epochs = max(1, round(t.epochs * p.epochs_scale))
        out += [replace(t, name=f"{t.name}/seed{seed}", seed=seed, epochs=epochs)
                for seed in p.seeds]
    return out


@dataclass
class Runs:
    """Every panel's trajectories in seed order (this figure's runs and paper-fig2's row 2),
    and this figure's trained runs by panel."""

    trajectories: dict[str, list[np.ndarray]]
    results: dict[str, list]
    fig2: dict  # what was read of paper-fig2 (fig2_inputs)


def collect(fig2: dict, results) -> Runs:
    """The runs of this figure (``results``) with paper-fig2's (``fig2``: :func:`fig2_inputs`)."""
    mine: dict[str, list] = {}
    for r in sorted(results, key=lambda r: r.config.seed):
        mine.setdefault(r.config.name.split("/")[0], []).append(r)
    paths = {k: [np.array([v for v in r.epoch_callback_values if v is not None]) for r in rs]
             for k, rs in mine.items()}
    return Runs({**fig2["trajectories"], **paths}, mine, fig2)


def at_loss(runs: Runs, panel: str, level: float) -> list[float] | None:
    """Per seed, attention on the distinct tokens when the held-out loss first reached
    ``level`` (None if some seed never did)."""
    return metrics.attention_at_loss_per_seed(runs.trajectories[panel], level)


# A difference in attention mass smaller than this does not count, however sure: one
# hundredth of the attention mass, about a third of the spread of a single seed's mean
# attention in Fig. 2 (two runs that both still attend uniformly differ by 1e-5).
MIN_DIFFERENCE = 0.01
VERDICTS = {HIGHER: "sharper", LOWER: "blunter", EQUIVALENT: "tie",
            NOT_RESOLVED: "not resolved"}


def compare(faster: list[float] | None, control: list[float] | None) -> dict:
    """Paired by seed: the faster run's attention minus its control's, mean and 95% t
    interval, and the verdict (qkov.stats.paired_verdict with margin MIN_DIFFERENCE):
    "sharper" (the interval lies above MIN_DIFFERENCE), "blunter" (below -MIN_DIFFERENCE),
    "tie" (within +-MIN_DIFFERENCE), "not resolved" (none of these), or "not reached" where
    either run never reached the loss."""
    if faster is None or control is None:
        return {"verdict": "not reached", "diff": None, "ci95": None}
    verdict, diff, half = paired_verdict(np.subtract(faster, control), MIN_DIFFERENCE)
    return {"verdict": VERDICTS[verdict], "diff": diff, "ci95": half}


COMPARISON_COLUMNS = ("panel", "control", "loss", "panel_mean", "panel_ci95", "control_mean",
                      "control_ci95", "difference", "difference_ci95", "verdict")


def comparison_rows(p: Parameters, runs: Runs) -> list[dict]:
    """data.csv: per row-2 panel and sweep rate against its control, at every matched
    loss: attention on the distinct tokens of both (mean, 95% interval) and their paired
    difference with its verdict (:func:`compare`)."""
    pairs = [*PAIRS, *((sweep_key(rate), CACO_CONTROL.name) for rate in p.qk_rates)]
    rows = []
    for panel, control in pairs:
        for level in p.matched_losses:
            a, b = at_loss(runs, panel, level), at_loss(runs, control, level)
            c = compare(a, b)
            stats = {name: seed_interval(v) if v is not None else (None, None)
                     for name, v in (("panel", a), ("control", b))}
            rows.append({"panel": panel, "control": control, "loss": level,
                         "panel_mean": stats["panel"][0], "panel_ci95": stats["panel"][1],
                         "control_mean": stats["control"][0],
                         "control_ci95": stats["control"][1], "difference": c["diff"],
                         "difference_ci95": c["ci95"], "verdict": c["verdict"]})
    return rows


# A difference whose whole interval lies within this is float32 rounding between two runs
# that both still attend uniformly (~1e-5 at most): its digits differ between machines, so
# it is printed as such (its verdict, "tie", does not depend on them). An exact 0 too: the
# native kernels give bit-identical runs there, the scalar ones a difference below it.
ROUNDING_DIFFERENCE = 1e-4


def _text(mean, half, difference: bool = False) -> str:
    if mean is None:
        return "-"
    if difference and abs(mean) + half < ROUNDING_DIFFERENCE:
        return f"|d| < {ROUNDING_DIFFERENCE:g}"
    return interval_text(mean, half, 3)


def comparison_table(rows: list[dict]) -> list[dict]:
    """The printed form of :func:`comparison_rows`: the four row-2 panels."""
    return [{"panel": row["panel"], "control": row["control"], "loss": f"{row['loss']:g}",
             "panel_attention": _text(row["panel_mean"], row["panel_ci95"]),
             "control_attention": _text(row["control_mean"], row["control_ci95"]),
             "difference": _text(row["difference"], row["difference_ci95"], difference=True),
             "verdict": row["verdict"]}
            for row in rows if row["panel"] in dict(PAIRS)]


def sweep_panels(p: Parameters) -> list[tuple[float, str]]:
    """(QK rate, panel) of the CACO sweep at T = 128, in order of the rate: the control here
    at the OV rate, paper-fig2's CACO-qk5x, and the sweep's own rates."""
    return sorted([(OV_RATE, CACO_CONTROL.name), (FIG2_QK5X[1], FIG2_QK5X[0]),
                   *((rate, sweep_key(rate)) for rate in p.qk_rates)])


def sweep_rows(p: Parameters, runs: Runs) -> list[dict]:
    """The CACO QK-rate sweep at T = 128 (OV 0.01; the control at 0.01 and paper-fig2's
    CACO-qk5x at 0.05 included): per rate, attention on the distinct tokens at every matched
    loss (mean ± 95% interval; "-" where some seed never reached it) and after the last
    epoch (the authors' stopping point), with the final held-out loss."""
    rows = []
    for rate, panel in sweep_panels(p):
        last = [t[-1] for t in runs.trajectories[panel]]
        row = {"qk_rate": f"{rate:g}", "r": f"{rate / OV_RATE:g}"}
        for level in p.matched_losses:
            values = at_loss(runs, panel, level)
            row[f"L={level:g}"] = "-" if values is None else interval_text(
                *seed_interval(values), 3)
        row["final"] = interval_text(*seed_interval([x[2] for x in last]), 3)
        row["final_loss"] = interval_text(*seed_interval([x[1] for x in last]), 3)
        rows.append(row)
    return rows


def sweep_verdict(p: Parameters, runs: Runs, level: float) -> dict:
    """Does attention at the matched loss ``level`` rise with the QK rate along the sweep?
    Per consecutive pair of rates, the paired difference's 95% interval: "rises" if every
    interval lies above 0 (rates whose runs did not all reach the loss are left out, and
    named)."""
    reached = [(rate, at_loss(runs, panel, level)) for rate, panel in sweep_panels(p)]
    missing = [rate for rate, values in reached if values is None]
    reached = [(rate, values) for rate, values in reached if values is not None]
    steps = [compare(b, a) for (_, a), (_, b) in zip(reached, reached[1:])]
    return {"rises": bool(steps) and all(s["verdict"] == "sharper" for s in steps),
            "steps": [s["verdict"] for s in steps],
            "rates": [rate for rate, _ in reached], "missing": missing}


CELLS = tuple(f"attn_{lo:.1f}-{lo + 0.2:.1f}" for lo in metrics.HEATMAP_BINS[:-1])
AUTHORS_STOP_COLUMNS = ("run", "seeds", "epochs", *CELLS)


def authors_stop_rows(p: Parameters, runs: Runs) -> list[dict]:
    """authors-stop.csv: row-1 FAFO under the two early-stop rules beside the authors' saved
    run: the epochs trained (the median, and the range over seeds) and the top row of the
    heatmap (probability of the correct token 0.8-1.0, % of held-out sequences per attention
    bin; ``<cell>`` the mean over seeds, ``<cell>_ci95`` its 95% half-width). The companion's
    rule: paper-fig2's FAFO (mean over seeds); the authors' rule: trained here (and its seed
    1234 alone, where the authors ran that seed)."""
    mine = runs.results[FAFO_AUTHORS_STOP.name]
    maps = [metrics.evaluate(r.params, r.config.model,
                             metrics.held_out_batches(r.config.seed, r.config.T,
                                                      p.eval_batches)).heatmap()
            for r in mine]
    theirs = next(h for h in authors.HEATMAPS if h.panel == "FAFO")
    rule = runs.fig2["early_stop_rule"]
    rows = [{"run": "authors' saved run", "seeds": len(theirs.seeds), "epochs": str(theirs.epochs),
             **dict(zip(CELLS, theirs.top_row))},
            {"run": f"companion, paper-fig2 ({rule} rule)", "seeds": len(p.seeds),
             "epochs": runs.fig2["fafo_epochs"], **dict(zip(CELLS, runs.fig2["fafo_top_row"]))},
            {"run": "companion, authors' rule", "seeds": len(mine),
             "epochs": range_text([r.epochs_run for r in mine]),
             **{c: seed_interval([m[-1, j] for m in maps])[0] for j, c in enumerate(CELLS)},
             **{f"{c}_ci95": seed_interval([m[-1, j] for m in maps])[1]
                for j, c in enumerate(CELLS)}}]
    if 1234 in p.seeds:
        k = [r.config.seed for r in mine].index(1234)
        rows.append({"run": "companion, authors' rule, seed 1234", "seeds": 1,
                     "epochs": str(mine[k].epochs_run),
                     **{c: float(maps[k][-1, j]) for j, c in enumerate(CELLS)}})
    # every row with every column (an interval only where the row has seeds to make one)
    return [{**row, **{f"{c}_ci95": row.get(f"{c}_ci95", float("nan")) for c in CELLS}}
            for row in rows]


def authors_stop_table(rows: list[dict]) -> list[dict]:
    """The printed form of :func:`authors_stop_rows`: each cell to one decimal, with its
    interval where there is one."""
    def cell(row, c):
        half = row[f"{c}_ci95"]
        return f"{row[c]:.1f}" if not np.isfinite(half) else interval_text(row[c], half, 3)

    return [{"run": row["run"], "seeds": row["seeds"], "epochs": row["epochs"],
             **{c: cell(row, c) for c in CELLS}} for row in rows]


def authors_rule_cell_move(rows: list[dict]) -> float:
    """The largest difference, in percentage points, between a top-row cell of row 1's FAFO
    stopped by the authors' rule (mean over seeds) and by paper-fig2's rule (the rows of
    :func:`authors_stop_rows`)."""
    ours = next(row for row in rows if row["run"] == "companion, authors' rule")
    fig2 = next(row for row in rows if row["run"].startswith("companion, paper-fig2"))
    return max(abs(ours[c] - fig2[c]) for c in CELLS)


def trajectory_rows(runs: Runs):
    """trajectories.csv: this figure's own runs (paper-fig2 stores its own)."""
    return trajectories.table(
        trajectories.Trajectory(panel, r.config.seed, points)
        for panel, rs in runs.results.items()
        for r, points in zip(rs, runs.trajectories[panel]))


# --- the figure ---------------------------------------------------------------------------

GROUPS = ((("FAFO-qk20x", "QK 20x", "#1b9e77"), ("FAFO-ramp40x", "QK 1x to 40x", "#7570b3"),
           ("FAFO-r1", "equal rates (control)", "#444444")),
          (("CACO-qk5x", "QK 5x", "#d95f02"), ("CACO-ramp10x", "QK 1x to 10x", "#e7298a"),
           ("CACO-T128-r1", "equal rates (control)", "#444444")))
LEVELS = np.geomspace(3.0, 3e-3, 31)  # the curves: ten points a decade


def _curve(runs: Runs, panel: str):
    points = [(level, at_loss(runs, panel, level)) for level in LEVELS]
    points = [(level, seed_interval(v)) for level, v in points if v is not None]
    return (np.array([x for x, _ in points]), np.array([m for _, (m, _) in points]),
            np.array([h for _, (_, h) in points]))


def plot(p: Parameters, runs: Runs):
    """(a), (b): attention on the distinct tokens against held-out loss, row-2 panels and
    their controls (mean over seeds, band: 95% interval); (c) the CACO QK-rate sweep at the
    two lowest matched losses every rate reached, against the QK rate."""
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 6.8))
        grid = fig.add_gridspec(2, 2)
        top = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])]
        for ax, group, title in zip(top, GROUPS, ("(a) FAFO from 1e-6 I, T = 64",
                                                  "(b) CACO, default init, T = 128")):
            for panel, label, color in group:
                loss, mean, half = _curve(runs, panel)
                ax.plot(loss, mean, color=color, label=label)
                ax.fill_between(loss, mean - half, mean + half, color=color, alpha=0.2, lw=0)
            T = next(c.T for c in (FAFO_CONTROL, CACO_CONTROL) if c.name == group[-1][0])
            ax.axhline(tasks.uniform_distinct_share("none", T), color="k", lw=0.8, ls=":")
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.invert_xaxis()
            ax.set_ylim(0, 1.02)
            ax.set_xlabel("held-out loss")
            ax.set_title(title)
            ax.legend(loc="upper left")
        top[0].set_ylabel("attention on distinct tokens")
        ax = fig.add_subplot(grid[1, :])
        panels = sweep_panels(p)
        everywhere = [level for level in sorted(p.matched_losses)
                      if all(at_loss(runs, panel, level) is not None for _, panel in panels)]
        for level, color in zip(everywhere[:2], ("#d95f02", "#7570b3")):
            points = [(rate, at_loss(runs, panel, level)) for rate, panel in panels]
            points = [(rate, seed_interval(v)) for rate, v in points if v is not None]
            ax.errorbar([x for x, _ in points], [m for _, (m, _) in points],
                        yerr=[h for _, (_, h) in points], fmt="o-", capsize=3, color=color,
                        label=f"at held-out loss {level:g}")
        ax.set_xscale("log")
        rates = [rate for rate, _ in panels]
        ax.set_xticks(rates, [f"{rate:g}" for rate in rates])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("QK learning rate (OV rate 0.01)")
        ax.set_ylabel("attention on distinct tokens")
        ax.set_title("(c) CACO at T = 128: attention at a matched loss against the QK rate")
        ax.legend(loc="lower right")
    return fig
