"""Every stored trained notebook carries the record of its full-scale check (tests/full_scale.py:
run at its stored scale under the scalar kernels and a second MKL path, it printed what it
prints), made against its current outputs: a notebook stored again needs the check again."""

import json

import nbformat
import pytest

from full_scale import ENVIRONMENTS, TRAINED, notebook_path, outputs_digest, record_path
from qkov.figures import specs


def test_the_trained_figures_are_the_ones_that_train():
    assert set(TRAINED) <= set(specs())


@pytest.mark.parametrize("figure_id", TRAINED)
def test_a_stored_trained_notebook_has_a_full_scale_record_of_its_outputs(figure_id):
    path = record_path(figure_id)
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
