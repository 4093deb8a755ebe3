"""Every figure reads at the book's width: each figure module's drawing, on small synthetic
inputs of the shapes its notebook passes (the panels, ratios and conditions of its
defaults), shows no text below ``qkov.plotting.MIN_TEXT_PT`` when its PNG is shown
``BOOK_WIDTH_PX`` wide and no two texts overlap; the saving path refuses a drawing that
does either, naming the text."""

import numpy as np
import pytest

from qkov import figures, plotting
from qkov.figures import (
    claims_ledger,
    fig2_controls,
    language_agreement,
    language_hatexplain,
    language_squad,
    language_sva,
    paper_fig2,
    paper_fig3,
    paper_fig4,
    real_agreement,
    real_sentiment,
    theory_ratio_sweep,
    theory_reduction,
    theory_rescaling,
    theory_shortcut,
)
from qkov.language import pipelines

RNG = np.random.default_rng(0)


def heatmap(total: float = 100.0) -> np.ndarray:
    """A 5x5 grid of percentages with the widest labels a cell gets ("100.0" is not one,
    but "12.3" and "0.0" are)."""
    grid = RNG.dirichlet(np.ones(25)).reshape(5, 5) * total
    grid[0, 0] = 0.0
    return grid


def fig2_summaries():
    def summary(panel):
        return paper_fig2.PanelSummary(panel, [heatmap(), heatmap()], [1e-3, 2e-3], [], [], [],
                                       [], [], [], [], [1, 2])
    return [summary(panel) for panel in paper_fig2.PANELS]


def fig2_curves():
    return [{"panel": panel.key, "loss": float(loss),
             **{f"{m}_{s}": (0.3 + 0.6 * k / 50 if s == "mean" else 0.02)
                for m in paper_fig2.TRAJECTORY_MEASURES for s in ("mean", "std", "ci95")}}
            for panel in paper_fig2.PANELS
            for k, loss in enumerate(paper_fig2.MATCHED_LOSS_LEVELS)]


def fig3_curves():
    epochs = np.arange(501)
    return [paper_fig3.FixedAttentionCurve(ov, alpha, seed, 3 * np.exp(-alpha * epochs / 50) + 1e-3,
                                           0.1 * np.sin(epochs / 30) * alpha)
            for ov in ("collapsed", "factorized") for alpha in (0.2, 0.4, 0.6, 0.8, 1.0)
            for seed in (1, 2)]


def reduction_curves():
    tau = np.geomspace(1, 1e5, 30)
    return [{"r": r, "source": source, "tau": float(t), "mu_ov": float(np.log(t)),
             "mu_qk": float(r * np.log(t)), "alpha": float(t / (1 + t)), "loss": float(1 / t)}
            for r in (0.1, 1, 10) for source in ("ODE", "full batch", "minibatch") for t in tau]


def rescaling_inputs():
    from types import SimpleNamespace

    from qkov.theory import reduced
    # theory_rescaling.Parameters would read paper-fig2's artifacts: its fields by hand
    p = SimpleNamespace(setting=reduced.Setting(m=5, n=50, b=50.0, M=20), eta_ov=1.0, r=1.0,
                        init_scale=1e-6, default_init_rate=0.667, matched_loss=0.02)
    trajectories = theory_rescaling.trajectories(p)
    rows = [{"parameterization": name, "matched_loss": 0.02, "alpha_at_loss": 0.2 + 0.2 * k,
             "measured_attention": 0.5, "measured_attention_ci95": 0.01}
            for k, name in enumerate(trajectories)]
    return trajectories, rows, theory_rescaling.curves(trajectories, points=50)


def ratio_sweep_inputs():
    ratios = [0.01, 0.1, 1, 10, 100]
    rows = [{"r": r, "matched_loss": 0.05, "alpha_stylized": 0.5, "task_distinct_mean": 0.4,
             "task_distinct_ci95": 0.01, "task_informative_mean": 0.6,
             "task_informative_ci95": 0.01} for r in ratios]
    curve = {"r": np.geomspace(0.01, 100, 20), "alpha": np.linspace(0.1, 0.9, 20)}
    variants = [{"condition": f"T = {T}, 1e-6 I, lr_ov = 0.1", "r": r, "distinct": 0.4,
                 "distinct_ci95": 0.01, "informative": 0.6, "informative_ci95": 0.01}
                for T in (32, 64, 128) for r in ratios]
    seeds = {(row["condition"], row["r"]): {"distinct": [0.3, 0.5], "informative": [0.5, 0.7]}
             for row in variants}
    return rows, curve, variants, seeds


def shortcut_inputs():
    """theory-shortcut's parameters and one record per run of its default settings."""
    p = theory_shortcut.Parameters(progress=False)
    runs = [{"experiment": s.experiment, "T": s.T, "cut": s.cut, "lr_ov": s.lr_ov,
             "init_scale": s.init_scale, "batch_size": s.batch_size, "r": r, "seed": seed,
             "distinct": float(RNG.uniform(0, 1)), "class_identifying": 0.5, "target": 0.0,
             "query_token": 0.1, "other_queries": 0.1, "loss": 0.05, "epochs": 10,
             "reached": True}
            for s in theory_shortcut.settings(p) for r in s.ratios for seed in p.seeds]
    return p, runs


def controls_inputs():
    """fig2-controls' parameters (without reading paper-fig2) and trajectories of its panels."""
    from types import SimpleNamespace

    p = SimpleNamespace(qk_rates=[0.02, 0.03, 0.04, 0.1], matched_losses=[1.0, 0.3, 0.1])
    loss = np.geomspace(3.0, 1e-3, 40)
    path = np.column_stack([np.arange(40), loss, 0.35 + 0.5 * np.linspace(0, 1, 40),
                            np.zeros((40, 6))])
    panels = {*(k for group in fig2_controls.GROUPS for k, _, _ in group),
              *(fig2_controls.sweep_key(r) for r in p.qk_rates)}
    runs = fig2_controls.Runs({k: [path, path] for k in panels}, {}, {})
    return p, runs


def ledger_rows():
    return [{"id": claim.id, "source": claim.source, "verdict": claim.expected}
            for claim in claims_ledger.CLAIMS]


def agreement_inputs():
    conditions = list(language_agreement.CONDITIONS)
    records = [{"condition": c, "seed": s, "attractors": a, "accuracy": 1.0 - 0.01 * a,
                "attention_rollout": 0.3, "comprehensiveness": 0.2, "sufficiency": 0.05}
               for c in conditions for s in (1, 2) for a in range(4)]
    results = [{"condition": c, "seed": s, "accuracy_by_epoch": np.full((20, 4), 0.9),
                "nearest_by_epoch": np.full((20, 2), 0.8)}
               for c in conditions for s in (1, 2)]
    return records, {c: heatmap() for c in conditions}, results


def real_agreement_inputs():
    conditions = real_agreement.Parameters().conditions
    records = [{"condition": c, "seed": s, "attractors": a, "accuracy": 0.9 - 0.15 * a,
                "attention_rollout": 0.3, "comprehensiveness": 0.1, "sufficiency": 0.05}
               for c in conditions for s in (1, 2) for a in range(4)]
    results = [{"condition": c, "seed": s, "accuracy_by_epoch": np.full((4, 2), 0.8)}
               for c in conditions for s in (1, 2)]
    return records, {c: heatmap() for c in conditions}, results


def real_sentiment_inputs():
    conditions = real_sentiment.Parameters().conditions
    records = [{"condition": c, "seed": s, **{m: 0.4 + 0.1 * s for m in real_sentiment.MEASURES}}
               for c in conditions for s in (1, 2)]
    return records, {c: heatmap() for c in conditions}, {"majority": 0.44, "uniform": 0.12}


def classifier_inputs(keys):
    rows = [{"condition": c, "seed": s, **{k: 0.5 + 0.1 * s for k in keys}}
            for c in pipelines.CONDITIONS for s in (1, 2, 3)]
    return rows, {c: heatmap() for c in pipelines.CONDITIONS}


CLASSIFIER = ["accuracy", "attention_rollout", "attention_layer_mean", "attention_layer_max",
              "comprehensiveness", "sufficiency"]
SQUAD = ["f1", "exact_match", "attention_rollout", "attention_layer_mean", "attention_layer_max"]

DRAWINGS = {
    "paper-fig2": lambda: paper_fig2.plot_heatmaps(fig2_summaries(), "mean"),
    "paper-fig2-std": lambda: paper_fig2.plot_heatmaps(fig2_summaries(), "std"),
    "paper-fig2-trajectories": lambda: paper_fig2.plot_trajectories(
        fig2_curves(), [panel.key for panel in paper_fig2.PANELS], 0.35),
    "paper-fig3": lambda: paper_fig3.plot(fig3_curves()),
    "paper-fig4": lambda: paper_fig4.plot(paper_fig4.trajectories(paper_fig4.Parameters()),
                                          paper_fig4.Parameters().thresholds),
    "theory-reduction": lambda: theory_reduction.plot(reduction_curves()),
    "theory-rescaling": lambda: theory_rescaling.plot(*rescaling_inputs()),
    "theory-ratio-sweep": lambda: theory_ratio_sweep.plot(*ratio_sweep_inputs()),
    "theory-shortcut": lambda: theory_shortcut.plot(*shortcut_inputs()),
    "theory-shortcut-sensitivity": lambda: theory_shortcut.plot_sensitivity(*shortcut_inputs()),
    "fig2-controls": lambda: fig2_controls.plot(*controls_inputs()),
    "claims-ledger": lambda: claims_ledger.plot(ledger_rows()),
    "language-agreement": lambda: language_agreement.plot(*agreement_inputs()),
    "language-agreement-rare": lambda: language_agreement.plot_rare(agreement_inputs()[0]),
    "real-agreement": lambda: real_agreement.plot(*real_agreement_inputs()),
    "real-sentiment": lambda: real_sentiment.plot(*real_sentiment_inputs()),
    "language-hatexplain": lambda: language_hatexplain.plot(
        pipelines.Results(*classifier_inputs(CLASSIFIER), runs=[])),
    "language-sva": lambda: language_sva.plot(
        pipelines.Results(*classifier_inputs(CLASSIFIER), runs=[])),
    "language-squad": lambda: language_squad.plot(
        language_squad.Results(*classifier_inputs(SQUAD), predictions=[])),
    "model-schematic": lambda: figures.module("model-schematic").plot(
        figures.module("model-schematic").rows()),
}


@pytest.mark.parametrize("label", DRAWINGS)
def test_every_figure_reads_at_the_books_width(label):
    # the measure does not depend on the dpi (test_the_measure_scales_...): a small PNG
    rendered = plotting.render(DRAWINGS[label](), dpi=72)
    assert rendered.sizes, label
    assert plotting.check_text_size(label, rendered.sizes) >= plotting.MIN_TEXT_PT
    assert rendered.overlaps == []


def test_every_drawing_of_every_spec_is_drawn_here():
    assert {spec.label(d) for spec in figures.specs().values() for d in spec.drawings} == \
        set(DRAWINGS)


def test_a_figure_with_small_text_is_refused_naming_the_text(tmp_path):
    with plotting.house_style():
        fig = plotting.new_figure(figsize=(7, 3))
        ax = fig.subplots()
        ax.plot([0, 1], [0, 1])
        ax.set_title("a readable title")
        ax.text(0.5, 0.5, "tiny cell label", fontsize=5)
    with pytest.raises(ValueError, match=r"^tiny-fig/figure: the text 'tiny cell label' shows "
                                         r"at 5\.\d pt .* below the minimum of 9 pt"):
        plotting.save_figure(fig, tmp_path / "tiny-fig")
    assert not (tmp_path / "tiny-fig").exists() or not any((tmp_path / "tiny-fig").iterdir())


def test_the_measure_scales_with_the_width_the_book_shows():
    with plotting.house_style():
        narrow = plotting.new_figure(figsize=(7, 3))
        narrow.subplots().set_title("title", fontsize=10)
        wide = plotting.new_figure(figsize=(14, 3))
        wide.subplots().set_title("title", fontsize=10)
    for dpi in (100, 200):
        png, sizes = plotting.render_png(narrow, dpi)
        title = dict(sizes)["title"]
        # 10 points in a PNG of width W at dpi, shown 672 px wide, in CSS points
        assert title == pytest.approx(10 * dpi / 72 * 672 / plotting.png_width(png) * 72 / 96)
        assert 9 < title < 11  # a 7-inch figure shows its fonts at about their size
    _, sizes = plotting.render_png(wide)
    assert dict(sizes)["title"] < 5.5  # twice as wide: half the size
    with pytest.raises(ValueError, match="wide/figure: the text"):
        plotting.check_text_size("wide/figure", sizes)


def test_text_an_axis_turned_off_does_not_draw_is_not_measured():
    with plotting.house_style():
        fig = plotting.new_figure(figsize=(7, 3))
        ax = fig.subplots()
        ax.tick_params(labelsize=4)
        ax.axis("off")
        ax.set_title("shown")
    assert [text for text, _ in plotting.render_png(fig)[1]] == ["shown"]


def test_overlapping_texts_are_refused_naming_them(tmp_path):
    with plotting.house_style():
        fig = plotting.new_figure(figsize=(6, 3))
        left, right = fig.subplots(1, 2)
        left.set_title("a title far too long for its panel, running on")
        right.set_title("the next title")
        right.set_ylabel("y")
    rendered = plotting.render(fig, dpi=72)
    assert ("a title far too long for its panel, running on", "the next title") in \
        rendered.overlaps or ("the next title", "a title far too long for its panel, "
                              "running on") in rendered.overlaps
    with pytest.raises(ValueError, match="^crowded/figure: .*pairs of texts overlap: .*"
                                         "'the next title'"):
        plotting.save_figure(fig, tmp_path / "crowded")
    right.set_title("", loc="left")  # the house style's titles are on the left
    assert plotting.render(fig, dpi=72).overlaps == []
