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

    la = language_agreement
    p = la.Parameters(seeds=[1, 2], train_sentences=64, test_sentences=16, max_modifiers=2,
                      epochs=2, workers=1, conditions=["matched", "faster QK"],
                      rare_train_sentences=32)
    results = la.train(p)
    everything = la.rows(results)
    assert len(everything) == 2 * 2 * 2 * 3  # variants x conditions x seeds x attractors 0..2
    assert all(tuple(r) == la.RECORD_COLUMNS for r in everything)  # rare-attractors.csv's header
    records, rare = la.of_variant(everything), la.of_variant(everything, la.RARE)
    assert len(records) == len(rare) == 2 * 2 * 3
    with pytest.raises(ValueError, match="one variant"):
        la.summary_table(everything)
    assert [row["condition"] for row in la.comparison_table(rare)] == ["matched", "faster QK"]
    assert la.comparison_table(rare)[0]["accuracy_gap"] == "-"
    # the harder variant is measured at the end only
    assert all(len(run["accuracy_by_epoch"]) == 0 for run in la.of_variant(results, la.RARE))
    assert len(la.nearest_rows(results)) == 2 * 2 * 2  # default variant: conditions x seeds x epochs
    table = la.nearest_noun_table(results)
    assert [row["condition"] for row in table] == ["matched", "faster QK"]
    assert set(table[0]) == set(la.nearest_noun_columns(results)) and 1 <= table[0]["epoch"] <= 2
    results = la.of_variant(results)
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
    # faster QK's ratio at matched's QK rate: W_Q, W_K and embeddings at the base rate
    assert rates["slow OV"] == pytest.approx((0.01, 0.01, 0.01 / 30))
    assert "slow OV" in language_agreement.Parameters().conditions


@pytest.mark.parametrize("condition, expected", [
    ("slow OV", {"W_Q": 1, "W_K": 1, "token_embedding": 1, "position_embedding": 1,
                 "W_V": 1 / 30, "W_O": 1 / 30, "head": 1 / 30}),
    ("faster QK", {"W_Q": 30, "W_K": 30, "token_embedding": 30, "position_embedding": 30,
                   "W_V": 1, "W_O": 1, "head": 1}),
    ("matched", {"W_Q": 1, "W_K": 1, "token_embedding": 1, "position_embedding": 1,
                 "W_V": 1, "W_O": 1, "head": 1})])
def test_the_optimizer_gives_every_parameter_its_conditions_rate(condition, expected):
    """The rates the optimizer really uses, parameter by parameter, in units of the base
    rate (at the peak of the schedule: every group's rate has the same factor)."""
    from qkov.figures import language_agreement as la
    from qkov.language.models import Decoder, make_optimizer

    p = la.Parameters(lr=2e-3, qk_multiplier=30.0)
    s = la.setup(p, condition, 1)
    model = Decoder(la.model_config(p), generator=torch.Generator().manual_seed(0))
    optimizer = make_optimizer(model, s.optimizer, lr=s.lr, qk_multiplier=s.qk_multiplier,
                               embedding_multiplier=s.embedding_multiplier)
    rate = {id(q): g["lr"] for g in optimizer.param_groups for q in g["params"]}
    seen = set()
    for name, parameter in model.named_parameters():
        part = next(k for k in expected if k in name.split("."))
        assert rate[id(parameter)] == pytest.approx(2e-3 * expected[part]), name
        seen.add(part)
    assert seen == set(expected)  # every kind of parameter is there


def sentences(*texts):
    """A batch of hand-written sentences, padded with id 0."""
    ids = [A.VOCABULARY.encode(t) for t in texts]
    width = max(map(len, ids)) + 1
    return torch.tensor([row + [0] * (width - len(row)) for row in ids])


def test_the_nearest_noun_is_read_from_the_words():
    tokens = sentences("the dog",
                       "the dogs",
                       "the author near the keys",
                       "the authors that the pilot sees",
                       "the dogs with the old cabinet behind the farmers",
                       "the key of the paintings that the boy likes",
                       "the tall boys near the dogs above the small key")
    assert A.nearest_noun_number(tokens).tolist() == [0, 1, 1, 0, 1, 0, 0]
    with pytest.raises(ValueError, match="row 1 holds no noun"):
        A.nearest_noun_number(sentences("the dog", "the old"))


def test_the_nearest_attractor_split_on_hand_written_and_generated_sentences():
    from qkov.figures import language_agreement as la

    tokens = sentences("the dog near the keys", "the dog near the keys behind the boy",
                       "the dogs that the pilot sees with the boys")
    data = A.AgreementData(tokens=tokens, attention_mask=tokens != 0,
                           labels=torch.tensor([0, 0, 1]))
    assert la.nearest_attractor(data).tolist() == [True, False, False]
    right = torch.tensor([False, True, True])
    assert la.subset_accuracy(right, la.nearest_attractor(data)) == 0.0
    assert la.subset_accuracy(right, ~la.nearest_attractor(data)) == 1.0
    assert la.subset_accuracy(right, torch.zeros(3, dtype=torch.bool)) != \
        la.subset_accuracy(right, torch.zeros(3, dtype=torch.bool))  # NaN: no sentence
    # one attractor among three modifiers, at random: the nearest noun about a third of the time
    one = A.generate(3000, 7, modifiers=3, attractors=1)
    nearest = la.nearest_attractor(one)
    assert 0.3 < nearest.double().mean() < 0.37
    for k, sentence in enumerate(one.sentences(200)):
        words = sentence.split()
        last_noun = [w for w in words if w in NUMBER][-1]
        assert bool(nearest[k]) == (NUMBER[last_noun] != int(one.labels[k]))


def test_the_harder_variant_trains_on_fewer_sentences_with_rare_attractors():
    from qkov.figures import language_agreement as la

    p = la.Parameters(rare_train_sentences=3000, rare_attractor_prob=0.05)
    default = la.training_sentences(p, 1234, la.DEFAULT)
    rare = la.training_sentences(p, 1234, la.RARE)
    assert len(default) == p.train_sentences and len(rare) == 3000
    for data, prob in ((default, 0.5), (rare, 0.05)):
        per_modifier = data.n_attractors.sum() / data.n_modifiers.sum()
        assert abs(float(per_modifier) - prob) < 0.02
        assert set(data.n_modifiers.tolist()) == set(range(p.max_modifiers + 1))
        assert data.tokens.shape[1] == A.width(p.max_modifiers)  # one model reads both
    # sentences in which at most half the nouns carry the subject's number (where the number
    # most nouns carry is not the answer): about 31% by default, about 2% in the variant
    minority = lambda d: float((2 * d.n_attractors >= d.n_modifiers + 1).double().mean())  # noqa: E731
    assert minority(rare) < 0.03 and 0.27 < minority(default) < 0.35
    assert torch.equal(rare.tokens, la.training_sentences(p, 1234, la.RARE).tokens)
    assert not torch.equal(rare.tokens, la.training_sentences(p, 1235, la.RARE).tokens)
    with pytest.raises(ValueError, match="variant"):
        la.training_sentences(p, 1, "hard")
    with pytest.raises(Exception, match="rare_attractor_prob"):
        la.Parameters(rare_attractor_prob=1.5)
    # without the variant a run trains the default one alone
    tiny = dict(seeds=[1], conditions=["matched"], train_sentences=16, test_sentences=4,
                max_modifiers=1, epochs=1, workers=1, progress=False)
    assert {variant for *_, variant in la.runs(la.Parameters(**tiny, rare_attractors=False))} \
        == {la.DEFAULT}


def test_the_per_epoch_measurements_are_those_of_the_final_model():
    """The last epoch's accuracies and nearest-noun split, measured during training, are
    those of the trained model measured again from scratch."""
    from qkov.figures import language_agreement as la

    p = la.Parameters(seeds=[3], conditions=["matched"], train_sentences=96, test_sentences=60,
                      max_modifiers=3, epochs=2, workers=1, progress=False,
                      rare_attractors=False)
    (run,) = la.train_group(p, la.DEFAULT, 3)
    tests = la.held_out_sets(p, 3)
    assert run["accuracy_by_epoch"].shape == (2, 4) and run["nearest_by_epoch"].shape == (2, 2)
    assert [run["evaluation"][a]["accuracy"] for a in sorted(tests)] == \
        run["accuracy_by_epoch"][-1].tolist()
    nearest = la.nearest_attractor(tests[1])
    assert run["nearest_sentences"] == (int(nearest.sum()), int((~nearest).sum()))
    # the split's two shares, weighted by their sentences, give the one-attractor accuracy
    near, other = run["nearest_by_epoch"][-1]
    n_near, n_other = run["nearest_sentences"]
    assert (near * n_near + other * n_other) / (n_near + n_other) == \
        pytest.approx(run["accuracy_by_epoch"][-1, 1])


def test_worst_and_solved_epochs_and_paired_gaps_on_made_up_runs():
    import numpy as np

    from qkov.figures import language_agreement as la

    def run(condition, seed, last):
        curve = np.zeros((4, 3))
        curve[:, -1] = last
        return {"variant": la.DEFAULT, "condition": condition, "seed": seed,
                "accuracy_by_epoch": curve, "nearest_by_epoch": np.full((4, 2), 0.5),
                "evaluation": {0: {}, 1: {}, 2: {}}}

    results = [run("matched", 1, [0.5, 0.1, 0.9, 1.0]), run("matched", 2, [0.5, 0.3, 0.97, 1.0]),
               run("faster QK", 1, [0.4, 0.6, 0.7, 0.8]), run("faster QK", 2, [0.2, 0.6, 0.7, 0.8])]
    assert la.worst_epoch(results, "matched") == 2 and la.worst_epoch(results, "faster QK") == 1
    assert la.solved_epoch(results, "matched") == 4  # 0.935 after epoch 3: not yet 0.95
    assert la.solved_epoch(results, "faster QK") is None
    table = la.nearest_noun_table(results)
    assert table[0]["attractors_2"] == "0.2 ± 1.3" and table[1]["solved"] == "-"
    records = [{"condition": c, "seed": s, "attractors": a, "accuracy": v + 0.1 * a}
               for c, s, v in (("matched", 1, 0.5), ("matched", 2, 0.6), ("faster QK", 1, 0.7),
                               ("faster QK", 2, 0.9)) for a in (0, 1)]
    mean, half = la.paired_gap(records, "accuracy", "faster QK")
    assert mean == pytest.approx(0.25)  # per seed 0.2 and 0.3
    assert la.paired_gap(records, "accuracy", "faster QK", attractors=1)[0] == pytest.approx(0.25)
    assert half == pytest.approx(12.706 * 0.0707107 / 2 ** 0.5, rel=1e-3)  # t(1) x sd / sqrt(2)


def test_a_run_does_not_depend_on_the_number_of_workers():
    from qkov.figures import language_agreement

    kw = dict(seeds=[1, 2], train_sentences=256, test_sentences=64, max_modifiers=3, epochs=3,
              conditions=["matched", "faster QK"], rare_train_sentences=64)
    one, two = (language_agreement.rows(language_agreement.train(
        language_agreement.Parameters(**kw, workers=w))) for w in (1, 2))
    assert one == two


def test_the_language_figures_share_the_condition_names_and_the_held_out_sets_are_seeded():
    from qkov.figures import language_agreement
    from qkov.language import pipelines

    # one spelling: the real-data figures' two conditions are the agreement figure's first two
    assert pipelines.CONDITIONS == ("matched", "faster QK") == tuple(language_agreement.CONDITIONS)[:2]
    from qkov.language import train

    assert set(language_agreement.CONDITIONS) == {train.MATCHED, train.FASTER_QK,
                                                  train.FASTER_QK_ONLY, train.ALL_FASTER,
                                                  train.SLOW_OV}
    p = language_agreement.Parameters(test_sentences=8, max_modifiers=2)
    sets = language_agreement.held_out_sets(p, 1)
    assert sorted(sets) == [0, 1, 2]
    for attractors, data in sets.items():
        assert (data.n_attractors == attractors).all() and (data.n_modifiers == 2).all()
        assert torch.equal(data.tokens, language_agreement.held_out_sets(p, 1)[attractors].tokens)
