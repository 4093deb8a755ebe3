"""The loaders are strict and say where (issue 28): each case below was once accepted, or
failed later with an error that named no file, no line and nothing expected. Each writes a
small file of the real format (test_language_data's writers) with one fault in it."""

import re

import nbformat
import pytest
from test_language_data import (
    agreement_rows,
    error_of,
    hatexplain_posts,
    squad_document,
    write_agreement,
    write_glove,
    write_hatexplain,
    write_squad,
)

from conftest import REPO
from qkov.checks import ParameterError
from qkov.figures import language_hatexplain, language_squad, language_sva
from qkov.language import data as D

# --- agreement TSV --------------------------------------------------------------------------


def test_agreement_tsv_not_in_utf8_is_named_by_line(tmp_path):
    path = write_agreement(tmp_path / "agr.tsv")
    lines = path.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b"loudly", "loudly café".encode("latin-1"), 1)
    path.write_bytes(b"\n".join(lines))
    byte = lines[4].index(b"\xe9") + 1
    assert error_of(D.load_agreement, path) == (
        f"{path}: line 5, byte {byte}: expected UTF-8 text, got the byte 0xe9")


def test_a_gzipped_agreement_tsv_is_named_and_says_gunzip(tmp_path):
    import gzip

    text = write_agreement(tmp_path / "agr.tsv").read_bytes()
    path = tmp_path / "agr_50_mostcommon_10K.tsv"
    path.write_bytes(gzip.compress(text))
    message = error_of(D.load_agreement, path)
    assert message.startswith(f"{path}: line 1, byte 2: expected UTF-8 text, got the byte 0x8b")
    assert "gunzip" in message


def test_an_agreement_field_over_csv_s_limit_is_named_by_line(tmp_path):
    rows = agreement_rows()
    rows[2]["all_nouns"] = "dog " * 40_000  # 160,000 characters: over csv's 131,072
    path = write_agreement(tmp_path / "agr.tsv", rows)
    message = error_of(D.load_agreement, path)
    assert message.startswith(f"{path}: line 4: expected tab-separated text")
    assert "field larger than field limit (131072)" in message


def test_an_unmatched_quote_is_named_by_the_line_it_opens(tmp_path):
    path = write_agreement(tmp_path / "agr.tsv")
    lines = path.read_text().splitlines()[:3]
    fields = lines[2].split("\t")
    lines[2] = "\t".join(fields[:-1] + ['"' + fields[-1]])  # line 3: a quote never closed
    lines += ["x" * 1000] * 200  # ... runs on over 200 lines of 1,000 characters
    path.write_text("\n".join(lines) + "\n")
    assert "line 3: expected tab-separated text" in error_of(D.load_agreement, path)


@pytest.mark.parametrize("column, value, expected", [
    ("n_diff_intervening", -1, "column 'n_diff_intervening': expected a non-negative integer "
                               "(a count of nouns), got -1"),
    ("n_intervening", -2, "column 'n_intervening': expected a non-negative integer "
                          "(a count of nouns), got -2"),
    ("n_diff_intervening", 3, "column 'n_diff_intervening': expected at most n_intervening "
                              "(1), got 3"),
])
def test_agreement_noun_counts_are_checked_at_load(tmp_path, column, value, expected):
    rows = agreement_rows()
    rows[4][column] = value  # row 4 has one attractor: n_intervening 1
    path = write_agreement(tmp_path / "agr.tsv", rows)
    assert error_of(D.load_agreement, path) == f"{path}: line 6: {expected}"


# --- GloVe ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e39"])  # 1e39: inf in float32
@pytest.mark.parametrize("word", ["cat", "zebra"])  # asked for, or not
def test_glove_vectors_must_be_finite(tmp_path, value, word):
    path = write_glove(tmp_path / "glove.txt", ["the", "cat", "zebra"], dim=4)
    lines = path.read_text().splitlines()
    k = [line.split()[0] for line in lines].index(word)
    lines[k] = " ".join(lines[k].split()[:3] + [value] + lines[k].split()[4:])
    path.write_text("\n".join(lines) + "\n")
    assert error_of(D.load_glove, path, ["the", "cat"], dim=4) == (
        f"{path}: line {k + 1}: expected 4 finite float32 numbers after {word!r}, "
        f"got {value!r}")


def test_every_glove_line_is_checked_also_for_words_not_asked_for(tmp_path):
    path = write_glove(tmp_path / "glove.txt", ["the", "cat", "zebra"], dim=4)
    lines = path.read_text().splitlines()
    lines[2] = "zebra 0.1 0.2 stripes 0.4"
    path.write_text("\n".join(lines) + "\n")
    assert error_of(D.load_glove, path, ["the", "cat"], dim=4) == (
        f"{path}: line 3: expected 4 numbers after 'zebra'")


@pytest.mark.parametrize("lines, found", [(0, 0), (3, 0)])
def test_an_empty_or_unrelated_glove_file_is_below_the_coverage_floor(tmp_path, lines, found):
    path = write_glove(tmp_path / "glove.txt", ["der", "die", "das"][:lines], dim=4)
    if not lines:
        path.write_text("")
    words = ["the", "cat", "sat", "on", "a", "mat"]
    assert error_of(D.load_glove, path, words, dim=4) == (
        f"{path}: expected vectors for at least 1% (MIN_GLOVE_COVERAGE) of the 6 words asked "
        f"for, found {found} in {lines} lines: is it GloVe text for this vocabulary, whole?")


def test_the_glove_coverage_floor_is_one_percent(tmp_path):
    assert D.MIN_GLOVE_COVERAGE == 0.01
    path = write_glove(tmp_path / "glove.txt", ["the", "zebra"], dim=4)
    words = ["the"] + [f"w{k}" for k in range(99)]
    assert D.load_glove(path, words, dim=4).coverage == 1  # 1 of 100: at the floor
    message = error_of(D.load_glove, path, words + ["w99"], dim=4)  # 1 of 101: below
    assert "of the 101 words asked for, found 1 in 2 lines" in message


# --- HateXplain -----------------------------------------------------------------------------


def test_hatexplain_posts_in_two_splits_are_refused(tmp_path):
    dataset, divisions = write_hatexplain(tmp_path, divisions={
        "train": [f"{k}_gab" for k in range(6)], "val": ["5_gab"],
        "test": ["6_gab", "7_gab", "0_gab", "1_gab"]})
    assert error_of(D.load_hatexplain, dataset, divisions) == (
        f"{divisions}: splits 'train' and 'val': expected no post in both (split leakage), "
        f"got 1: '5_gab'")
    dataset, divisions = write_hatexplain(tmp_path, divisions={
        "train": [f"{k}_gab" for k in range(5)], "val": [],
        "test": ["6_gab", "0_gab", "1_gab", "2_gab", "3_gab", "4_gab", "7_gab"]})
    assert error_of(D.load_hatexplain, dataset, divisions) == (
        f"{divisions}: splits 'train' and 'test': expected no post in both (split leakage), "
        f"got 5: '0_gab', '1_gab', '2_gab', '3_gab', '4_gab'")


def test_a_hatexplain_post_listed_twice_in_a_split_is_refused(tmp_path):
    ids = [f"{k}_gab" for k in range(8)]
    dataset, divisions = write_hatexplain(tmp_path, hatexplain_posts(), divisions={
        "train": ids[:5] + ids[:5] + ["0_gab"] * 3, "val": [], "test": []})
    assert error_of(D.load_hatexplain, dataset, divisions) == (
        f"{divisions}: split 'train': expected each post id once, got 5 listed more than "
        f"once: '0_gab', '1_gab', '2_gab', '3_gab', '4_gab'")
    dataset, divisions = write_hatexplain(tmp_path, divisions={
        "train": ids[:5], "val": ids[5:6], "test": ids[6:] + [f"{k}_gab" for k in range(8)]})
    message = error_of(D.load_hatexplain, dataset, divisions)
    assert message.startswith(f"{divisions}: split 'test': expected each post id once, got 2 ")
    dataset, divisions = write_hatexplain(tmp_path, divisions={
        "train": ids[:5] + ids[:5] + ids[5:] * 2, "val": [], "test": []})
    assert error_of(D.load_hatexplain, dataset, divisions).endswith(
        "got 8 listed more than once: '0_gab', '1_gab', '2_gab', '3_gab', '4_gab' and 3 more")


# --- SQuAD ----------------------------------------------------------------------------------


def test_a_negative_squad_answer_start_is_refused(tmp_path):
    document = squad_document()
    qa = document["data"][0]["paragraphs"][0]["qas"][2]  # answer "France", near the end
    context = document["data"][0]["paragraphs"][0]["context"]
    start = context.rindex("France") - len(context)  # -7: context[-7:-1] is "France"
    assert context[start:start + len("France")] == "France"
    qa["answers"][1]["answer_start"] = start
    path = write_squad(tmp_path / "train-v2.0.json", document)
    assert error_of(D.load_squad, path) == (
        f"{path}: question 'q0c', answer 1: expected answer_start >= 0 (a character offset "
        f"in the context), got {start}")


def test_a_duplicate_squad_question_id_is_refused(tmp_path):
    document = squad_document()
    document["data"][0]["paragraphs"][3]["qas"][1]["id"] = "q1a"  # an unanswerable one
    path = write_squad(tmp_path / "dev-v2.0.json", document)
    assert error_of(D.load_squad, path) == (
        f"{path}: question 'q1a' at data[0].paragraphs[3].qas[1]: expected a unique question "
        f"id, also at data[0].paragraphs[1].qas[0]")


# --- data paths: not given is "no data", given and not there is an error --------------------


def path_error(module, **given) -> str:
    """The error of the notebook's first data step (``data_missing``) for these paths."""
    with pytest.raises(ParameterError) as info:
        module.data_missing(module.Parameters(**given))
    return str(info.value)


def test_a_mistyped_hatexplain_dir_is_an_error_naming_it(tmp_path, capsys):
    folder = tmp_path / "nope"
    message = path_error(language_hatexplain, hatexplain_dir=str(folder))
    assert message.startswith(f"parameter 'hatexplain_dir': '{folder}' does not exist; "
                              "expected a folder with dataset.json and post_id_divisions.json")
    write_hatexplain(folder)
    (folder / "post_id_divisions.json").unlink()
    assert f"'{folder}' has no post_id_divisions.json; expected a folder with" in \
        path_error(language_hatexplain, hatexplain_dir=str(folder))
    message = path_error(language_hatexplain, hatexplain_dir=str(folder / "dataset.json"))
    assert "dataset.json' is not a folder; expected a folder with dataset.json" in message
    assert capsys.readouterr().out == ""  # no "no data" message


@pytest.mark.parametrize("module, name", [
    (language_sva, "agreement_tsv"),
    (language_squad, "squad_train"),
    (language_squad, "squad_dev"),
    (language_squad, "glove_path"),
])
def test_a_mistyped_data_file_is_an_error_naming_it(tmp_path, module, name, capsys):
    path = tmp_path / "no" / "such.file"
    message = path_error(module, **{name: str(path)})
    assert message.startswith(f"parameter {name!r}: '{path}' does not exist; expected a file: ")
    assert re.search(r"(Linzen|SQuAD|GloVe)", message)  # and what the file is
    assert f"parameter {name!r}: '{tmp_path}' is not a file" in \
        path_error(module, **{name: str(tmp_path)})
    assert capsys.readouterr().out == ""


def test_squad_with_one_file_given_is_still_no_data_for_the_others(tmp_path, capsys):
    train = write_squad(tmp_path / "train-v2.0.json")
    assert language_squad.data_missing(language_squad.Parameters(squad_train=str(train)))
    printed = capsys.readouterr().out
    assert "- squad_dev (not given):" in printed and "- glove_path (not given):" in printed
    assert "squad_train" not in printed.split("Then run")[0]


@pytest.mark.parametrize("module", [language_hatexplain, language_sva, language_squad])
def test_paths_not_given_still_print_the_stored_no_data_message(module, capsys):
    """None given: the message the stored notebooks hold, unchanged."""
    assert module.data_missing(module.Parameters())
    printed = capsys.readouterr().out
    nb = nbformat.read(REPO / "notebooks" / f"{module.SPEC.id}.ipynb", as_version=4)
    stored = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                     for o in c.outputs)
    assert printed and printed in stored


def test_valid_files_load_as_before(tmp_path):
    """The strict checks refuse nothing of the writers' valid files."""
    dataset, divisions = write_hatexplain(tmp_path / "Data")
    assert D.load_hatexplain(dataset, divisions).counts() == {"train": 4, "val": 1, "test": 1}
    assert len(D.load_agreement(write_agreement(tmp_path / "agr.tsv")).test) == 36
    assert len(D.load_squad(write_squad(tmp_path / "train.json")).examples) == 12
    p = language_hatexplain.Parameters(hatexplain_dir=str(tmp_path / "Data"))
    assert not language_hatexplain.data_missing(p)
