"""The synthetic agreement task: sentences are parsed back word by word to check the labels,
attractor counts, modifiers and the rationale; generation is seeded; and the figure's
computations run end to end at a tiny size."""

import pytest
import torch

from qkov.language import agreement as A

NUMBER = {w: k for pair in A.NOUNS for k, w in enumerate(pair)}
VERB_NUMBER = {w: k for pair in A.VERBS for k, w in enumerate(pair)}


def parse(sentence):
    """(subject index, subject number, modifier count, attractor count) by reading words;
    checks every relative clause's verb agrees with its own noun."""
    words = sentence.split()
    nouns = [i for i, w in enumerate(words) if w in NUMBER]
    subject = nouns[0]
    modifiers = sum(w in A.PREPOSITIONS or w == A.COMPLEMENTIZER for w in words)
    attractors = sum(NUMBER[words[i]] != NUMBER[words[subject]] for i in nouns[1:])
    for i, w in enumerate(words):
        if w in VERB_NUMBER:
            assert words[i - 3] == A.COMPLEMENTIZER and VERB_NUMBER[w] == NUMBER[words[i - 1]]
    assert len(nouns) == modifiers + 1
    return subject, NUMBER[words[subject]], modifiers, attractors


@pytest.mark.parametrize("kw", [{"modifiers": (0, 4)}, {"modifiers": 3, "attractors": 2},
                                {"modifiers": (1, 3), "attractors": (0, 3)},
                                {"modifiers": 2, "attractors": 0, "relative_clause_prob": 1.0}])
def test_labels_attractors_and_rationale_read_back_from_the_words(kw):
    data = A.generate(300, 5, **kw)
    for k, sentence in enumerate(data.sentences()):
        subject, number, modifiers, attractors = parse(sentence)
        assert data.labels[k] == number
        assert data.subject_position[k] == subject
        assert data.rationale[k].nonzero().flatten().tolist() == [subject]
        assert data.n_modifiers[k] == modifiers and data.n_attractors[k] == attractors
    if isinstance(kw.get("attractors"), int):
        assert (data.n_attractors == kw["attractors"]).all()
    if isinstance(kw["modifiers"], int):
        assert (data.n_modifiers == kw["modifiers"]).all()
    low, high = (kw["modifiers"],) * 2 if isinstance(kw["modifiers"], int) else kw["modifiers"]
    assert set(data.n_modifiers.tolist()) == set(range(low, high + 1))  # 300 draws cover them
    assert data.tokens.shape[1] == A.width(high)
    assert (~data.attention_mask[:, -1]).all()  # always a pad slot to read the verb at


def test_both_numbers_and_modifier_kinds_occur_and_attractors_follow_their_probability():
    data = A.generate(2000, 1, modifiers=3, attractor_prob=0.25)
    assert 0.45 < data.labels.double().mean() < 0.55
    assert abs(data.n_attractors.double().mean() / 3 - 0.25) < 0.03
    words = " ".join(data.sentences())
    assert " that " in words and " near " in words and " old " in words
    none = A.generate(50, 1, modifiers=3, attractor_prob=0.0)
    assert (none.n_attractors == 0).all()


def test_generation_is_seeded():
    a, b, c = A.generate(40, 9), A.generate(40, 9), A.generate(40, 10)
    for field in ("tokens", "attention_mask", "labels", "rationale", "n_attractors"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert not torch.equal(a.tokens, c.tokens)
    assert A.generate(40, 9, positions=30).tokens.shape == (40, 30)


@pytest.mark.parametrize("kw, name", [({"n": 0}, "n"), ({"seed": -1}, "seed"),
                                      ({"modifiers": (3, 1)}, "modifiers"),
                                      ({"modifiers": 1, "attractors": 2}, "attractors"),
                                      ({"attractor_prob": 1.5}, "attractor_prob"),
                                      ({"modifiers": 3, "positions": 5}, "positions")])
def test_bad_parameters_are_named(kw, name):
    args = {"n": 5, "seed": 1, **kw}
    with pytest.raises(ValueError, match=f"^{name}"):
        A.generate(args.pop("n"), args.pop("seed"), **args)


def test_vocabulary_round_trip():
    sentence = "the old author near the cabinets that the pilot sees"
    ids = A.VOCABULARY.encode(sentence)
    assert A.VOCABULARY.decode(ids + [0, 0]) == sentence
    assert A.VOCABULARY.words[0] == A.PAD and len(set(A.VOCABULARY.words)) == len(A.VOCABULARY)
    with pytest.raises(ValueError, match="word 1 'purple'"):
        A.VOCABULARY.encode("the purple dog")


def test_the_figure_runs_end_to_end_at_a_tiny_size():
    from qkov.figures import language_agreement

    p = language_agreement.Parameters(seeds=[1, 2], train_sentences=64, test_sentences=16, max_modifiers=2,
                     epochs=2, workers=1, conditions=["matched", "faster QK"])
    results = language_agreement.train(p)
    records = language_agreement.rows(results)
    assert len(records) == 2 * 2 * 3  # conditions x seeds x attractor counts 0..2
    for r in records:
        assert 0 <= r["accuracy"] <= 1 and 0 <= r["attention_rollout"] <= 1 + 1e-6
        # one layer, read at a pad slot: rollout, layer mean and layer max coincide
        assert r["attention_rollout"] == pytest.approx(r["attention_layer_mean"], abs=1e-6)
        assert r["attention_layer_max"] == pytest.approx(r["attention_layer_mean"], abs=1e-6)
    assert [row["condition"] for row in language_agreement.summary_table(records)] == ["matched", "faster QK"]
    assert [(row["attractors"], row["condition"]) for row in language_agreement.attractor_table(records)] == [
        (a, c) for a in (0, 1, 2) for c in language_agreement.CONDITIONS if c in p.conditions]
    maps = language_agreement.heatmaps(results)
    for m in maps.values():
        assert m.shape == (5, 5) and m.sum() == pytest.approx(100.0)
    assert len(language_agreement.curve_rows(results)) == 2 * 2 * 2 * 3
    # matched and faster QK start from the same weights and see the same batches: with one
    # batch per epoch, the first epoch's loss is measured before any step and is the same
    loss = {(r["condition"], r["seed"]): r["loss"] for r in results}
    assert loss["matched", 1][0] == loss["faster QK", 1][0]
    assert loss["matched", 1][0] != loss["matched", 2][0]
    assert loss["matched", 1][1] != loss["faster QK", 1][1]
    language_agreement.plot(records, maps, results)
    with pytest.raises(Exception, match="n_heads"):
        language_agreement.Parameters(d_model=30, n_heads=4)
    with pytest.raises(Exception, match="conditions"):
        language_agreement.Parameters(conditions=["faster QK", "matched"])


def test_each_condition_puts_its_circuits_at_the_multiplier():
    from qkov.figures import language_agreement

    p = language_agreement.Parameters(lr=0.01, qk_multiplier=30.0)
    rates = {}
    for c in language_agreement.CONDITIONS:
        s = language_agreement.setup(p, c, 1)
        rates[c] = (s.lr * s.qk_multiplier, s.lr * s.embedding_multiplier, s.lr)
    assert rates["matched"] == pytest.approx((0.01, 0.01, 0.01))
    assert rates["faster QK"] == pytest.approx((0.3, 0.3, 0.01))
    assert rates["faster QK only"] == pytest.approx((0.3, 0.01, 0.01))
    assert rates["all faster"] == pytest.approx((0.3, 0.3, 0.3))


def test_a_run_does_not_depend_on_the_number_of_workers():
    from qkov.figures import language_agreement

    kw = dict(seeds=[1, 2], train_sentences=256, test_sentences=64, max_modifiers=3, epochs=3,
              conditions=["matched", "faster QK"])
    one = language_agreement.rows(language_agreement.train(language_agreement.Parameters(workers=1, **kw)))
    two = language_agreement.rows(language_agreement.train(language_agreement.Parameters(workers=2, **kw)))
    assert one == two


def test_the_language_figures_share_the_condition_names_and_the_held_out_sets_are_seeded():
    from qkov.figures import language_agreement
    from qkov.language import pipelines

    # one spelling: the real-data figures' two conditions are the agreement figure's first two
    assert pipelines.CONDITIONS == ("matched", "faster QK") == tuple(language_agreement.CONDITIONS)[:2]
    p = language_agreement.Parameters(test_sentences=8, max_modifiers=2)
    sets = language_agreement.held_out_sets(p, 1)
    assert sorted(sets) == [0, 1, 2]
    for attractors, data in sets.items():
        assert (data.n_attractors == attractors).all() and (data.n_modifiers == 2).all()
        assert torch.equal(data.tokens, language_agreement.held_out_sets(p, 1)[attractors].tokens)
