"""Intervals over seeds and how the tables print them (qkov.stats)."""

import numpy as np
import pytest

from qkov import stats


def test_seed_interval_is_the_student_t_interval():
    mean, half = stats.seed_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    # t(0.975, 4) = 2.7764; sample std sqrt(2.5); n = 5
    assert mean == 3.0 and half == pytest.approx(2.7764451 * np.sqrt(2.5) / np.sqrt(5))
    # t(0.95, 4) = 2.1318 at the 90% level
    assert stats.seed_interval([1.0, 2.0, 3.0, 4.0, 5.0], 0.9)[1] == pytest.approx(
        2.1318468 * np.sqrt(2.5) / np.sqrt(5))
    assert np.isnan(stats.seed_interval([2.0])[1])


def test_interval_text_rounds_the_mean_to_the_interval():
    # the mean to the half-width's second significant digit, both in fixed notation
    assert stats.interval_text(0.0009807, 2.3e-05) == "0.000981 ± 0.000023"
    assert stats.interval_text(0.01326, 0.026) == "0.013 ± 0.026"
    assert stats.interval_text(1393.4, 23.4) == "1393 ± 23"
    assert stats.interval_text(100.0, 280.0) == "100 ± 280"
    assert stats.interval_text(3.114e-05, 3.2e-06) == "0.0000311 ± 0.0000032"
    # 0.0999 rounds to 0.10: its second significant digit is the hundredths
    assert stats.interval_text(0.99995, 0.0999) == "1.00 ± 0.10"
    assert stats.interval_text(-1e-05, 0.003) == "0.0000 ± 0.0030"  # no "-0.0000"
    # never more than `digits` significant digits for the mean
    assert stats.interval_text(0.78112, 0.000483) == "0.7811 ± 0.00048"
    assert stats.interval_text(687.83, 1.04, 3) == "688 ± 1.0"
    assert stats.interval_text(1.0, 6.6e-05) == "1.000 ± 0.000066"
    # e-notation only where fixed notation would be unreadable, then for both numbers
    assert stats.interval_text(3.114e-10, 3.2e-11) == "3.11e-10 ± 3.2e-11"
    assert stats.interval_text(2.5e9, 3e7) == "2.500e+09 ± 3.0e+07"
    assert stats.seed_interval_text([1.0, 2.0, 3.0, 4.0, 5.0]) == "3.0 ± 2.0"


def test_interval_text_without_a_spread_prints_digits_significant_digits():
    assert stats.seed_interval_text([1.0, 1.0, 1.0]) == "1.000 ± 0"
    assert stats.seed_interval_text([0.25, 0.25]) == "0.2500 ± 0"
    assert stats.interval_text(2000.0, 0.0, 3) == "2000 ± 0"
    assert stats.interval_text(2003.0, 0.0, 3) == "2003 ± 0"
    assert stats.interval_text(0.0, 0.0) == "0 ± 0"
    assert stats.seed_interval_text([2.0]) == "2.000 ± nan"


def test_records_interval_takes_one_value_per_seed():
    records = [{"seed": 1, "group": "a", "x": 1.0}, {"seed": 1, "group": "a", "x": 3.0},
               {"seed": 2, "group": "a", "x": 4.0}, {"seed": 2, "group": "b", "x": 100.0}]
    # seed 1's records average to 2, seed 2's to 4: the mean is 3 over two seeds
    assert stats.records_interval(records, "x", group="a") == stats.seed_interval([2.0, 4.0])
    assert stats.records_interval(records, "x") == stats.seed_interval([2.0, 52.0])
    mean, half = stats.records_interval(records, "x", group="b")
    assert mean == 100.0 and np.isnan(half)


def test_interval_text_drifts_within_the_notebook_tolerance():
    """Another processor's rounding moves a half-width across a power of ten (0.0099 vs
    0.0101): the mean gains or loses a decimal, and nbval still accepts the text."""
    from nbval_tolerance import texts_close

    a, b = stats.interval_text(0.74812, 0.0099), stats.interval_text(0.74806, 0.0101)
    assert (a, b) == ("0.7481 ± 0.0099", "0.748 ± 0.010")
    assert texts_close(a, b)
    assert texts_close(stats.interval_text(1.0, 0.0), stats.interval_text(0.99992, 0.0002))


def test_a_spread_at_float32_rounding_prints_as_zero():
    """Seeds that agree up to float32 rounding: two processors' roundings (a half-width of
    2e-7 or 7.6e-8 on a loss of 3.912) print one entry, not fixed against e-notation."""
    assert stats.interval_text(3.912, 2.0e-7) == stats.interval_text(3.912, 7.6e-8) == "3.912 ± 0"
    assert stats.interval_text(3.912, 1.2e-5) == "3.912 ± 0.000012"  # a spread, kept


def test_paired_verdict_reads_the_interval_against_the_margin():
    from qkov.stats import EQUIVALENT, HIGHER, LOWER, NOT_RESOLVED, paired_verdict

    assert paired_verdict([0.30, 0.32, 0.31, 0.29, 0.33])[0] == HIGHER
    assert paired_verdict([-0.30, -0.32, -0.31, -0.29, -0.33])[0] == LOWER
    assert paired_verdict([0.1, -0.1, 0.05, -0.05, 0.0])[0] == NOT_RESOLVED
    # a sure but tiny difference: higher without a margin, equivalent within one
    tiny = [2.1e-5, 2.3e-5, 2.2e-5, 2.4e-5, 2.0e-5]
    assert paired_verdict(tiny)[0] == HIGHER
    assert paired_verdict(tiny, 0.01)[0] == EQUIVALENT
    # above zero but not beyond the margin: not resolved (0.0107 +- 0.0025, fig2-controls)
    near = [0.0107, 0.0095, 0.0120, 0.0110, 0.0103]
    assert paired_verdict(near, 0.01)[0] == NOT_RESOLVED
    assert paired_verdict([0.5], 0.01)[0] == NOT_RESOLVED  # one seed: no interval


def test_order_against_needs_the_intervals_to_part():
    from qkov.stats import order_against

    predicted = {"a": 3.0, "b": 2.0, "c": 1.0}
    assert order_against(predicted, {"a": (3, 0.1), "b": (2, 0.1), "c": (1, 0.1)}) == ([], [])
    against, unresolved = order_against(predicted, {"a": (1, 0.1), "b": (2, 0.1),
                                                    "c": (2.05, 0.1)})
    assert against == ["a > b", "a > c"] and unresolved == ["b > c"]


def test_range_text_is_the_median_and_the_range_of_a_position():
    from qkov.stats import range_text

    assert range_text([1101, 1101, 1001, 1101, 1101]) == "1101 (1001-1101)"
    assert range_text([500, 500]) == "500"
    assert range_text([0, 0, 0, 0, 500]) == "0 (0-500)"  # not "100 ± 280"


def test_the_document_bootstrap_is_the_usual_interval_for_independent_examples():
    """One seed, one example per document: the interval of a mean of 0/1 values is about
    the normal one, 1.96 standard errors each side."""
    rng = np.random.default_rng(1)
    values = (rng.random((1, 2000)) < 0.7).astype(float)
    mean, low, high = stats.document_bootstrap(values, np.arange(2000))
    half = 1.96 * values.std() / np.sqrt(2000)
    assert mean == values.mean() and low < mean < high
    assert (high - low) / 2 == pytest.approx(half, rel=0.1)


def test_examples_of_one_document_move_together_and_seeds_add_their_spread():
    """Examples that share their document's value: the interval is that of 50 documents,
    not of 2000 examples. Seeds that differ by an offset widen it further."""
    rng = np.random.default_rng(2)
    documents = np.repeat(np.arange(50), 40)
    shared = (rng.random(50) < 0.5).astype(float)[documents][None]
    _, low, high = stats.document_bootstrap(shared, documents)
    assert (high - low) / 2 == pytest.approx(1.96 * shared.std() / np.sqrt(50), rel=0.15)
    _, alone_low, alone_high = stats.document_bootstrap(shared, np.arange(2000))
    assert (high - low) > 4 * (alone_high - alone_low)
    seeds = shared + np.array([[-0.2], [0.0], [0.2], [0.1], [-0.1]])
    _, seeds_low, seeds_high = stats.document_bootstrap(seeds, documents)
    assert seeds_high - seeds_low > (high - low) * 1.1


def test_non_inferiority_is_one_sided_against_the_margin():
    rng = np.random.default_rng(3)
    documents = np.arange(400) // 4
    near_zero = rng.normal(0.0, 0.05, (5, 400))
    assert stats.non_inferiority(near_zero, documents, 0.01)[0] == stats.NON_INFERIOR
    assert stats.non_inferiority(near_zero - 0.05, documents, 0.01)[0] == stats.INFERIOR
    wide = rng.normal(-0.01, 1.0, (5, 400))
    verdict, mean, bound = stats.non_inferiority(wide, documents, 0.01)
    assert verdict == stats.NOT_RESOLVED and bound < mean
    # a two-sided interval that contains 0 is no evidence of "no cost"
    assert stats.non_inferiority(wide, documents, 0.01)[0] != stats.NON_INFERIOR


def test_the_resamples_are_drawn_once_per_shape_and_are_those_of_a_fresh_draw():
    """A figure bootstraps many conditions over one set of documents: the draws are shared,
    read only, and the same as a bootstrap that draws afresh from the same seed."""
    rng = np.random.default_rng(4)
    values, documents = rng.random((3, 300)), np.arange(300) // 3
    stats.bootstrap_draws.cache_clear()
    first = stats.document_bootstrap(values, documents)
    seed_draws, document_draws = stats.bootstrap_draws(3, 100, 2000, 0)
    assert stats.bootstrap_draws.cache_info().hits == 1
    with pytest.raises(ValueError, match="read-only"):
        document_draws[0, 0] = 7
    fresh = np.random.default_rng(0)
    assert np.array_equal(seed_draws, fresh.multinomial(3, np.full(3, 1 / 3), 2000))
    assert np.array_equal(document_draws, fresh.multinomial(100, np.full(100, 1 / 100), 2000))
    assert stats.document_bootstrap(values, documents) == first


def test_the_bootstrap_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match=r"values: expected a \[seeds, examples\]"):
        stats.document_bootstrap(np.zeros(5), np.arange(5))
    with pytest.raises(ValueError, match="documents: expected one per example"):
        stats.document_bootstrap(np.zeros((2, 5)), np.arange(4))
    with pytest.raises(ValueError, match="values: expected finite"):
        stats.document_bootstrap(np.full((1, 3), np.nan), np.arange(3))
    with pytest.raises(ValueError, match="resamples"):
        stats.document_bootstrap(np.zeros((1, 3)), np.arange(3), resamples=10)
    with pytest.raises(ValueError, match="margin: expected a number > 0"):
        stats.non_inferiority(np.zeros((1, 3)), np.arange(3), 0)
