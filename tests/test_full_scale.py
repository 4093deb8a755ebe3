"""Every stored trained notebook carries the record of its full-scale check (tests/full_scale.py:
run at its stored scale under the scalar kernels and a second MKL path, it printed what it
prints), made against its current outputs: a notebook stored again needs the check again."""

import json

import nbformat
import pytest

from full_scale import ENVIRONMENTS, TRAINED, notebook_path, outputs_digest, record_path
from qkov.figures import specs

# The trained notebooks stored before the check existed and not checked at full scale yet
# (issue 45): each needs `python tests/full_scale.py <id>`, then leaves this list. Only the
# reduced runs of tests/test_perturbation.py cover them until then.
NOT_YET_CHECKED = ("paper-fig2", "paper-fig3", "real-agreement")


def test_the_trained_figures_are_the_ones_that_train():
    assert set(TRAINED) <= set(specs()) and set(NOT_YET_CHECKED) < set(TRAINED)


@pytest.mark.parametrize("figure_id", TRAINED)
def test_a_stored_trained_notebook_has_a_full_scale_record_of_its_outputs(figure_id):
    path = record_path(figure_id)
    if figure_id in NOT_YET_CHECKED and not path.is_file():
        pytest.skip(f"{figure_id}: stored before the full-scale check; run "
                    f"`python tests/full_scale.py {figure_id}` (issue 45)")
    assert path.is_file(), (f"{figure_id}: no full-scale record; run `.venv/bin/python "
                            f"tests/full_scale.py {figure_id}` before storing its notebook")
    record = json.loads(path.read_text())
    current = outputs_digest(nbformat.read(notebook_path(figure_id), as_version=4))
    assert record["outputs_sha256"] == current, (
        f"{figure_id}: its record was made for other outputs than the stored notebook's; run "
        f"`.venv/bin/python tests/full_scale.py {figure_id}` again")
    assert record["figure"] == figure_id and set(record["environments"]) == set(ENVIRONMENTS)


def test_the_digest_changes_with_a_printed_digit_and_not_with_a_temporary_path():
    def notebook(text):
        cell = nbformat.v4.new_code_cell()
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        return nbformat.v4.new_notebook(cells=[cell])

    digest = lambda text: outputs_digest(notebook(text))  # noqa: E731
    assert digest("a 0.4833\n") != digest("a 0.4834\n")
    assert digest("in /tmp/abc/x\n") == digest("in /tmp/def/y\n")
