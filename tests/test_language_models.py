"""The language decoder: shapes, masks, readouts, parameter groups by circuit, optimizers,
schedules and the training loop."""

import math

import pytest
import torch
import torch.nn.functional as F

from qkov import seeding
from qkov.language.batches import TokenBatch
from qkov.language.models import (
    Decoder,
    DecoderConfig,
    circuit_of,
    make_optimizer,
    make_schedule,
    parameter_groups,
    readout_positions,
)
from qkov.language.train import (
    TrainingSetup,
    answer_loss,
    resolve_device,
    train_classifier,
    train_language_model,
)

V, T = 11, 6


def decoder(**kw):
    config = DecoderConfig(**{"vocab_size": V, "max_len": 8, "d_model": 8, "n_heads": 2,
                              "d_head": 4, "d_mlp": 16, **kw})
    return Decoder(config, generator=seeding.init_generator(7))


def sample(lengths=(6, 3, 1)):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, V, (len(lengths), T), generator=g)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    return tokens.masked_fill(~mask, 0), mask


@pytest.mark.parametrize("field, value", [("d_model", 0), ("n_heads", 1.5), ("d_mlp", -1),
                                          ("layer_norm", "post"), ("n_classes", 1),
                                          ("pad_id", 11), ("residual", 1)])
def test_a_bad_config_field_is_named(field, value):
    with pytest.raises(ValueError, match=f"DecoderConfig.{field}"):
        DecoderConfig(vocab_size=V, max_len=8, **{field: value})


@pytest.mark.parametrize("kw", [{}, {"d_mlp": 0}, {"layer_norm": "pre", "n_layers": 3},
                                {"residual": False}])
def test_shapes_and_attention_rows(kw):
    tokens, mask = sample()
    lm = decoder(**kw)(tokens, mask)
    assert lm.logits.shape == (3, T, V) and lm.readout_index is None
    assert len(lm.attentions) == kw.get("n_layers", 1)
    for pattern in lm.attentions:
        assert pattern.shape == (3, 2, T, T)
        torch.testing.assert_close(pattern.sum(-1), torch.ones(3, 2, T))
        assert (pattern.triu(1) == 0).all()  # causal
    classifier = decoder(n_classes=3, **kw)(tokens, mask)
    assert classifier.logits.shape == (3, 3)


def test_padding_keys_get_no_attention_and_the_pad_readout_sees_only_real_tokens():
    tokens, mask = sample()
    out = decoder(n_classes=2)(tokens, mask, readout="first_pad")
    pattern = out.attentions[0]
    # every query that has a real key before it puts nothing on padding keys
    assert (pattern[1][:, :, 3:] == 0).all() and (pattern[2][:, :, 1:] == 0).all()
    assert out.readout_index.tolist() == [5, 3, 1]  # row 0 has no pad: its last position


def test_readout_positions():
    mask = torch.tensor([[True, True, False], [True, True, True]])
    assert readout_positions(mask, "first_pad").tolist() == [2, 2]
    assert readout_positions(mask, "last").tolist() == [1, 2]
    with pytest.raises(ValueError, match="readout"):
        readout_positions(mask, "middle")


def test_a_classifier_ignores_extra_padding_and_what_follows_the_readout():
    tokens, mask = sample((4, 2))
    model = decoder(n_classes=2)
    base = model(tokens, mask).logits
    wider = model(F.pad(tokens, (0, 2)), F.pad(mask, (0, 2))).logits
    torch.testing.assert_close(base, wider)
    scribbled = tokens.clone()
    scribbled[:, 5] = 9  # after every row's first pad
    torch.testing.assert_close(model(scribbled, mask).logits, base)


def test_the_lm_head_read_at_one_position_is_that_row_of_the_full_logits():
    tokens, mask = sample()
    model = decoder()
    full = model(tokens, mask).logits
    last = model(tokens, mask, readout="last")
    assert last.logits.shape == (3, V) and last.readout_index.tolist() == [5, 2, 0]
    torch.testing.assert_close(last.logits, full[torch.arange(3), last.readout_index])


def test_the_lm_head_is_causal():
    tokens, mask = sample((6,))
    model = decoder()
    changed = tokens.clone()
    changed[0, 4] = (changed[0, 4] % (V - 1)) + 1
    a, b = model(tokens, mask).logits, model(changed, mask).logits
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_bad_inputs_are_named():
    model = decoder()
    tokens, mask = sample()
    with pytest.raises(ValueError, match="tokens"):
        model(tokens.float(), mask)
    with pytest.raises(ValueError, match="attention_mask"):
        model(tokens, mask.long())
    with pytest.raises(ValueError, match="max_len"):
        model(torch.ones(1, 9, dtype=torch.long), torch.ones(1, 9, dtype=torch.bool))


def test_initialisation_is_seeded_and_embedding_init_is_used():
    a, b = decoder(), decoder()
    for (name, x), (_, y) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(x, y), name
    vectors = torch.arange(V * 8, dtype=torch.float64).reshape(V, 8)
    model = Decoder(DecoderConfig(vocab_size=V, max_len=8, d_model=8), embedding_init=vectors)
    assert torch.equal(model.token_embedding.weight, vectors.float())
    with pytest.raises(ValueError, match="embedding_init"):
        Decoder(DecoderConfig(vocab_size=V, max_len=8, d_model=8), embedding_init=vectors[:, :4])


@pytest.mark.parametrize("kw", [{}, {"layer_norm": "pre", "n_layers": 2}, {"d_mlp": 0}])
def test_parameter_groups_hold_every_parameter_once_at_its_circuits_rate(kw):
    model = decoder(n_classes=2, **kw)
    groups = parameter_groups(model, base_lr=0.01, qk_multiplier=30, embedding_multiplier=5,
                              weight_decay=0.1)
    grouped = [id(p) for g in groups for p in g["params"]]
    assert sorted(grouped) == sorted(id(p) for p in model.parameters())
    assert len(grouped) == len(set(grouped))
    by_circuit = {g["circuit"]: g for g in groups}
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[id(p)].rsplit(".", 1)[-1] for p in by_circuit["qk"]["params"]} == {"W_Q", "W_K"}
    assert len(by_circuit["qk"]["params"]) == 2 * kw.get("n_layers", 1)
    assert {names[id(p)] for p in by_circuit["embedding"]["params"]} == {
        "token_embedding.weight", "position_embedding.weight"}
    assert by_circuit["qk"]["lr"] == pytest.approx(0.3)
    assert by_circuit["embedding"]["lr"] == pytest.approx(0.05)
    assert by_circuit["other"]["lr"] == pytest.approx(0.01)
    assert all(g["weight_decay"] == 0.1 for g in groups)
    assert circuit_of("layers.0.attn.W_V") == "other"


def test_one_sgd_step_moves_qk_by_the_multiplier():
    """Same initialisation, same batch: with plain SGD the faster-QK step on W_Q, W_K (and
    the embeddings) is the multiplier times the matched step; every other step is equal."""
    tokens, mask = sample()
    labels = torch.tensor([0, 1, 1])
    steps = {}
    for multiplier in (1.0, 10.0):
        model = decoder(n_classes=2).double()  # float64: the steps' differences are exact enough
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        optimizer = make_optimizer(model, "sgd", lr=0.1, qk_multiplier=multiplier,
                                   embedding_multiplier=multiplier)
        F.cross_entropy(model(tokens, mask).logits, labels).backward()
        optimizer.step()
        steps[multiplier] = {n: p.detach() - before[n] for n, p in model.named_parameters()}
    for name, step in steps[1.0].items():
        factor = 10.0 if circuit_of(name) in ("qk", "embedding") else 1.0
        torch.testing.assert_close(steps[10.0][name], factor * step, rtol=1e-9, atol=1e-15)
    assert steps[1.0]["layers.0.attn.W_Q"].abs().max() > 0


def test_optimizer_kinds_and_errors():
    model = decoder()
    assert isinstance(make_optimizer(model, "adamw", lr=1e-3), torch.optim.AdamW)
    sgd = make_optimizer(model, "sgd", lr=1e-3, momentum=0.99)
    assert sgd.param_groups[0]["momentum"] == 0.99
    with pytest.raises(ValueError, match="optimizer kind"):
        make_optimizer(model, "adam", lr=1e-3)
    with pytest.raises(ValueError, match="qk_multiplier"):
        make_optimizer(model, lr=1e-3, qk_multiplier=0)
    with pytest.raises(ValueError, match="momentum"):
        make_optimizer(model, "sgd", lr=1e-3, momentum=1.0)


@pytest.mark.parametrize("kind", ["cosine", "one_cycle", "constant"])
def test_schedules_keep_the_groups_ratios(kind):
    model = decoder()
    optimizer = make_optimizer(model, "sgd", lr=0.1, qk_multiplier=20, embedding_multiplier=3)
    schedule = make_schedule(optimizer, kind, total_steps=20, warmup_fraction=0.2)
    seen = []
    for _ in range(20):
        lrs = {g["circuit"]: g["lr"] for g in optimizer.param_groups}
        assert lrs["qk"] == pytest.approx(20 * lrs["other"])
        assert lrs["embedding"] == pytest.approx(3 * lrs["other"])
        seen.append(lrs["other"])
        optimizer.step()
        schedule.step()
    peak = max(seen)
    assert peak == pytest.approx(0.1) and seen.index(peak) == 4  # after 4 warmup steps
    assert seen[0] < peak
    if kind == "constant":
        assert seen[-1] == pytest.approx(0.1)
    else:
        assert seen[-1] < 0.01 and all(a >= b for a, b in zip(seen[4:], seen[5:]))
    with pytest.raises(ValueError, match="schedule"):
        make_schedule(optimizer, "linear", total_steps=10)
    with pytest.raises(ValueError, match="warmup_fraction"):
        make_schedule(optimizer, kind, total_steps=10, warmup_fraction=1.0)


# --- training -----------------------------------------------------------------------------


def parity_data(n=256, seed=0):
    """Label: whether token 1 occurs in the sequence (attention must find it)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(2, V, (n, T), generator=g)
    labels = torch.randint(0, 2, (n,), generator=g)
    where = torch.randint(0, T - 1, (n,), generator=g)
    tokens[labels == 1, where[labels == 1]] = 1
    mask = torch.ones(n, T, dtype=torch.bool)
    mask[:, -1] = False
    return TokenBatch(tokens=tokens.masked_fill(~mask, 0), attention_mask=mask, labels=labels)


def test_training_setup_names_a_bad_field():
    for field, value in [("optimizer", "adam"), ("lr", 0), ("epochs", 0), ("schedule", "step"),
                         ("grad_clip", -1.0), ("momentum", 1.0), ("seed", -1)]:
        with pytest.raises(ValueError, match=f"TrainingSetup.{field}"):
            TrainingSetup(**{field: value})


def test_train_classifier_learns_and_is_deterministic_on_cpu():
    data, test = parity_data(128), parity_data(200, seed=1)
    setup = TrainingSetup(lr=1e-2, epochs=10, batch_size=32, qk_multiplier=10,
                          embedding_multiplier=10, seed=3)
    runs = []
    for _ in range(2):
        model = decoder(n_classes=2)
        history = train_classifier(
            model, data, setup, device="cpu", progress=False,
            eval_fn=lambda m: float((m(test.tokens, test.attention_mask).logits.argmax(-1)
                                     == test.labels).double().mean()))
        runs.append((history, model))
    (h1, m1), (h2, m2) = runs
    assert h1.loss == h2.loss and h1.eval == h2.eval
    assert h1.steps == 10 * 4 and len(h1.loss) == 10 and h1.device == "cpu"
    assert h1.loss[-1] < 0.5 * h1.loss[0]
    assert h1.eval[-1] > 0.9


def test_train_classifier_rejects_what_it_cannot_train():
    data = parity_data(8)
    with pytest.raises(ValueError, match="classifier"):
        train_classifier(decoder(), data, TrainingSetup(), progress=False)
    with pytest.raises(ValueError, match="labels"):
        train_classifier(decoder(n_classes=2),
                         TokenBatch(tokens=data.tokens, attention_mask=data.attention_mask),
                         TrainingSetup(), progress=False)
    bad = TokenBatch(tokens=data.tokens, attention_mask=data.attention_mask,
                     labels=torch.full((8,), 2))
    with pytest.raises(ValueError, match=r"labels: expected class ids in \[0, 2\)"):
        train_classifier(decoder(n_classes=2), bad, TrainingSetup(), progress=False)


def test_answer_loss_counts_only_the_marked_tokens():
    tokens, mask = sample((6, 5))
    loss_mask = torch.zeros_like(mask)
    loss_mask[0, 4:] = True
    loss_mask[1, 3] = True
    batch = TokenBatch(tokens=tokens, attention_mask=mask, loss_mask=loss_mask)
    model = decoder()
    logits = model(tokens, mask).logits
    expected = F.cross_entropy(torch.stack([logits[0, 3], logits[0, 4], logits[1, 2]]),
                               torch.stack([tokens[0, 4], tokens[0, 5], tokens[1, 3]]))
    torch.testing.assert_close(answer_loss(model, batch), expected)


def test_train_language_model_learns_to_copy_the_answer():
    """Prompt "q x SEP" with answer x: the loss on the answer falls."""
    g = torch.Generator().manual_seed(0)
    n = 64
    x = torch.randint(3, V, (n,), generator=g)
    tokens = torch.stack([torch.full((n,), 1), x, torch.full((n,), 2), x], 1)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    loss_mask = torch.zeros_like(mask)
    loss_mask[:, 3] = True
    data = TokenBatch(tokens=tokens, attention_mask=mask, loss_mask=loss_mask)
    history = train_language_model(decoder(), data, TrainingSetup(lr=3e-2, epochs=30,
                                                                   batch_size=16),
                                   progress=False)
    assert history.loss[-1] < 0.2 * history.loss[0], history.loss
    with pytest.raises(ValueError, match="loss_mask"):
        train_language_model(decoder(), TokenBatch(tokens=tokens, attention_mask=mask),
                             TrainingSetup(), progress=False)


def test_devices(monkeypatch):
    assert resolve_device("cpu").type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto").type == "cpu"
    with pytest.raises(ValueError, match="cuda"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="device"):
        resolve_device("gpu")


def test_token_batches_check_their_shapes():
    tokens, mask = sample()
    with pytest.raises(ValueError, match="right-padded"):
        TokenBatch(tokens=tokens, attention_mask=mask.flip(1))
    with pytest.raises(ValueError, match="labels"):
        TokenBatch(tokens=tokens, attention_mask=mask, labels=torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="rationale"):
        TokenBatch(tokens=tokens, attention_mask=mask, rationale=mask[:, :2])
    batch = TokenBatch(tokens=tokens, attention_mask=mask, labels=torch.tensor([0, 1, 2]))
    parts = list(batch.batches(2, torch.Generator().manual_seed(0)))
    assert [len(b) for b in parts] == [2, 1]
    assert sorted(torch.cat([b.labels for b in parts]).tolist()) == [0, 1, 2]
    assert batch.lengths.tolist() == [6, 3, 1]
    assert math.isclose(len(batch.select(slice(0, 2))), 2)


# --- the authors' SQuAD settings: dropout, tied output, label smoothing, accumulation ---------


def copy_task(n=64):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(3, V, (n,), generator=g)
    tokens = torch.stack([torch.full((n,), 1), x, torch.full((n,), 2), x], 1)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    loss_mask = torch.zeros_like(mask)
    loss_mask[:, 3] = True
    return TokenBatch(tokens=tokens, attention_mask=mask, loss_mask=loss_mask)


def test_dropout_acts_in_training_only_and_the_patterns_are_undropped():
    tokens, mask = sample()
    model = decoder(dropout=0.5)
    model.train()
    first, second = model(tokens, mask), model(tokens, mask)
    assert not torch.equal(first.logits, second.logits)
    torch.testing.assert_close(first.attentions[0].sum(-1), torch.ones(3, 2, T))
    model.eval()
    assert torch.equal(model(tokens, mask).logits, model(tokens, mask).logits)
    with pytest.raises(ValueError, match="DecoderConfig.dropout"):
        decoder(dropout=1.0)


def test_a_tied_output_layer_is_the_token_embedding():
    model = decoder(tie_output=True)
    assert model.head.weight is model.token_embedding.weight
    names = [name for name, _ in model.named_parameters()]
    assert "head.weight" not in names and "head.bias" in names
    with pytest.raises(ValueError, match="tie_output"):
        decoder(tie_output=True, n_classes=2)


def test_the_embeddings_can_have_their_own_weight_decay():
    groups = {g["circuit"]: g for g in parameter_groups(decoder(), base_lr=0.1,
                                                          weight_decay=0.05,
                                                          embedding_weight_decay=0.0)}
    assert groups["embedding"]["weight_decay"] == 0 and groups["other"]["weight_decay"] == 0.05


def test_label_smoothing_is_that_of_the_cross_entropy():
    data = copy_task(8)
    model = decoder()
    hidden, _ = model.features(data.tokens, data.attention_mask)
    logits = model.head(hidden[:, 2])
    expected = F.cross_entropy(logits, data.tokens[:, 3], label_smoothing=0.1)
    torch.testing.assert_close(answer_loss(model, data, 0.1), expected)


def test_two_accumulated_batches_make_the_step_of_one_twice_as_large():
    """72 rows: four steps of 16 and a last one of 8, against four of two batches of 8 and a
    last group of one (weighted as a whole step, as the batch of 8 is)."""
    data = copy_task(72)
    runs = {}
    for batch_size, accumulation in ((16, 1), (8, 2)):
        model = decoder().double()
        setup = TrainingSetup(lr=1e-2, epochs=2, batch_size=batch_size, seed=3,
                              accumulation_steps=accumulation, schedule="constant",
                              warmup_fraction=0.0)
        history = train_language_model(model, data, setup, progress=False)
        runs[accumulation] = (model, history)
    assert runs[1][1].steps == runs[2][1].steps == 10
    assert runs[1][1].loss == pytest.approx(runs[2][1].loss)
    for (name, a), b in zip(runs[1][0].named_parameters(), runs[2][0].parameters()):
        torch.testing.assert_close(a, b, msg=name)
    with pytest.raises(ValueError, match="accumulation_steps"):
        TrainingSetup(accumulation_steps=0)


def test_attention_biases_start_at_zero_and_learn_at_the_base_rate():
    model = decoder(attention_bias=True)
    biases = {name: p for name, p in model.named_parameters() if name.split(".")[-1] in
              ("b_Q", "b_K", "b_V", "b_O")}
    assert len(biases) == 4 and all(not p.any() for p in biases.values())
    assert {circuit_of(name) for name in biases} == {"other"}
    tokens, mask = sample()
    model(tokens, mask).logits.sum().backward()
    assert biases["layers.0.attn.b_V"].grad.abs().sum() > 0
    # the weights are drawn as without biases
    plain = decoder()
    torch.testing.assert_close(plain.layers[0].attn.W_Q, model.layers[0].attn.W_Q)
