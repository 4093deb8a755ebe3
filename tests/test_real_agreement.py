"""real-agreement: the agreement experiment on sentences parsed from the State of the Union
addresses (qkov.figures.real_agreement). The notebook itself runs under nbval; these check
its steps on small slices of the built corpus (``make data``; skipped, saying so, without
it) and on a file of one's own."""

import csv

import numpy as np
import pytest

from qkov.checks import ParameterError
from qkov.figures import real_agreement
from qkov.language import corpus, sources

SMALL = {"seeds": [1, 2], "conditions": ["matched", "faster QK", "all faster"], "epochs": 2,
         "rates": [1e-4, 1e-3, 3e-3], "qk_multiplier": 30.0, "d_model": 16, "n_heads": 2,
         "d_head": 8, "patience": 1, "workers": 1, "progress": False, "example_limit": 1500}


@pytest.fixture(scope="module")
def built():
    try:
        return corpus.corpus_path()
    except sources.SourceError as err:
        pytest.skip(f"the corpus is not built ({err}); `make data` builds it")


def test_without_the_corpus_the_run_says_what_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv(sources.DATA_DIR_ENV, str(tmp_path))
    p = real_agreement.Parameters(**SMALL)
    with pytest.raises(sources.SourceError, match=r"not built .*python -m qkov_tools data"):
        real_agreement.prepare(p)


def test_bad_parameters_are_named():
    with pytest.raises(ParameterError, match="split_by"):
        real_agreement.Parameters(split_by="address")
    with pytest.raises(ParameterError, match="conditions"):
        real_agreement.Parameters(conditions=["faster QK"])
    with pytest.raises(ParameterError, match="rates.*item 1"):
        real_agreement.Parameters(rates=[1e-4, 0.0])
    with pytest.raises(ParameterError, match="rates.*increasing"):
        real_agreement.Parameters(rates=[1e-3, 1e-4])
    with pytest.raises(ParameterError, match="patience"):
        real_agreement.Parameters(patience=0)
    for share in (0, 1, 1.5):
        with pytest.raises(ParameterError, match="validation_fraction"):
            real_agreement.Parameters(validation_fraction=share)
    with pytest.raises(ParameterError, match="matched_losses.*decreasing"):
        real_agreement.Parameters(matched_losses=[0.3, 0.4])
    with pytest.raises(ParameterError, match="seeds.*at least 2"):
        real_agreement.Parameters(seeds=[1])
    with pytest.raises(ParameterError, match="agreement_tsv.*does not exist"):
        real_agreement.Parameters(agreement_tsv="/no/such/file.tsv")


def test_the_split_holds_out_whole_addresses(built):
    prepared = real_agreement.prepare(real_agreement.Parameters(**SMALL))
    train = {e.document for e in prepared.train_examples}
    validation = {e.document for e in prepared.validation_examples}
    test = {e.document for e in prepared.test_examples}
    assert train and validation and test
    assert not train & test and not train & validation and not validation & test
    counts = {row["split"]: row for row in real_agreement.count_rows(prepared)}
    assert counts["train"]["examples"] == len(prepared.train)
    assert counts["validation"]["examples"] == len(prepared.validation)
    assert counts["test"]["examples"] == len(prepared.test)
    # the vocabulary is the training examples' alone
    words = {w for e in prepared.train_examples for w in e.words}
    assert prepared.tokenizer.vocab_size <= len(words) + 10
    assert sum(counts["test"][c] for c in real_agreement.COUNT_COLUMNS[3:-1]) == len(prepared.test)
    lines = real_agreement.source_lines(prepared)
    assert any("State of the Union" in line for line in lines)
    assert not any(str(built.parent) in line for line in lines)  # no machine's path


def test_a_small_run_sweeps_every_rate_and_compares_at_the_chosen_ones(built):
    p = real_agreement.Parameters(**SMALL)
    prepared = real_agreement.prepare(p)
    results = real_agreement.train(p, prepared)
    assert {(r["condition"], r["rate"], r["seed"]) for r in results} == \
        set(real_agreement.runs(p))
    # all faster at 1e-4 is matched at 1e-4 * 30 = 3e-3: trained once, reported under both
    assert ("all faster", 1e-4, "matched", 3e-3) in real_agreement.same_runs(results)
    for seed in SMALL["seeds"]:
        (a,) = [r for r in results if (r["condition"], r["rate"], r["seed"]) == ("all faster", 1e-4, seed)]
        (b,) = [r for r in results if (r["condition"], r["rate"], r["seed"]) == ("matched", 3e-3, seed)]
        assert a["loss"] == b["loss"] and np.array_equal(a["correct"], b["correct"])
    for r in results:
        # every run ends at its best validation measurement, and says why it ended
        assert r["best"]["validation_loss"] == r["trajectory"][:, 1].min()
        assert r["ended_by"] in ("cap", "patience") and 0 <= r["best_step"] <= r["steps"]
        assert len(r["correct"]) == len(prepared.test)
    chosen = real_agreement.chosen_rates(results)
    for c, rate in chosen.items():
        best = real_agreement.mean_best_loss(results, c, rate)
        assert all(best <= real_agreement.mean_best_loss(results, c, other) for other in p.rates)
    sweep = real_agreement.sweep_rows(results, chosen)
    assert len(sweep) == len(SMALL["conditions"]) * len(SMALL["rates"])  # every setting shown
    assert sum(row["chosen"] == "yes" for row in sweep) == len(SMALL["conditions"])

    matched_loss = real_agreement.matched_loss_data(p, results, chosen)
    assert len(matched_loss) == 2 * len(SMALL["rates"]) * len(p.matched_losses)
    test = real_agreement.test_data(prepared, results, chosen)
    bins = real_agreement.attractor_bins(prepared)
    assert len(test) == len(SMALL["conditions"]) * len(SMALL["rates"]) * len(bins)
    for row in test:
        assert row["accuracy_low"] <= row["accuracy"] <= row["accuracy_high"]
        reference = row["condition"] == "matched" and row["chosen"]
        assert ("no_cost" in row) == (not reference)
    rates = real_agreement.rate_rows(results, matched_loss, test)
    assert len(rates) == 2 * len(SMALL["rates"])
    at_chosen = real_agreement.at_chosen_rates(results, chosen)
    against = real_agreement.against_data(prepared, at_chosen)
    # the runs pair by seed whatever their order: all faster's reversed, the others' not (a
    # pairing by position would change the intervals, which draw the seeds)
    others = [r for r in at_chosen if r["condition"] != "all faster"]
    reordered = others + [r for r in at_chosen if r["condition"] == "all faster"][::-1]
    assert real_agreement.against_data(prepared, reordered) == against
    for row in against:
        assert row["low"] <= row["mean"] <= row["high"]
    # the attention gap to all faster is the gap of the two conditions' test attention
    overall = {r["condition"]: r for r in test if r["chosen"] and r["attractors"] == "all"}
    (gap,) = [r["mean"] for r in against
              if (r["condition"], r["against"]) == ("faster QK", "all faster")]
    assert np.isclose(gap, overall["faster QK"]["attention"] - overall["all faster"]["attention"])
    # the accuracy against the heuristic, on the examples with attractors
    heuristic = real_agreement.last_noun_accuracy(prepared)[prepared.test_attractors > 0]
    (matched,) = [r["mean"] for r in against
                  if (r["condition"], r["against"]) == ("matched", "last-noun heuristic")]
    at_chosen = [r for r in results if r["condition"] == "matched"
                 and r["rate"] == chosen["matched"]]
    right = np.mean([r["correct"][prepared.test_attractors > 0] for r in at_chosen])
    assert np.isclose(matched, right - heuristic.mean())
    glued = real_agreement.glued(p, prepared, results, chosen, matched_loss, test, against)
    assert glued["ra_n_seeds"] == "2" and glued["ra_rate_matched"] == f"{chosen['matched']:g}"
    assert glued["ra_ml_verdict_faster_QK"] in ("sharper", "blunter", "not resolved", "not reached")
    baseline = real_agreement.baseline_rows(prepared)
    assert sum(row["test_examples"] for row in baseline) == len(prepared.test)
    assert all(0.5 <= float(row["majority_accuracy"]) <= 1 for row in baseline)
    # without an attractor the last common noun agrees with the subject, by the corpus's
    # definition of an attractor; a uniform readout puts 1/words on the subject
    assert baseline[0]["attractors"] == "0" and baseline[0]["last_noun_accuracy"] == "1.000"
    lengths = prepared.test.lengths.numpy()[prepared.test_attractors == 0]
    assert float(baseline[0]["uniform_attention"]) == pytest.approx(np.mean(1 / lengths), abs=5e-4)
    assert glued["ra_vs_last_noun_verdict_matched"] in ("above it", "below it", "not resolved")
    records = real_agreement.rows(real_agreement.at_chosen_rates(results, chosen))
    assert {(r["condition"], r["seed"]) for r in records} == \
        {(c, s) for c in SMALL["conditions"] for s in SMALL["seeds"]}

    left_out, shared = real_agreement.split_lines(prepared)
    assert left_out.startswith(f"left out: {prepared.too_long:,} examples")
    assert shared.startswith("test prefixes also in training")
    rows = real_agreement.corpus_rows(prepared)
    assert rows[0]["item"] == "agreement TSV sha256" and len(rows[0]["value"]) == 64


def test_a_validation_split_without_a_class_is_refused(tmp_path):
    path = tmp_path / "agr.tsv"
    write_tsv(path, [False] * 6 + [True] * 194)  # the 6 singular verbs come first
    p = real_agreement.Parameters(**dict(SMALL, example_limit=None), agreement_tsv=str(path),
                                  split_by="example", train_fraction=0.5,
                                  validation_fraction=0.01)
    with pytest.raises(ParameterError, match="validation_fraction.*no .* verb"):
        real_agreement.prepare(p)


def write_tsv(path, plurals) -> None:
    header = ["sentence", "orig_sentence", "subj", "verb", "subj_pos", "verb_pos", "subj_index",
              "verb_index", "n_intervening", "n_diff_intervening"]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(header)
        for plural in plurals:
            noun, verb = ("dogs", "run") if plural else ("dog", "runs")
            words = f"the {noun} near the cat {verb}"
            writer.writerow([words, words, noun, verb, "NNS" if plural else "NN",
                             "VBP" if plural else "VBZ", 2, 6, 1, int(plural)])


def test_a_file_of_ones_own_runs_split_by_example(tmp_path):
    path = tmp_path / "agr.tsv"
    rng = np.random.default_rng(0)
    write_tsv(path, [bool(rng.integers(2)) for _ in range(200)])
    p = real_agreement.Parameters(**dict(SMALL, example_limit=None), agreement_tsv=str(path),
                                  split_by="example", train_fraction=0.5, validation_fraction=0.2)
    prepared = real_agreement.prepare(p)
    assert len(prepared.train) == 80 and len(prepared.validation) == 20
    assert len(prepared.test) == 100
    assert real_agreement.source_lines(prepared)[0].startswith("agreement TSV: agr.tsv")
    assert real_agreement.p_is_built(prepared.path) is False
    assert {row["addresses"] for row in real_agreement.count_rows(prepared)} == {"-"}  # no column


def test_language_sva_reads_the_built_corpus_unchanged(built):
    """The corpus is written in the agreement TSV's format: the paper's pipeline
    (language-sva) loads, splits and encodes it as it would Linzen et al.'s file."""
    from qkov.figures import language_sva

    p = language_sva.Parameters(agreement_tsv=str(built), example_limit=800, train_fraction=0.5)
    prepared = language_sva.prepare(p)
    assert len(prepared.train) + len(prepared.test) + prepared.too_long == 800
    assert "test examples by attractors" in language_sva.describe(prepared)


def test_the_last_noun_heuristic_reads_the_last_common_noun():
    from qkov.language.data import AgreementExample

    def example(tags):
        return AgreementExample(2, ["w"] * len(tags), 0, 0, len(tags), 0, 0, tags=tuple(tags))

    assert real_agreement.last_noun_number(example(["DT", "NNS", "IN", "NN", "RB"]), 1) == 0
    assert real_agreement.last_noun_number(example(["NN", "IN", "NNS"]), 0) == 1
    # a proper noun is no attractor in the corpus, and no evidence here
    assert real_agreement.last_noun_number(example(["NNS", "IN", "NNP"]), 0) == 1
    assert real_agreement.last_noun_number(example(["PRP", "RB"]), 1) == 1  # none: the fallback
