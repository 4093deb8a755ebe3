"""The claims ledger's logic: its rows are well formed, and a verdict follows the numbers it
is computed from (planted results flip it); a missing figure is named."""

import pytest

from qkov import figures
from qkov.figures import claims_ledger as L


def test_rows_are_unique_and_name_known_figures_and_verdicts():
    ids = [claim.id for claim in L.CLAIMS]
    assert len(ids) == len(set(ids))
    known = figures.specs()
    for claim in L.CLAIMS:
        assert claim.figure in known, claim.id
        assert claim.expected in L.VERDICTS, claim.id
        assert claim.source in ("paper", "companion"), claim.id
        assert claim.claim.strip() and claim.scope.strip() and claim.decided_by.strip(), claim.id
    # every verdict's rule is stated once, for the ledger page
    assert set(L.VERDICT_RULES) == set(L.VERDICTS)
    # "reproduced" is kept for results of the paper and checks against the authors' numbers
    for claim in L.CLAIMS:
        if claim.expected == L.REPRODUCED and claim.source == "companion":
            assert "authors" in claim.claim, claim.id


class Planted(L.Results):
    """Results from tables given in the test."""

    def __init__(self, tables):
        super().__init__("/nonexistent")
        self.tables = tables

    def table(self, name):
        return self.tables[name]


def fig4(alphas_by_r):
    return {"paper-fig4/data.csv": [
        {"r": r, "loss": loss, "tau": 1.0 / r, "alpha": alpha}
        for r, alphas in alphas_by_r.items() for loss, alpha in zip((1.0, 0.01), alphas)]}


def test_a_verdict_follows_the_numbers():
    rising = fig4({0.1: (0.1, 0.2), 1.0: (0.2, 0.4), 10.0: (0.3, 0.8)})
    assert L.fig4_ordering(Planted(rising)).verdict == L.REPRODUCED
    broken = fig4({0.1: (0.1, 0.2), 1.0: (0.2, 0.9), 10.0: (0.3, 0.8)})
    assert L.fig4_ordering(Planted(broken)).verdict == L.NOT_SUPPORTED

    def lines(rises, takeover):
        """The masked line at T = 64 and the paper's task at every length; ``takeover``: the
        ratio from which each length's line lies below uniform ("": never)."""
        cut = {"rises_with_r": "rises at every step" if rises else "falls at r = 10",
               "lowest_r": "0.4", "highest_r": "0.9", "runs": 45.0,
               "runs_reaching_loss": 45.0, "runs_at_loss": "45/45"}
        paper = {**cut, "rises_with_r": "falls at r = 10"}
        return {"theory-shortcut/lines.csv": [
            {"T": 64.0, "cut": "self", "task": "masked", "rises": rises, **cut},
            *({"T": T, "cut": "none", "task": "paper", "rises": False, **paper,
               "below_uniform_r": "" if r is None else r} for T, r in takeover.items())]}

    stated = L.TAKEOVER_FROM
    assert L.shortcut_causal(Planted(lines(True, stated))).verdict == L.SCOPED
    assert L.shortcut_causal(Planted(lines(False, stated))).verdict == L.NOT_SUPPORTED
    assert L.shortcut_takeover(Planted(lines(True, stated))).verdict == L.SCOPED
    # the shortcut takes over at another ratio than the scope states
    moved = {**stated, 64.0: 30.0}
    assert L.shortcut_takeover(Planted(lines(True, moved))).verdict == L.NOT_SUPPORTED

    def controls(verdicts):
        return {"fig2-controls/data.csv": [
            {"panel": panel, "loss": 0.1, "verdict": v}
            for panel, v in zip(("FAFO-qk20x", "FAFO-ramp40x", "CACO-qk5x", "CACO-ramp10x"),
                                verdicts)]}

    # sharper at every loss both reach: as the paper states it, whatever the scope's limits
    assert L.fig2_faster_qk(Planted(controls(["sharper"] * 4))).verdict == L.REPRODUCED
    assert L.fig2_faster_qk(Planted(controls(["tie", "blunter", "tie", "tie"]))
                            ).verdict == L.NOT_SUPPORTED


def test_a_missing_figure_is_named():
    with pytest.raises(FileNotFoundError, match="run the figure paper-fig4 first"):
        L.Results("/nonexistent").table("paper-fig4/data.csv")


def test_the_verdict_rules_of_the_figures():
    from qkov.figures import fig2_controls, theory_shortcut

    def point(r, values):
        return {"r": r, "seeds": [1, 2, 3], "values": values, "mean": sum(values) / 3,
                "ci95": 0.01}

    rising = [point(1, [0.4, 0.41, 0.42]), point(10, [0.5, 0.52, 0.51]),
              point(100, [0.9, 0.91, 0.92])]
    assert theory_shortcut.rises(rising)["rises"]
    falling = [*rising[:2], point(100, [0.1, 0.11, 0.12])]
    assert theory_shortcut.rises(falling) == {"verdict": "falls at r = 100", "rises": False,
                                              "first_failure": 100}
    assert theory_shortcut.rises(rising[:1])["verdict"] == "not testable"
    # below uniform attention from a ratio on: only if every larger ratio stays below
    assert theory_shortcut.below_uniform_from(falling, 0.35) == 100
    dip = [point(1, [0.2, 0.2, 0.2]), point(10, [0.5, 0.5, 0.5]), point(100, [0.1, 0.1, 0.1])]
    assert theory_shortcut.below_uniform_from(dip, 0.35) == 100
    assert theory_shortcut.below_uniform_from(rising, 0.35) is None
    # a row-2 panel against its control: sharper beyond the margin, a tie within it
    assert fig2_controls.compare([0.6, 0.61, 0.62], [0.35, 0.35, 0.35])["verdict"] == "sharper"
    assert fig2_controls.compare([0.35001, 0.35002, 0.35001],
                                 [0.35, 0.35, 0.35])["verdict"] == "tie"
    assert fig2_controls.compare(None, [0.35])["verdict"] == "not reached"


def real_agreement(verdict="sharper", no_cost="no worse than the margin", reached=True,
                   figure="real-agreement", bins="attractors", qk_rate=3e-3):
    """real-agreement's tables (or real-sentiment's, ``figure`` and its ``bins`` column) as
    the figure writes them (the CSV's True/False read back)."""
    shared = {"condition": "faster QK", "rate": 1e-4, "chosen": True, "reached": reached}
    numbers = {"attention_gap": 0.08, "attention_gap_ci95": 0.05, "attention_verdict": verdict}
    return {
        f"{figure}/matched-loss.csv": [
            {**shared, "reached": True, "loss": 0.5, **numbers, "attention_verdict": "not resolved"},
            {**shared, "loss": 0.4, **(numbers if reached else {})},
            {**shared, "rate": 3e-4, "chosen": False, "loss": 0.4, **numbers,
             "attention_verdict": "blunter"}],
        f"{figure}/test.csv": [
            {"condition": "matched", "rate": 3e-3, "chosen": True, bins: "all",
             "qk_rate": 3e-3, "ov_rate": 3e-3},
            {"condition": "faster QK", "rate": 1e-4, "chosen": True, bins: "all",
             "qk_rate": qk_rate, "ov_rate": 1e-4,
             "accuracy_gap": 0.01, "accuracy_gap_low": 0.002, "accuracy_gap_high": 0.018,
             "no_cost": no_cost},
            {"condition": "faster QK", "rate": 1e-4, "chosen": True, bins: "0",
             "accuracy_gap": -0.5, "accuracy_gap_low": -0.6, "accuracy_gap_high": -0.4,
             "no_cost": "worse by more than the margin"}]}


def test_the_real_agreement_row_reads_the_lowest_shared_loss_and_the_no_cost_test():
    found = L.real_agreement(Planted(real_agreement()))
    assert found.verdict == L.SCOPED and "validation loss 0.4" in found.text
    for planted in (real_agreement(verdict="not resolved"), real_agreement(no_cost="not resolved")):
        assert L.real_agreement(Planted(planted)).verdict == L.NOT_RESOLVED
    for planted in (real_agreement(verdict="blunter"),
                    real_agreement(no_cost="worse by more than the margin")):
        assert L.real_agreement(Planted(planted)).verdict == L.NOT_SUPPORTED
    # at 0.4 not every run reached the loss: the row reads 0.5, where the gap is not resolved
    found = L.real_agreement(Planted(real_agreement(reached=False)))
    assert found.verdict == L.NOT_RESOLVED and "validation loss 0.5" in found.text


def test_ratio_not_rate_needs_the_chosen_runs_to_share_their_qk_rate():
    assert L.ratio_not_rate(Planted(real_agreement())).verdict == L.SCOPED
    assert L.ratio_not_rate(Planted(real_agreement(verdict="not resolved"))).verdict \
        == L.NOT_RESOLVED
    assert L.ratio_not_rate(Planted(real_agreement(verdict="blunter"))).verdict \
        == L.NOT_SUPPORTED
    # a faster QK rate as well as a slower OV: the sweep cannot tell the two apart
    found = L.ratio_not_rate(Planted(real_agreement(qk_rate=9e-3)))
    assert found.verdict == L.NOT_RESOLVED and "cannot tell" in found.text


def test_the_real_sentiment_row_reads_its_own_tables_the_same_way():
    planted = real_agreement(figure="real-sentiment", bins="class")
    assert L.real_sentiment(Planted(planted)).verdict == L.SCOPED
    planted = real_agreement(verdict="blunter", figure="real-sentiment", bins="class")
    assert L.real_sentiment(Planted(planted)).verdict == L.NOT_SUPPORTED


def real_sentiment_against(auprc=(0.02, -0.01, 0.05, "not resolved"),
                           attention=(0.18, 0.12, 0.24, "higher"), all_faster_qk_rate=2e-2):
    """real-sentiment's test.csv (the chosen rates) and against.csv, as the figure writes
    them; each measure (mean, low, high, reading) of faster QK minus all faster."""
    def row(measure, numbers):
        mean, low, high, reading = numbers
        return {"condition": "faster QK", "against": "all faster", "measure": measure,
                "mean": mean, "low": low, "high": high, "reading": reading}

    return {
        "real-sentiment/test.csv": [
            {"condition": "faster QK", "rate": 1e-3, "chosen": True, "class": "all",
             "qk_rate": 2e-2, "ov_rate": 1e-3},
            {"condition": "faster QK", "rate": 1e-2, "chosen": False, "class": "all",
             "qk_rate": 0.2, "ov_rate": 1e-2},
            {"condition": "all faster", "rate": 1e-3, "chosen": True, "class": "all",
             "qk_rate": all_faster_qk_rate, "ov_rate": all_faster_qk_rate},
            # a class's row of the same run: the rule reads the "all" row only
            {"condition": "all faster", "rate": 1e-3, "chosen": True, "class": "negative",
             "qk_rate": 5.0, "ov_rate": 5.0}],
        "real-sentiment/against.csv": [
            {"condition": "matched", "against": "all faster", "measure": "auprc", "mean": 0.5,
             "low": 0.4, "high": 0.6, "reading": "higher"},
            row("auprc", auprc), row("attention", attention)]}


def test_plausibility_against_all_faster_needs_an_interval_above_zero():
    found = L.real_sentiment_plausibility(Planted(real_sentiment_against()))
    # matched's row (higher) is not faster QK's
    assert found.verdict == L.NOT_RESOLVED and "not resolved" in found.text
    planted = real_sentiment_against(auprc=(0.05, 0.01, 0.09, "higher"))
    assert L.real_sentiment_plausibility(Planted(planted)).verdict == L.SCOPED
    planted = real_sentiment_against(auprc=(-0.05, -0.09, -0.01, "lower"))
    assert L.real_sentiment_plausibility(Planted(planted)).verdict == L.NOT_SUPPORTED


def test_real_agreement_against_all_faster_reads_its_own_attention_row():
    def planted(reading):
        return Planted({"real-agreement/against.csv": [
            {"condition": "faster QK", "against": "last-noun heuristic",
             "measure": "accuracy with attractors", "mean": 0.2, "low": 0.1, "high": 0.3,
             "reading": "above it"},
            {"condition": "faster QK", "against": "all faster", "measure": "attention",
             "mean": 0.1, "low": 0.05, "high": 0.15, "reading": reading}]})

    assert L.real_agreement_vs_all_faster(planted("higher")).verdict == L.SCOPED
    found = L.real_agreement_vs_all_faster(planted("not resolved"))
    assert found.verdict == L.NOT_RESOLVED and "addresses: not resolved" in found.text
    assert L.real_agreement_vs_all_faster(planted("lower")).verdict == L.NOT_SUPPORTED


def test_real_sentiment_ratio_not_rate_compares_faster_qk_with_all_faster_at_one_qk_rate():
    found = L.real_sentiment_ratio_not_rate(Planted(real_sentiment_against()))
    assert found.verdict == L.SCOPED and "0.180 [0.120, 0.240]" in found.text
    planted = real_sentiment_against(attention=(0.01, -0.02, 0.04, "not resolved"))
    assert L.real_sentiment_ratio_not_rate(Planted(planted)).verdict == L.NOT_RESOLVED
    # all faster chosen at another rate: its QK rate differs, the sweep cannot tell
    found = L.real_sentiment_ratio_not_rate(Planted(real_sentiment_against(
        all_faster_qk_rate=6e-2)))
    assert found.verdict == L.NOT_RESOLVED and "cannot tell" in found.text


def test_accuracy_at_the_matched_loss_is_read_against_the_margin_at_the_lowest_shared_loss():
    def planted(gap, half, reached=True, figure="real-agreement"):
        tables = real_agreement(reached=reached, figure=figure)
        for row in tables[f"{figure}/matched-loss.csv"]:
            row.update(accuracy_gap=gap if row["loss"] == 0.4 else 0.5, accuracy_gap_ci95=half)
        return Planted(tables)

    # the row at 0.4 decides, not the one at 0.5
    assert L.real_agreement_accuracy(planted(0.007, 0.007)).verdict == L.SCOPED
    found = L.real_agreement_accuracy(planted(0.02, 0.05))
    assert found.verdict == L.NOT_RESOLVED and "holds both" in found.text
    found = L.real_sentiment_accuracy(planted(-0.05, 0.02, figure="real-sentiment"))
    assert found.verdict == L.NOT_SUPPORTED and "more than one point" in found.text
    # without the 0.4 row, the lowest shared loss is 0.5
    assert "loss 0.5" in L.real_agreement_accuracy(planted(0.0, 0.001, reached=False)).text
