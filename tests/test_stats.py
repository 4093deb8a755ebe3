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


def test_interval_text_prints_significant_digits():
    assert stats.interval_text(0.78112, 0.000483) == "0.7811 ± 0.00048"
    assert stats.interval_text(687.83, 1.04, 3) == "688 ± 1"
    assert stats.seed_interval_text([1.0, 1.0, 1.0]) == "1 ± 0"
    assert stats.seed_interval_text([1.0, 2.0, 3.0, 4.0, 5.0]) == "3 ± 2"
    assert stats.seed_interval_text([2.0]) == "2 ± nan"


def test_records_interval_takes_one_value_per_seed():
    records = [{"seed": 1, "group": "a", "x": 1.0}, {"seed": 1, "group": "a", "x": 3.0},
               {"seed": 2, "group": "a", "x": 4.0}, {"seed": 2, "group": "b", "x": 100.0}]
    # seed 1's records average to 2, seed 2's to 4: the mean is 3 over two seeds
    assert stats.records_interval(records, "x", group="a") == stats.seed_interval([2.0, 4.0])
    assert stats.records_interval(records, "x") == stats.seed_interval([2.0, 52.0])
    mean, half = stats.records_interval(records, "x", group="b")
    assert mean == 100.0 and np.isnan(half)
