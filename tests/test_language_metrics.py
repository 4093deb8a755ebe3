"""Language metrics on hand-computed cases: attention rollout on a two-layer, three-token
example, attention on a rationale, ERASER comprehensiveness and sufficiency with a model of
known outputs and its rationale ranked by rollout, the heatmap, accuracy, and SQuAD's F1 and exact match."""

import numpy as np
import pytest
import torch

from qkov.language.metrics import (
    accuracy,
    attention_probability_heatmap,
    attention_rollout,
    eraser,
    eraser_rationale,
    exact_match,
    keep_tokens,
    normalize_answer,
    rationale_attention_mass,
    squad_scores,
    token_f1,
    top_fraction_mask,
)


def two_layers():
    """Layer 1: two heads whose mean is [[1,0,0],[.5,.5,0],[.2,.3,.5]]; layer 2: one head."""
    h1 = torch.tensor([[1, 0, 0], [1, 0, 0], [0.4, 0.6, 0]])
    h2 = torch.eye(3)
    layer1 = torch.stack([h1, h2])[None]  # [1, 2, 3, 3]
    layer2 = torch.tensor([[1, 0, 0], [0, 1, 0], [0.5, 0.5, 0]])[None, None]
    return [layer1.double(), layer2.double()]


def test_rollout_by_hand():
    # A1' = (mean + I)/2 = [[1,0,0],[.25,.75,0],[.1,.15,.75]]
    # A2' = [[1,0,0],[0,1,0],[.25,.25,.5]]
    # R = A2' A1': row 2 = .25*[1,0,0] + .25*[.25,.75,0] + .5*[.1,.15,.75]
    expected = torch.tensor([[1, 0, 0], [0.25, 0.75, 0], [0.3625, 0.2625, 0.375]],
                            dtype=torch.float64)
    torch.testing.assert_close(attention_rollout(two_layers())[0], expected)
    # Dropping the flow into position 2 (padding) renormalises each row over 0 and 1.
    mask = torch.tensor([[True, True, False]])
    masked = attention_rollout(two_layers(), mask)[0]
    torch.testing.assert_close(masked[2], torch.tensor([0.58, 0.42, 0.0], dtype=torch.float64))


def test_rationale_mass_by_method():
    rationale = torch.tensor([[True, False, False]])
    readout = torch.tensor([2])
    layers = two_layers()

    def mass(method, mask=None):
        return float(rationale_attention_mass(layers, rationale, readout, mask, method))

    assert mass("rollout") == pytest.approx(0.3625)
    assert mass("rollout", torch.tensor([[True, True, False]])) == pytest.approx(0.58)
    assert mass("layer_mean") == pytest.approx((0.2 + 0.5) / 2)  # layer means at row 2
    assert mass("layer_max") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="method"):
        mass("gradient")
    with pytest.raises(ValueError, match="rationale_mask"):
        rationale_attention_mass(layers, rationale[:, :2], readout)


def known_model(log):
    """p(class 1) = 0.9 if token 7 is among the real tokens, else 0.3; records its inputs."""
    def predict_proba(tokens, mask):
        log.append((tokens.clone(), mask.clone()))
        has = ((tokens == 7) & mask).any(1)
        p1 = torch.where(has, 0.9, 0.3).double()
        return torch.stack([1 - p1, p1], 1)
    return predict_proba


def attending(scores, readout):
    """One layer, one head: the readout row of each example holds its ``scores``, every other
    row attends to itself."""
    B, T = scores.shape
    attention = torch.eye(T, dtype=torch.float64).repeat(B, 1, 1)
    attention[torch.arange(B), readout] = scores.double()
    return [attention[:, None]]


def test_comprehensiveness_and_sufficiency_by_hand():
    tokens = torch.tensor([[3, 7, 4, 5, 0], [7, 3, 0, 0, 0]])
    mask = tokens != 0
    labels = torch.tensor([1, 1])
    readout = torch.tensor([4, 2])  # the first pad position
    attentions = attending(torch.tensor([[0.1, 0.6, 0.2, 0.1, 0.0], [0.3, 0.7, 0.0, 0.0, 0.0]]),
                           readout)
    log = []
    # top 5% of 4 or 2 real tokens is one token: token 7 in row 0, token 3 in row 1
    scores = eraser(known_model(log), tokens, mask, labels, attentions, readout, 0.05)
    torch.testing.assert_close(scores["comprehensiveness"],
                               torch.tensor([0.9 - 0.3, 0.9 - 0.9], dtype=torch.float64))
    torch.testing.assert_close(scores["sufficiency"],
                               torch.tensor([0.9 - 0.9, 0.9 - 0.3], dtype=torch.float64))
    (full, _), (removed_tokens, removed_mask), (kept_tokens, _) = log
    assert torch.equal(full, tokens)
    assert removed_tokens.tolist() == [[3, 4, 5, 0, 0], [7, 0, 0, 0, 0]]  # closed up, re-padded
    assert removed_mask.tolist() == [[True] * 3 + [False] * 2, [True] + [False] * 4]
    assert kept_tokens.tolist() == [[7, 0, 0, 0, 0], [3, 0, 0, 0, 0]]
    # scoring class 0 instead: the signs flip
    comp0 = eraser(known_model([]), tokens, mask, torch.tensor([0, 0]), attentions, readout,
                   0.05)["comprehensiveness"]
    torch.testing.assert_close(comp0, torch.tensor([-0.6, 0.0], dtype=torch.float64))


def test_the_eraser_rationale_is_ranked_by_rollout_not_by_the_layer_mean():
    """Two layers over tokens a, b, c and the readout's pad slot: in layer 2 the readout
    attends to b (0.4) and c (0.6), and in layer 1 both b and c attend to a. The layer mean
    from the readout ranks c first; the rollout, which follows the flow through b and c,
    ranks a first (0.25 against 0.15 for c and 0.1 for b)."""
    tokens = torch.tensor([[7, 3, 4, 0]])
    mask = tokens != 0
    readout = torch.tensor([3])
    layer1 = torch.tensor([[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1]])
    layer2 = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0.4, 0.6, 0]])
    attentions = [layer1.double()[None, None], layer2.double()[None, None]]
    layer_mean = (layer1[3] + layer2[3]) / 2
    assert top_fraction_mask(layer_mean[None], mask).tolist() == [[False, False, True, False]]
    assert eraser_rationale(attentions, readout, mask).tolist() == [[True, False, False, False]]
    # token 7 (a) decides the known model's class 1: removing a costs 0.6, keeping a suffices
    scores = eraser(known_model([]), tokens, mask, torch.tensor([1]), attentions, readout)
    assert scores["comprehensiveness"].item() == pytest.approx(0.6)
    assert scores["sufficiency"].item() == pytest.approx(0.0)


def test_top_fraction_takes_the_ceiling_of_real_tokens_and_breaks_ties_early():
    scores = torch.tensor([[0.5, 0.5, 0.1, 0.9, 0.0, 1.0]])
    mask = torch.tensor([[True] * 5 + [False]])  # the padding's high score does not count
    assert top_fraction_mask(scores, mask, 0.05).tolist() == [[False, False, False, True, False, False]]
    assert top_fraction_mask(scores, mask, 0.4).tolist() == [[True, False, False, True, False, False]]
    assert top_fraction_mask(scores, mask, 1.0).tolist() == [mask[0].tolist()]
    with pytest.raises(ValueError, match="fraction"):
        top_fraction_mask(scores, mask, 0)


def test_keep_tokens_preserves_order():
    tokens = torch.tensor([[1, 2, 3, 4]])
    mask = torch.tensor([[True, True, True, False]])
    new, new_mask = keep_tokens(tokens, mask, torch.tensor([[False, True, True, True]]), pad_id=0)
    assert new.tolist() == [[2, 3, 0, 0]] and new_mask.tolist() == [[True, True, False, False]]


def test_heatmap_counts_percent_of_examples():
    attention = [0.1, 0.9, 1.0, 0.5]
    probability = [0.1, 0.95, 0.5, 0.5]
    heat = attention_probability_heatmap(attention, probability, bins=5)
    expected = np.zeros((5, 5))
    expected[0, 0] = expected[4, 4] = expected[2, 4] = expected[2, 2] = 25.0
    np.testing.assert_array_equal(heat, expected)
    assert attention_probability_heatmap([0.5], [0.5], bins=[0, 0.5, 1]).tolist() == [[0, 0], [0, 100]]
    with pytest.raises(ValueError, match="equal non-empty"):
        attention_probability_heatmap([0.1], [0.1, 0.2])


def test_accuracy():
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    assert accuracy(logits, torch.tensor([0, 1, 1])) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        accuracy(logits, torch.tensor([0, 1]))


def test_squad_normalisation_f1_and_exact_match():
    assert normalize_answer("The  Cat's hat!") == "cats hat"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # an article only as a whole word
    assert exact_match("The Eiffel Tower", "eiffel tower.") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0
    # pred {cat, sat}, gold {cat, sat, down}: P = 1, R = 2/3, F1 = 0.8
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    # a repeated token counts as often as it occurs in both: common {x, x}, P = R = 2/3
    assert token_f1("x x y", "x x x") == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
    assert token_f1("dog", "cat") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("the", "") == 1.0 and token_f1("cat", "") == 0.0
    assert squad_scores("Denver Broncos", ["Broncos", "Denver Broncos", "the broncos"]) == (1.0, 1.0)
    em, f1 = squad_scores("in Denver", ["Denver Broncos"])
    assert em == 0.0 and f1 == pytest.approx(0.5)
    assert squad_scores("", []) == (1.0, 1.0)
