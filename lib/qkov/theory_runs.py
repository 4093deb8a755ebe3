"""The computations behind the theory chapter's three figures (the companion's own work).

theory-reduction: full-matrix gradient descent on the stylized model against the ODE.
theory-rescaling: the reduced dynamics of FAFO, FACO, CAFO, CACO, their effective ratio
    r_eff(t), and the ordering of attention sharpness it predicts against measured Fig. 2.
theory-ratio-sweep: attention at a matched loss against r, from the closed form, the
    stylized model and training on the synthetic task.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import artifacts, metrics, models, tasks, theory, train
from . import params as P
from .circuits import PARAMETERIZATIONS
from .processes import map_in_processes
from .stylized import Descent, StylizedModel, descend

SETTING_PARAMETERS = ("m", "n", "b", "M")


def _model(p: dict) -> StylizedModel:
    return StylizedModel(theory.Setting(m=p["m"], n=p["n"], b=p["b"], M=p["M"]))


def relative_errors(run: Descent, ode: theory.Trajectory) -> dict[str, float]:
    """How far a descent is from the ODE at the same flow times.

    mu_ov and mu_qk start at 0, so their error is relative to their largest value (sup norm);
    alpha and the loss never vanish, so theirs is pointwise relative.
    """
    s = ode.sample(np.minimum(run.t * ode.time_scale, ode.tau[-1]))
    errors = {f"err_{k}": float(np.max(np.abs(getattr(run, k) - s[k])) / np.max(np.abs(s[k])))
              for k in ("mu_ov", "mu_qk")}
    errors.update({f"err_{k}": float(np.max(np.abs(getattr(run, k) / s[k] - 1)))
                   for k in ("alpha", "loss")})
    return errors


# --- theory-reduction ------------------------------------------------------------------------

REDUCTION_PARAMETERS = (*SETTING_PARAMETERS, "eta_ov", "ratios", "target_loss", "step_fraction",
                        "batch_size", "seed", "workers", "artifacts_dir")


def validate_reduction(p: dict) -> dict:
    model = _model(p)
    return {
        "model": model,
        "eta_ov": P.number("eta_ov", p["eta_ov"], above=0),
        "ratios": P.number_list("ratios", p["ratios"], above=0),
        "target_loss": theory.check_loss_threshold("target_loss", p["target_loss"],
                                                   model.setting),
        "step_fraction": P.number("step_fraction", p["step_fraction"], above=0, below=0.1),
        "batch_size": P.integer("batch_size", p["batch_size"], 1),
        "seed": P.integer("seed", p["seed"], 0),
        "workers": P.integer("workers", p["workers"], 1),
        "artifacts_dir": P.optional_path("artifacts_dir", p["artifacts_dir"]),
    }


@dataclass
class ReductionRun:
    """One ratio r: the ODE, full-batch descent and minibatch descent of the full matrices."""

    r: float
    ode: theory.Trajectory
    full: Descent
    minibatch: Descent


def _descend(kw: dict) -> Descent:  # for map_in_processes: one argument, picklable
    return descend(**kw)


def descents(calls: list[dict], workers: int) -> list[Descent]:
    """``descend(**kw)`` for every ``kw`` in ``calls``, spread over ``workers`` processes
    (each descent is one long chain of small steps: processes, not threads, speed it up)."""
    return map_in_processes(_descend, [(kw,) for kw in calls], workers)


def reduction_runs(p: dict) -> list[ReductionRun]:
    model = p["model"]
    calls = []
    for r in p["ratios"]:
        kw = dict(model=model, parameterization="CACO", eta_ov=p["eta_ov"],
                  eta_qk=r * p["eta_ov"], target_loss=p["target_loss"],
                  step_fraction=p["step_fraction"])
        calls += [kw, kw | dict(batch_size=p["batch_size"], seed=p["seed"])]
    done = descents(calls, p["workers"])
    return [ReductionRun(r, theory.integrate_until(model.setting, p["eta_ov"], r * p["eta_ov"],
                                                   p["target_loss"]),
                         done[2 * k], done[2 * k + 1]) for k, r in enumerate(p["ratios"])]


def reduction_rows(runs: list[ReductionRun]) -> list[dict]:
    """Per ratio and descent: steps, relative errors against the ODE, distance from the set."""
    rows = []
    for run in runs:
        for name, d in (("full batch", run.full), (f"batch {run.minibatch.batch_size}",
                                                    run.minibatch)):
            rows.append({"r": run.r, "descent": name, "steps": len(d.t) - 1,
                         **relative_errors(d, run.ode),
                         "max_distance_from_set": float(d.distance.max()),
                         "final_distance_from_set": float(d.distance[-1])})
    return rows


REDUCTION_COLUMNS = ("r", "descent", "steps", "err_mu_ov", "err_mu_qk", "err_alpha", "err_loss",
                     "off_set")


def reduction_table(rows: list[dict]) -> list[dict]:
    """The rows for printing: distances from the set below 1e-12 are rounding, shown as such
    (their digits differ between machines)."""
    return [{**row, "off_set": ("< 1e-12" if row["max_distance_from_set"] < 1e-12
                                else f"{row['final_distance_from_set']:.2g} at end")}
            for row in rows]


def reduction_curves(runs: list[ReductionRun], points: int = 200, markers: int = 24):
    """The plotted points, per ratio: the ODE and minibatch descent at ``points`` log-spaced
    normalised times, full-batch descent at ``markers`` of them (the last four decades)."""
    rows = []
    quantities = ("mu_ov", "mu_qk", "alpha", "loss")
    for run in runs:
        end, scale = run.ode.tau[-1], run.ode.time_scale
        tau = np.geomspace(end * 1e-4, end, points)
        ode = run.ode.sample(tau)
        rows += [{"r": run.r, "source": "ODE", "tau": float(tau[k]),
                  **{q: float(ode[q][k]) for q in quantities}} for k in range(points)]
        for name, d, grid in (("full batch", run.full, np.geomspace(end * 1e-3, end, markers)),
                              ("minibatch", run.minibatch, tau)):
            picks = np.unique(np.searchsorted(d.t * scale, grid).clip(0, len(d.t) - 1))
            rows += [{"r": run.r, "source": name, "tau": float(d.t[k] * scale),
                      **{q: float(getattr(d, q)[k]) for q in quantities}} for k in picks]
    return rows


# --- theory-rescaling ------------------------------------------------------------------------

RESCALING_PARAMETERS = (*SETTING_PARAMETERS, "eta_ov", "r", "init_scale", "default_init_rate",
                        "matched_loss", "fig2_summary", "artifacts_dir")
ROW1_PANELS = ("FAFO", "FACO", "CAFO", "CACO")  # Fig. 2 row 1: equal learning rates
# Fig. 2 row 1 starts every factor at 1e-6 I except FAFO's W_Q, W_K (PyTorch's default init).
DEFAULT_INIT_FACTORS = {"FAFO": "qk"}


def validate_rescaling(p: dict) -> dict:
    setting = theory.Setting(m=p["m"], n=p["n"], b=p["b"], M=p["M"])
    summary = (Path(p["fig2_summary"]) if p["fig2_summary"] is not None
               else artifacts.default_dir("paper-fig2") / "summary.json")
    matched_loss = theory.check_loss_threshold("matched_loss", p["matched_loss"], setting)
    return {
        "setting": setting,
        "eta_ov": P.number("eta_ov", p["eta_ov"], above=0),
        "r": P.number("r", p["r"], above=0),
        "init_scale": P.number("init_scale", p["init_scale"], above=0),
        "default_init_rate": P.number("default_init_rate", p["default_init_rate"], above=0),
        "matched_loss": matched_loss,
        "measured": measured_fig2_sharpness(summary, matched_loss),
        "artifacts_dir": P.optional_path("artifacts_dir", p["artifacts_dir"]),
    }


def measured_fig2_sharpness(path: Path, matched_loss: float) -> dict[str, dict[str, float]]:
    """Per Fig. 2 row-1 panel, when each seed's held-out loss first reached ``matched_loss``:
    the attention on distinct and on class-identifying tokens (mean and std over seeds).

    Read from the ``trajectories.csv`` that paper-fig2 writes next to its ``summary.json``
    (``path``): the panels stop at different losses, so their end-of-training attention is
    not compared at equal loss.
    """
    trajectories = path.parent / "trajectories.csv"
    for needed in (path, trajectories):
        if not needed.is_file():
            raise P.ParameterError("fig2_summary", f"no file {needed}: run "
                                   "notebooks/paper-fig2.ipynb first (`make figures` does)")
    try:
        if json.loads(path.read_text()).get("figure") != "paper-fig2":
            raise ValueError("not written by paper-fig2")
        with trajectories.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        runs = {}
        for row in rows:
            if row["panel"] in ROW1_PANELS:
                runs.setdefault((row["panel"], row["seed"]), []).append(
                    [float(row[k]) for k in ("epoch", "loss", "attention_distinct",
                                             "attention_class")])
        if {panel for panel, _ in runs} != set(ROW1_PANELS):
            raise KeyError(f"rows for {', '.join(ROW1_PANELS)}")
    except (ValueError, KeyError, TypeError) as err:
        raise P.ParameterError(
            "fig2_summary", f"{trajectories} is not paper-fig2's trajectories.csv with rows "
            f"for {', '.join(ROW1_PANELS)} ({type(err).__name__}: {err}); "
            "re-run notebooks/paper-fig2.ipynb") from None
    measured = {}
    for panel in ROW1_PANELS:
        mine = [np.array(t) for (name, _), t in sorted(runs.items()) if name == panel]
        values = [metrics.attention_at_loss(t, matched_loss) for t in mine]
        if any(v is None for v in values):
            lowest = max(float(t[:, 1].min()) for t in mine)
            raise P.ParameterError(
                "matched_loss", f"{matched_loss:g}: not every {panel} run of paper-fig2 "
                f"reached this held-out loss (all of them reached {lowest:.3g}); choose a "
                "larger matched_loss")
        values = np.array(values)
        measured[panel] = {"attention": float(values[:, 0].mean()),
                           "attention_std": float(values[:, 0].std()),
                           "class_attention": float(values[:, 1].mean()),
                           "seeds": len(values)}
    return measured


def rescaling_trajectories(p: dict, balanced: bool = False) -> dict[str, theory.Trajectory]:
    """The reduced dynamics of each parameterization at the same nominal rates, until the
    matched loss, with thresholds every tenth of a decade on the way.

    Factorized circuits start at ``w = init_scale^2``. With ``balanced=False`` the starts
    follow Fig. 2 row 1: FAFO's default-initialised W_Q, W_K are modelled by the offset
    ``default_init_rate`` (their ``a^2 + c^2`` along any direction at the start; random
    factors hold no product along V, so ``w`` starts at ``init_scale^2`` all the same).
    """
    thresholds = theory.loss_thresholds(1.0, p["matched_loss"], 10) if p["matched_loss"] < 1 \
        else [p["matched_loss"]]
    trajectories = {}
    for name in PARAMETERIZATIONS:
        circuit = None if balanced else DEFAULT_INIT_FACTORS.get(name)
        offsets = (p["default_init_rate"] if circuit == "ov" else 0.0,
                   p["default_init_rate"] if circuit == "qk" else 0.0)
        trajectories[name] = theory.integrate_until(
            p["setting"], p["eta_ov"], p["r"] * p["eta_ov"], p["matched_loss"], thresholds,
            parameterization=name, init_scale=p["init_scale"], offsets=offsets)
    return trajectories


def _ranks(values: dict[str, float]) -> dict[str, int]:
    order = sorted(values, key=values.get, reverse=True)
    return {name: order.index(name) + 1 for name in values}


def rescaling_rows(trajectories: dict[str, theory.Trajectory],
                   balanced: dict[str, theory.Trajectory], measured: dict) -> list[dict]:
    """Per parameterization: the prediction at the matched loss (starts as in Fig. 2, and all
    factors balanced) and the measured sharpness, with ranks (1 = sharpest)."""
    predicted = {name: float(tr.alpha[-1]) for name, tr in trajectories.items()}
    observed = {name: measured[name]["attention"] for name in trajectories}
    pred_rank, obs_rank = _ranks(predicted), _ranks(observed)
    rows = []
    for name, tr in trajectories.items():
        r_eff = tr.r_eff
        rows.append({
            "parameterization": name, "matched_loss": tr.target_loss,
            "tau_at_loss": float(tr.tau[-1]), "alpha_at_loss": predicted[name],
            "alpha_balanced_start": float(balanced[name].alpha[-1]),
            "r_eff_at_loss": float(r_eff[-1]), "r_eff_min": float(r_eff.min()),
            "r_eff_max": float(r_eff.max()), "predicted_rank": pred_rank[name],
            "measured_attention": observed[name],
            "measured_attention_std": measured[name]["attention_std"],
            "measured_class_attention": measured[name]["class_attention"],
            "measured_seeds": measured[name]["seeds"],
            "measured_rank": obs_rank[name],
        })
    return rows


RESCALING_COLUMNS = ("parameterization", "alpha_at_loss", "alpha_balanced_start",
                     "tau_at_loss", "r_eff_at_loss", "predicted_rank", "measured_attention",
                     "measured_attention_std", "measured_class_attention", "measured_rank")


def ordering_text(rows: list[dict]) -> str:
    """The predicted and the measured ordering of sharpness, and whether they agree."""
    def order(key):
        return " > ".join(row["parameterization"] for row in sorted(rows, key=lambda x: x[key]))

    predicted, measured = order("predicted_rank"), order("measured_rank")
    verdict = "the same" if predicted == measured else "different"
    lines = [f"predicted (reduced model):  {predicted}", f"measured (paper-fig2):      {measured}",
             f"orderings are {verdict}"]
    for a, b in itertools.combinations(rows, 2):  # is each swap beyond the seeds' noise?
        if (a["predicted_rank"] < b["predicted_rank"]) != (a["measured_rank"] < b["measured_rank"]):
            gap = abs(a["measured_attention"] - b["measured_attention"])
            # measured_attention_std has ddof 0: the standard error is std / sqrt(n - 1)
            se = math.sqrt(sum(x["measured_attention_std"] ** 2 / max(x["measured_seeds"] - 1, 1)
                               for x in (a, b)))
            where = "within" if gap <= 2 * se else "beyond"
            lines.append(f"{a['parameterization']} and {b['parameterization']} swap: measured "
                         f"gap {gap:.2g}, {where} two standard errors ({2 * se:.2g})")
    return "\n".join(lines)


def rescaling_curves(trajectories: dict[str, theory.Trajectory], points: int = 200):
    """The plotted points: r_eff and alpha against normalised time, per parameterization."""
    rows = []
    for name, tr in trajectories.items():
        tau = np.geomspace(max(tr.tau[1], tr.tau[-1] * 1e-6), tr.tau[-1], points)
        s = tr.sample(tau)
        r_eff = tr.r_eff_at(s["mu_ov"], s["mu_qk"])
        rows += [{"parameterization": name, "tau": float(tau[k]), "r_eff": float(r_eff[k]),
                  "mu_ov": float(s["mu_ov"][k]), "mu_qk": float(s["mu_qk"][k]),
                  "alpha": float(s["alpha"][k]), "loss": float(s["loss"][k])}
                 for k in range(points)]
    return rows


# --- theory-ratio-sweep ----------------------------------------------------------------------

SWEEP_PARAMETERS = (*SETTING_PARAMETERS, "ratios", "matched_loss", "step_fraction", "seeds",
                    "lr_ov", "T", "batches_per_epoch", "max_epochs", "eval_batches",
                    "variant_ratios", "variants", "workers", "progress", "artifacts_dir")
INITS = ("identity", "default")  # CACO from 1e-6 I (the theory's symmetric point) or nn.Linear's


@dataclass(frozen=True)
class SweepCondition:
    """One setting of the task sweep: sequence length, initialisation and OV rate."""

    T: int
    init: str
    lr_ov: float

    @property
    def label(self) -> str:
        init = "1e-6 I" if self.init == "identity" else "default init"
        return f"T = {self.T}, {init}, lr_ov = {self.lr_ov:g}"


def _variants(name: str, value) -> list[SweepCondition]:
    if not isinstance(value, (list, tuple)):
        raise P.ParameterError(name, f'expected a list of [T, init, lr_ov] triples, got '
                               f'{value!r}; with papermill: -y "{name}: [[128, identity, 0.1]]"')
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise P.ParameterError(name, f"item {i}: expected [T, init, lr_ov], got {item!r}")
        T, init, lr_ov = item
        if init not in INITS:
            raise P.ParameterError(name, f"item {i}: init must be one of {INITS}, got {init!r}")
        try:
            T = tasks.check_length(P.integer("T", T, 3))
            lr_ov = P.number("lr_ov", lr_ov, above=0)
        except P.ParameterError as err:  # name the list and the item, not just the field
            raise P.ParameterError(name, f"item {i}: {err}") from None
        out.append(SweepCondition(T, init, lr_ov))
    return out


def validate_sweep(p: dict) -> dict:
    model = _model(p)
    return {
        "model": model,
        "ratios": P.number_list("ratios", p["ratios"], above=0),
        "matched_loss": theory.check_loss_threshold("matched_loss", p["matched_loss"],
                                                    model.setting),
        "step_fraction": P.number("step_fraction", p["step_fraction"], above=0, below=0.1),
        "seeds": P.seed_list("seeds", p["seeds"]),
        "lr_ov": P.number("lr_ov", p["lr_ov"], above=0),
        "T": tasks.check_length(P.integer("T", p["T"], 3)),
        "batches_per_epoch": P.integer("batches_per_epoch", p["batches_per_epoch"], 1),
        "max_epochs": P.integer("max_epochs", p["max_epochs"], 1),
        "variant_ratios": P.number_list("variant_ratios", p["variant_ratios"], above=0),
        "variants": _variants("variants", p["variants"]),
        **P.run_options(p),
    }


SWEEP_COLUMNS = ("r", "alpha_closed_form", "alpha_stylized", "task_informative_mean",
                 "task_informative_std", "task_distinct_mean", "task_distinct_std",
                 "task_loss_mean", "task_runs_reaching_loss")


def main_condition(p: dict) -> SweepCondition:
    return SweepCondition(p["T"], "identity", p["lr_ov"])


def sweep_configs(p: dict, condition: SweepCondition | None = None,
                  ratios=None) -> list[train.RunConfig]:
    """CACO with QK rate r * lr_ov, stopped at the matched loss; by default the main sweep
    (from a small, 1e-6 I, start). A condition with a smaller OV rate gets proportionally
    more epochs, so that it can reach the same loss."""
    condition = condition or main_condition(p)
    spec = models.ModelSpec("CACO", qk_init=condition.init, ov_init=condition.init)
    epochs = round(p["max_epochs"] * max(1.0, p["lr_ov"] / condition.lr_ov))
    return [train.RunConfig(f"{condition.label}/r{r:g}/seed{seed}", spec, seed, epochs,
                            p["batches_per_epoch"], lr_qk=r * condition.lr_ov,
                            lr_ov=condition.lr_ov, T=condition.T,
                            early_stop_loss=p["matched_loss"])
            for r in (p["ratios"] if ratios is None else ratios) for seed in p["seeds"]]


def variant_configs(p: dict) -> list[train.RunConfig]:
    """The robustness sweep: every variant condition at every variant ratio."""
    return [c for v in p["variants"] for c in sweep_configs(p, v, p["variant_ratios"])]


@torch.no_grad()
def attention_on_informative(params, spec, batch: tasks.CountBatch) -> np.ndarray:
    """Per held-out sequence: attention on the tokens that identify the class (its distinct
    tokens and the query token, see :func:`qkov.metrics.attention_on_class_identifying`)."""
    _, attention = models.count_logits(params, batch.counts, batch.classes, spec.fixed_alpha)
    return metrics.attention_on_class_identifying(attention, batch.classes).numpy()


def closed_form_curve(setting: theory.Setting, loss: float, r_min: float, r_max: float,
                      points: int = 200) -> dict[str, np.ndarray]:
    """alpha at ``loss`` from the closed form, on a log grid of r."""
    r = np.geomspace(r_min, r_max, points)
    return {"r": r, "alpha": np.array([theory.state_at_loss(loss, setting, x)[2] for x in r])}


def _task_measures(runs: list[train.RunResult], eval_batches: int):
    """Per run: held-out attention on distinct and on class-identifying tokens, the held-out
    loss and the epochs trained."""
    distinct, informative, losses, epochs = [], [], [], []
    for x in runs:
        batch = metrics.held_out_batches(x.config.seed, x.config.T, eval_batches)
        ev = metrics.evaluate(x.params, x.config.model, batch)
        distinct.append(float(ev.attention.mean()))
        informative.append(float(attention_on_informative(x.params, x.config.model,
                                                          batch).mean()))
        losses.append(ev.loss)
        epochs.append(x.epochs_run)
    return distinct, informative, losses, epochs


VARIANT_COLUMNS = ("condition", "r", "distinct", "distinct_ci95", "informative",
                   "informative_ci95", "loss", "runs_reaching_loss", "epochs_mean")


def variant_rows(p: dict, main: list[train.RunResult],
                 variants: list[train.RunResult]) -> list[dict]:
    """Per condition (the main sweep first, at the variant ratios it ran) and ratio: mean
    attention on distinct and on class-identifying tokens +- the 95% interval over seeds."""
    rows = []
    for condition in [main_condition(p), *p["variants"]]:
        pool = main if condition == main_condition(p) else variants
        for r in p["variant_ratios"]:
            mine = [x for x in pool if x.config.name.startswith(f"{condition.label}/r{r:g}/")]
            if not mine:
                continue  # a variant ratio that the main sweep did not run
            distinct, informative, losses, epochs = _task_measures(mine, p["eval_batches"])
            d, d_ci = metrics.seed_interval(distinct)
            i, i_ci = metrics.seed_interval(informative)
            rows.append({"condition": condition.label, "T": condition.T, "init": condition.init,
                         "lr_ov": condition.lr_ov, "r": r, "distinct": d, "distinct_ci95": d_ci,
                         "informative": i, "informative_ci95": i_ci,
                         "loss": float(np.mean(losses)),
                         "runs_reaching_loss": sum(x.early_stopped for x in mine),
                         "epochs_mean": float(np.mean(epochs))})
    return rows


def sweep_rows(p: dict, results: list[train.RunResult]) -> list[dict]:
    """Per ratio: the closed form, the stylized model and training (mean, std over seeds)."""
    model, rows = p["model"], []
    stylized_runs = descents([dict(model=model, parameterization="CACO", eta_ov=1.0, eta_qk=r,
                                   target_loss=p["matched_loss"],
                                   step_fraction=p["step_fraction"]) for r in p["ratios"]],
                             p["workers"])
    for r, run in zip(p["ratios"], stylized_runs):
        _, _, alpha_closed = theory.state_at_loss(p["matched_loss"], model.setting, r)
        stylized = run.at_loss(p["matched_loss"])
        mine = [x for x in results if x.config.lr_qk == r * p["lr_ov"]]
        distinct, informative, losses, epochs = _task_measures(mine, p["eval_batches"])
        rows.append({
            "r": r, "matched_loss": p["matched_loss"], "alpha_closed_form": float(alpha_closed),
            "alpha_stylized": stylized["alpha"],
            "alpha_stylized_rel_error": stylized["alpha"] / float(alpha_closed) - 1,
            "task_distinct_mean": float(np.mean(distinct)),
            "task_distinct_std": float(np.std(distinct)),
            "task_informative_mean": float(np.mean(informative)),
            "task_informative_std": float(np.std(informative)),
            "task_loss_mean": float(np.mean(losses)),
            "task_runs_reaching_loss": sum(x.early_stopped for x in mine),
            "task_runs": len(mine),
            "task_epochs_mean": float(np.mean(epochs)),
        })
    return rows


def distinct_turning_points(rows: list[dict]) -> tuple[float, float | None]:
    """From the main sweep's rows: the ratio at which attention on distinct tokens peaks, and
    the smallest ratio above it at which that attention is below what uniform attention over
    the context would put on them (None if it never falls that low)."""
    peak = max(rows, key=lambda row: row["task_distinct_mean"])["r"]
    below = [row["r"] for row in rows if row["r"] > peak
             and row["task_distinct_mean"] < tasks.uniform_distinct_share()]
    return peak, (min(below) if below else None)
