"""trajectories.csv, the runs paper-fig2 hands to theory-rescaling and fig2-controls: what the writer writes,
the reader reads back, and a file that is not one fails naming the file and line."""

import math

import numpy as np
import pytest

from qkov.sets import write_table
from qkov.synthetic import trajectories


def written(tmp_path, runs):
    path = tmp_path / trajectories.FILE
    write_table(path, *trajectories.table(runs))
    return path


def point(epoch, loss, distinct, identifying, conserved_ov=math.nan):
    """(epoch, *MEASURES): the rates and conserved quantities as a FACO run has them."""
    return [epoch, loss, distinct, identifying, 0.7, 1.0, 0.1, conserved_ov]


def test_what_is_written_is_read_back(tmp_path):
    runs = [trajectories.Trajectory("FAFO", 1234, np.array([point(0, 3.9, 0.1, 0.2, 0.0),
                                                            point(1, 2.5, 0.3, 0.4, 1e-3)])),
            trajectories.Trajectory("FACO", 1235, np.array([point(0, 3.9, 0.1, math.nan)]))]
    path = written(tmp_path, runs)
    assert path.read_text().splitlines()[0] == ",".join(trajectories.COLUMNS)
    back = trajectories.read(path)
    assert [(t.panel, t.seed) for t in back] == [("FAFO", 1234), ("FACO", 1235)]
    np.testing.assert_array_equal(back[0].points, runs[0].points)
    assert math.isnan(back[1].points[0, 3])  # written as an empty field, read as NaN
    assert math.isnan(back[1].points[0, 7])  # a collapsed circuit has no conserved quantity


HEADER = ",".join(trajectories.COLUMNS)
GOOD = "0.7,1.0,0.1,"  # the rates and conserved quantities of a row (an empty field: NaN)


@pytest.mark.parametrize("text, message", [
    ("panel,seed,epoch,loss\n", "line 1: expected the columns panel, seed, epoch, loss, "
                                "attention_distinct, attention_class, rate_qk, .*, got panel, "
                                "seed, epoch, loss"),
    ("", "line 1: expected the columns .*, got nothing"),
    (HEADER + "\nFAFO,1234,0,3.9,0.1\n", "line 2: expected 10 values, got 5"),
    (HEADER + f"\nFAFO,1234,0,3.9,0.1,0.2,{GOOD}\nFAFO,x,1,3.9,0.1,0.2,{GOOD}\n",
     "line 3: seed: expected an integer, got 'x'"),
    (HEADER + f"\nFAFO,1234,0,low,0.1,0.2,{GOOD}\n", "line 2: loss: expected a number, got 'low'"),
])
def test_a_file_that_is_not_one_is_named_with_its_line(tmp_path, text, message):
    path = tmp_path / trajectories.FILE
    path.write_text(text)
    with pytest.raises(ValueError, match=f"^{path}, {message}"):
        trajectories.read(path)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="no-such.csv: cannot read it"):
        trajectories.read(tmp_path / "no-such.csv")
