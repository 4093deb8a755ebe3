"""language-agreement: faster query-key learning on a synthetic subject-verb agreement task
(the companion's own language experiment, in the spirit of the paper's section 5).

A one-layer decoder reads a sentence prefix from :mod:`qkov.language.agreement` and predicts
the number of the verb at the first pad position. Each seed trains two models from the same
initialisation and batch order: *matched* (every parameter at the base learning rate) and
*faster QK* (W_Q, W_K and the embeddings at ``qk_multiplier`` times it, as the paper's
faster-QK runs). Both are measured on held-out sets with a fixed number of modifiers and
0, 1, ... attractors: accuracy, attention on the subject from the readout position
(rollout, layer mean, layer max), ERASER comprehensiveness and sufficiency at the top
``eraser_fraction`` of tokens by attention, and the attention-vs-probability heatmap.

:class:`Parameters` are the notebook's; :func:`train` runs every (condition, seed);
:func:`rows` are the stored records, :func:`summary_table` / :func:`attractor_table` the
printed tables, :func:`plot` the figure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.ticker import MaxNLocator

from ..language import agreement
from ..language.metrics import (ATTENTION_METHODS, accuracy, attention_probability_heatmap,
                                comprehensiveness, rationale_attention_mass, sufficiency)
from ..language.models import Decoder, DecoderConfig
from ..language.train import TrainingSetup, train_classifier
from ..params import (FigureParameters, ParameterError, boolean, integer, number, optional_path,
                      parameter, seed_list)
from ..plotting import house_style, new_figure
from ..processes import map_in_processes
from ..seeding import derived_seed, init_generator
from ..synthetic.metrics import interval_text, seed_interval

CONDITIONS = ("matched", "faster QK")
HEATMAP_BINS = 5


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: a run of about two minutes on two CPU cores)."""

    seeds: list = parameter([1234, 1235, 1236, 1237, 1238], seed_list)
    train_sentences: int = parameter(2000, integer, minimum=1)  # training sentences per seed
    test_sentences: int = parameter(500, integer, minimum=1)  # held-out, per attractor count
    max_modifiers: int = parameter(3, integer, minimum=1)  # PPs / relative clauses per sentence
    n_layers: int = parameter(1, integer, minimum=1)  # decoder layers
    d_model: int = parameter(32, integer, minimum=1)  # residual width
    n_heads: int = parameter(2, integer, minimum=1)  # attention heads (d_head = d_model / n_heads)
    epochs: int = parameter(20, integer, minimum=1)
    batch_size: int = parameter(64, integer, minimum=1)
    lr: float = parameter(1e-3, number, above=0)  # AdamW base learning rate
    qk_multiplier: float = parameter(30.0, number, above=0)  # faster QK: W_Q, W_K, embeddings
    eraser_fraction: float = parameter(0.05, number, above=0)  # top share of tokens (>= 1)
    workers: int = parameter(2, integer, minimum=1)  # training processes
    artifacts_dir: str | None = parameter(None, optional_path)

    def check(self):
        if self.eraser_fraction > 1:
            raise ParameterError("eraser_fraction", f"expected a share in (0, 1], got "
                                 f"{self.eraser_fraction:g}")
        if self.d_model % self.n_heads:
            raise ParameterError("n_heads", f"expected a divisor of d_model={self.d_model}, "
                                 f"got {self.n_heads}")


def model_config(p: Parameters) -> DecoderConfig:
    """One layer, attention output only (no MLP), residual, no LayerNorm: the paper's
    agreement model, smaller."""
    return DecoderConfig(vocab_size=len(agreement.VOCABULARY),
                         max_len=agreement.width(p.max_modifiers), n_layers=p.n_layers,
                         d_model=p.d_model,
                         n_heads=p.n_heads, d_head=p.d_model // p.n_heads, d_mlp=0,
                         n_classes=2, pad_id=agreement.VOCABULARY.pad_id)


def setup(p: Parameters, condition: str, seed: int) -> TrainingSetup:
    multiplier = p.qk_multiplier if condition == "faster QK" else 1.0
    return TrainingSetup(optimizer="adamw", lr=p.lr, qk_multiplier=multiplier,
                         embedding_multiplier=multiplier, epochs=p.epochs,
                         batch_size=p.batch_size, schedule="cosine", warmup_fraction=0.1,
                         grad_clip=1.0, seed=seed)


def test_sets(p: Parameters, seed: int) -> dict[int, agreement.AgreementData]:
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
        # The top tokens by the readout's attention (layer mean over heads), as the paper.
        rows = torch.arange(len(data))
        scores = torch.stack([a.mean(1)[rows, readout] for a in out.attentions]).mean(0)
        args = (predict_proba, data.tokens, data.attention_mask, data.labels, scores, fraction,
                agreement.VOCABULARY.pad_id)
        return {"accuracy": accuracy(out.logits, data.labels),
                "probability": probability.numpy(), "attention": attention,
                "comprehensiveness": comprehensiveness(*args).numpy(),
                "sufficiency": sufficiency(*args).numpy()}


def train_one(p: Parameters, condition: str, seed: int) -> dict:
    """Train one model and measure it on every held-out set."""
    data = agreement.generate(p.train_sentences, derived_seed(seed, "data"),
                              modifiers=(0, p.max_modifiers))
    model = Decoder(model_config(p), generator=init_generator(seed))
    tests = test_sets(p, seed)

    def accuracies(model):  # after every epoch, on each held-out set
        return [accuracy(model(t.tokens, t.attention_mask).logits, t.labels)
                for t in tests.values()]

    history = train_classifier(model, data, setup(p, condition, seed), device="cpu",
                               eval_fn=accuracies, progress=False)
    return {"condition": condition, "seed": seed, "loss": history.loss,
            "accuracy_by_epoch": np.array(history.eval),  # [epochs, attractor counts]
            "evaluation": {a: evaluate(model, test, p.eraser_fraction)
                           for a, test in tests.items()}}


def train(p: Parameters) -> list[dict]:
    """Every (condition, seed), spread over ``workers`` processes (a run's result does not
    depend on where it ran)."""
    jobs = [(p, condition, seed) for condition in CONDITIONS for seed in p.seeds]
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


def _over_seeds(records, condition, measure, attractors=None):
    values = {}
    for r in records:
        if r["condition"] == condition and (attractors is None or r["attractors"] == attractors):
            values.setdefault(r["seed"], []).append(r[measure])
    return seed_interval([np.mean(v) for v in values.values()])


SUMMARY_COLUMNS = ("condition", "accuracy", "attention_rollout", "attention_layer_mean",
                   "attention_layer_max", "comprehensiveness", "sufficiency")


def summary_table(records) -> list[dict]:
    """Per condition, every held-out set together: mean over seeds ± 95% interval."""
    return [{"condition": c, **{m: interval_text(*_over_seeds(records, c, m))
                                for m in SUMMARY_COLUMNS[1:]}} for c in CONDITIONS]


ATTRACTOR_COLUMNS = ("attractors", "acc_matched", "acc_faster_qk", "attn_matched",
                     "attn_faster_qk", "attn_gap")


def attractor_table(records) -> list[dict]:
    """Per attractor count: accuracy and rollout attention on the subject for both
    conditions, and the attention gap (faster QK - matched; its interval over seeds from
    the paired per-seed differences)."""
    table = []
    for a in sorted({r["attractors"] for r in records}):
        pick = {(r["condition"], r["seed"]): r for r in records if r["attractors"] == a}
        seeds = sorted({s for _, s in pick})
        gap = [pick["faster QK", s]["attention_rollout"] - pick["matched", s]["attention_rollout"]
               for s in seeds]
        table.append({"attractors": a,
                      "acc_matched": interval_text(*_over_seeds(records, "matched", "accuracy", a)),
                      "acc_faster_qk": interval_text(*_over_seeds(records, "faster QK", "accuracy", a)),
                      "attn_matched": interval_text(*_over_seeds(records, "matched",
                                                                  "attention_rollout", a)),
                      "attn_faster_qk": interval_text(*_over_seeds(records, "faster QK",
                                                                    "attention_rollout", a)),
                      "attn_gap": interval_text(*seed_interval(gap))})
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
    for c in CONDITIONS:
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

COLORS = {"matched": "#440154", "faster QK": "#35b779"}


def plot(records, maps, results):
    """Top: accuracy, rollout attention on the subject, and comprehensiveness /
    sufficiency against the number of attractors (mean over seeds, bars: 95% interval).
    Bottom: the two attention-vs-probability heatmaps, and held-out accuracy after each
    epoch with no attractor and with the most (mean over seeds)."""
    attractors = sorted({r["attractors"] for r in records})
    with house_style():
        fig = new_figure(figsize=(13, 7.6))
        grid = fig.add_gridspec(2, 3)
        axes = [fig.add_subplot(grid[0, k]) for k in range(3)]
        for c in CONDITIONS:
            for ax, measure, style in ((axes[0], "accuracy", "-"),
                                       (axes[1], "attention_rollout", "-"),
                                       (axes[2], "comprehensiveness", "-"),
                                       (axes[2], "sufficiency", "--")):
                stats = [_over_seeds(records, c, measure, a) for a in attractors]
                label = None if measure == "sufficiency" else c
                ax.errorbar(attractors, [s[0] for s in stats], yerr=[s[1] for s in stats],
                            color=COLORS[c], linestyle=style, marker="o", capsize=3, label=label)
        titles = ("(a) held-out accuracy", "(b) attention on the subject (rollout)",
                  "(c) comprehensiveness (solid), sufficiency (dashed)")
        for ax, title in zip(axes, titles):
            ax.set_xlabel("attractors in the sentence")
            ax.set_xticks(attractors)
            ax.set_title(title)
        axes[0].set_ylim(0.45, 1.02)  # chance is 0.5
        axes[1].set_ylim(0, 1.02)
        axes[0].legend()
        edges = np.linspace(0, 1, HEATMAP_BINS + 1)
        for k, c in enumerate(CONDITIONS):
            ax = fig.add_subplot(grid[1, k])
            image = ax.imshow(maps[c], origin="lower", extent=(0, 1, 0, 1), cmap="viridis",
                              vmin=0, vmax=100, aspect="auto")
            for i in range(HEATMAP_BINS):
                for j in range(HEATMAP_BINS):
                    ax.text((edges[j] + edges[j + 1]) / 2, (edges[i] + edges[i + 1]) / 2,
                            f"{maps[c][i, j]:.0f}", ha="center", va="center", fontsize=8,
                            color="white" if maps[c][i, j] < 50 else "black")
            ax.set_xlabel("attention on the subject (rollout)")
            ax.set_ylabel("probability of the true number")
            ax.set_title(f"({'de'[k]}) {c}: % of held-out sentences")
        fig.colorbar(image, ax=ax, fraction=0.046)
        ax = fig.add_subplot(grid[1, 2])
        for c in CONDITIONS:
            curves = np.array([run["accuracy_by_epoch"] for run in results
                               if run["condition"] == c])  # [seeds, epochs, attractor counts]
            epochs = np.arange(1, curves.shape[1] + 1)
            for k, style in ((0, ":"), (curves.shape[2] - 1, "-")):
                ax.plot(epochs, curves[:, :, k].mean(0), color=COLORS[c], linestyle=style,
                        marker="o", markersize=3, label=f"{c}, {attractors[k]} attractors")
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_title("(f) held-out accuracy during training")
        ax.legend(fontsize=8)
    return fig
