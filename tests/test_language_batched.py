"""The batched language trainer (qkov.language.batched) against the per-model loop
(qkov.language.train.train_classifier): the same numbers to float64 rounding for every
optimizer and option the language pipelines use, early stopping that stops and restores,
and its refusals."""

import copy
from dataclasses import replace

import pytest
import torch

from qkov.language.batched import StackedClassifier, Stopping, train_classifiers
from qkov.language.batches import TokenBatch
from qkov.language.models import Decoder, DecoderConfig
from qkov.language.train import TrainingSetup, train_classifier
from qkov.seeding import init_generator

# Weights and losses agree to this after two epochs: products that add in another order
# round differently, by about 1e-16 a step.
ROUNDING = 1e-12


def sentences(rows=150, width=14, vocabulary=40, classes=2, seed=0, empty=0) -> TokenBatch:
    """Right-padded rows of 1..width real tokens (lengths vary, as real sentences'; a full
    row is read at its last token), the label a function of the first token; the first
    ``empty`` rows have no token (their readout attends to itself)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, width + 1, (rows,), generator=g)
    lengths[:empty] = 0
    mask = torch.arange(width)[None] < lengths[:, None]
    tokens = torch.randint(1, vocabulary, (rows, width), generator=g) * mask
    return TokenBatch(tokens, mask, labels=tokens[:, 0] % classes)


def setup(**changes) -> TrainingSetup:
    return TrainingSetup(**{"epochs": 2, "batch_size": 32, "lr": 3e-3, **changes})


AGREEMENT = DecoderConfig(
    vocab_size=40, max_len=14, d_model=8, n_heads=2, d_head=4, d_mlp=0, n_classes=2
)
HATEXPLAIN = replace(
    AGREEMENT, d_head=6, d_mlp=16, attention_bias=True, mask_padding=False, n_classes=3
)
PRE_LN = replace(AGREEMENT, d_mlp=12, n_layers=2, layer_norm="pre", mask_padding=False)
CASES = {
    # real-agreement's and real-sentiment's training: AdamW, cosine, clipping, each batch cut to
    # its longest row, the four conditions' rates, runs with their own seeds
    "agreement": (
        AGREEMENT,
        "first_pad",
        [
            setup(seed=1, trim_padding=True),
            setup(seed=2, trim_padding=True, qk_multiplier=30.0, embedding_multiplier=30.0),
            setup(seed=1, trim_padding=True, lr=3e-3 * 30, qk_multiplier=1.0),
            setup(
                seed=2,
                trim_padding=True,
                lr=3e-3 / 30,
                qk_multiplier=30.0**2,
                embedding_multiplier=30.0**2,
            ),
        ],
    ),
    # the HateXplain pipeline's: biases, an MLP, padding attended (the authors' model), the
    # position embedding at a rate of its own,
    # weight decay and the embedding's own decay, one-cycle, runs trimmed and not
    "hatexplain": (
        HATEXPLAIN,
        "first_pad",
        [
            setup(
                seed=3,
                weight_decay=0.01,
                embedding_weight_decay=0.0,
                embedding_multiplier=10.0,
                position_multiplier=1.0,
                schedule="one_cycle",
                trim_padding=True,
            ),
            setup(
                seed=4,
                weight_decay=0.01,
                schedule="one_cycle",
                grad_clip=None,
                qk_bias=True,
                qk_multiplier=30.0,
            ),
        ],
    ),
    # two pre-LN layers, padding attended, the last token read; SGD with and without momentum
    # beside AdamW in one stack, a constant schedule
    "pre-LN, mixed optimizers": (
        PRE_LN,
        "last",
        [
            setup(seed=5, optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=1e-3),
            setup(seed=6, optimizer="sgd", lr=0.1, schedule="constant", trim_padding=True),
            setup(seed=5, weight_decay=0.1, qk_multiplier=10.0, trim_padding=True),
        ],
    ),
}


def models_for(config, count, dtype=torch.float64):
    return [Decoder(config, generator=init_generator(100 + i)).to(dtype) for i in range(count)]


def largest_difference(a: Decoder, b: Decoder) -> float:
    return max(
        float((p - q).abs().max()) for p, q in zip(a.state_dict().values(), b.state_dict().values())
    )


@pytest.mark.parametrize("case", CASES)
def test_the_batched_trainer_gives_the_per_model_loops_numbers(case):
    config, readout, setups = CASES[case]
    data = sentences(classes=config.n_classes, empty=3 if readout == "first_pad" else 0)
    alone = models_for(config, len(setups))
    stacked = copy.deepcopy(alone)

    def accuracy(model):
        return float(
            (model(data.tokens, data.attention_mask, readout).logits.argmax(-1) == data.labels)
            .double()
            .mean()
        )

    histories = [
        train_classifier(m, data, s, progress=False, readout=readout, eval_fn=accuracy)
        for m, s in zip(alone, setups)
    ]

    def evaluate(stack, runs):
        logits, _, _ = stack.readout(data.tokens, data.attention_mask, readout=readout)
        return [
            {"accuracy": float((row.argmax(-1) == data.labels).double().mean())} for row in logits
        ]

    batched = train_classifiers(stacked, data, setups, readout=readout, evaluate=evaluate)
    for run, (a, b) in enumerate(zip(alone, stacked)):
        assert largest_difference(a, b) < ROUNDING, f"run {run}"
        assert largest_difference(a, copy.deepcopy(models_for(config, len(setups))[run])) > 1e-3
        assert batched[run].loss == pytest.approx(histories[run].loss, abs=ROUNDING)
        assert [e["accuracy"] for e in batched[run].evaluations] == histories[run].eval
        assert batched[run].steps == histories[run].steps and batched[run].ended_by == "cap"


def test_a_runs_numbers_do_not_depend_on_the_runs_that_share_its_stack():
    """Three runs in one stack, and in stacks of one and two (a figure's runs split over
    worker processes): the same weights to the bit."""
    config, readout, setups = CASES["agreement"]
    data = sentences()
    together = models_for(config, 3)
    apart = copy.deepcopy(together)
    train_classifiers(together, data, setups[:3], readout=readout)
    train_classifiers(apart[:1], data, setups[:1], readout=readout)
    train_classifiers(apart[1:], data, setups[1:3], readout=readout)
    for a, b in zip(together, apart):
        assert largest_difference(a, b) == 0


def test_the_stacked_readout_is_the_decoders_forward():
    """Logits and the last layer's attention from the readout position, for every readout,
    with and without a padding mask, for rows shared by every run."""
    for config, readout, _ in CASES.values():
        data = sentences(rows=20, classes=config.n_classes)
        models = models_for(config, 3)
        stack = StackedClassifier.from_decoders(models)
        with torch.no_grad():
            logits, pattern, index = stack.readout(
                data.tokens, data.attention_mask, readout=readout
            )
            for run, model in enumerate(models):
                out = model(data.tokens, data.attention_mask, readout=readout)
                rows = torch.arange(len(data))
                assert torch.equal(index[run], out.readout_index)
                assert torch.allclose(logits[run], out.logits, rtol=0, atol=ROUNDING)
                assert torch.allclose(
                    pattern[run],
                    out.attentions[-1][rows, :, out.readout_index],
                    rtol=0,
                    atol=ROUNDING,
                )


def test_a_run_reads_only_its_own_columns_of_a_wider_batch():
    """A run's rows cut to its own width and padded to a wider batch: what the Decoder
    computes on the cut rows (a full row is read at its own last column, not beyond)."""
    for config, readout, _ in CASES.values():
        data = sentences(rows=12, width=6, classes=config.n_classes)  # several rows are full
        models = models_for(config, 2)
        wide = data.widened(10, config.pad_id)
        with torch.no_grad():
            logits, _, index = StackedClassifier.from_decoders(models).readout(
                torch.stack([wide.tokens] * 2),
                torch.stack([wide.attention_mask] * 2),
                widths=torch.tensor([6, 10]),
                readout=readout,
            )
            for run, rows in ((0, data), (1, wide)):
                out = models[run](rows.tokens, rows.attention_mask, readout=readout)
                assert torch.equal(index[run], out.readout_index)
                assert torch.allclose(logits[run], out.logits, rtol=0, atol=ROUNDING)


def test_a_run_that_stops_improving_stops_and_ends_at_its_best_weights():
    """Planted validation losses: run 0 improves at every evaluation; run 1 is best at its
    second and stops after ``patience`` more; run 2 never improves after its first. A stopped
    run leaves the stack (evaluate sees the others only) and ends with its best weights."""
    data = sentences(rows=128)
    models = models_for(AGREEMENT, 3)
    planted = {
        0: [5, 4, 3, 2, 1, 0.5, 0.4, 0.3],
        1: [5, 1, 2, 3, 4, 5, 6, 7],
        2: [1, 2, 2, 2, 2, 2, 2, 2],
    }
    seen, snapshots = [], {}

    def evaluate(stack, runs):
        seen.append(list(runs))
        found = []
        for slot, run in enumerate(runs):
            count = len([r for r in seen if run in r])
            snapshots[(run, count)] = {
                n: w[slot].detach().clone() for n, w in stack.weights.items()
            }
            found.append({"validation_loss": planted[run][count - 1]})
        return found

    histories = train_classifiers(
        models,
        data,
        [setup(seed=i, epochs=8) for i in range(3)],
        evaluate=evaluate,
        stopping=Stopping(patience=2),
    )
    assert seen == [[0, 1, 2]] * 3 + [[0, 1]] + [[0]] * 4
    assert [h.ended_by for h in histories] == ["cap", "patience", "patience"]
    steps = 4  # per epoch: 128 rows in batches of 32
    assert [h.steps for h in histories] == [8 * steps, 4 * steps, 3 * steps]
    assert [h.best_step for h in histories] == [8 * steps, 2 * steps, 1 * steps]
    assert [len(h.loss) for h in histories] == [8, 4, 3]
    for run, best in ((0, 8), (1, 2), (2, 1)):
        for name, param in models[run].named_parameters():
            assert torch.equal(param, snapshots[(run, best)][name]), (run, name)


def test_an_evaluation_at_the_start_measures_the_initial_weights_and_can_be_the_best():
    """With evaluate_at_start, step 0 is measured on the initial weights; a run no later
    evaluation improves on ends there, with its initial weights."""
    data = sentences(rows=128)
    models = models_for(AGREEMENT, 2)
    initial = [{n: w.detach().clone() for n, w in m.named_parameters()} for m in models]
    planted = {0: [2, 1, 0.5], 1: [1, 2, 3]}
    seen = []

    def evaluate(stack, runs):
        seen.append(list(runs))
        return [{"validation_loss": planted[run][len([r for r in seen if run in r]) - 1]}
                for run in runs]

    histories = train_classifiers(models, data, [setup(seed=i, epochs=2) for i in range(2)],
                                  evaluate=evaluate, evaluate_at_start=True,
                                  stopping=Stopping(patience=2))
    assert [e["step"] for e in histories[0].evaluations] == [0, 4, 8]
    assert [e["epoch"] for e in histories[0].evaluations] == [0, 1, 2]
    assert histories[1].best_step == 0 and histories[1].ended_by == "patience"
    for name, param in models[1].named_parameters():
        assert torch.equal(param, initial[1][name]), name
    with pytest.raises(ValueError, match="evaluate_at_start"):
        train_classifiers(models_for(AGREEMENT, 1), data, [setup()], evaluate_at_start=True)


def test_bad_input_is_refused_before_any_work_naming_what_is_wrong():
    data = sentences()
    models = models_for(AGREEMENT, 2)

    def refused(match, *args, error=ValueError, **kwargs):
        before = [copy.deepcopy(m.state_dict()) for m in models]
        with pytest.raises(error, match=match):
            train_classifiers(*args, **kwargs)
        assert all(
            torch.equal(before[i][k], m.state_dict()[k])
            for i, m in enumerate(models)
            for k in before[i]
        )

    refused("setups: expected one per model", models, data, [setup()])
    refused(r"setups\[1\].batch_size", models, data, [setup(), setup(batch_size=16)])
    refused(r"setups\[0\].accumulation_steps", models, data, [setup(accumulation_steps=2), setup()])
    refused(
        r"models\[1\]: its DecoderConfig differs",
        [models[0], models_for(HATEXPLAIN, 1)[0]],
        data,
        [setup(), setup()],
    )
    refused(
        "one floating-point type",
        [models[0], copy.deepcopy(models[1]).float()],
        data,
        [setup(), setup()],
    )
    refused("eval_every: expected None", models, data, [setup(), setup()], eval_every=0)
    refused(
        "stopping: early stopping needs an evaluate",
        models,
        data,
        [setup(), setup()],
        stopping=Stopping(),
    )
    refused("labels: expected class ids", models, sentences(classes=3), [setup(), setup()])
    with pytest.raises(ValueError, match="Stopping.patience: expected an integer >= 1"):
        Stopping(patience=0)
    with pytest.raises(ValueError, match="Stopping.mode"):
        Stopping(mode="lowest")
    dropout = replace(AGREEMENT, dropout=0.1)
    with pytest.raises(ValueError, match="DecoderConfig.dropout"):
        StackedClassifier.from_decoders(models_for(dropout, 1))
    lm = replace(AGREEMENT, n_classes=None)
    with pytest.raises(ValueError, match="DecoderConfig.n_classes"):
        StackedClassifier.from_decoders(models_for(lm, 1))
    with pytest.raises(ValueError, match="evaluate: expected a list of one dict per active run"):
        train_classifiers(models, data, [setup(), setup()], evaluate=lambda stack, runs: [{}])
    with pytest.raises(KeyError, match="'validation_loss' that stopping reads"):
        train_classifiers(
            models,
            data,
            [setup(), setup()],
            stopping=Stopping(),
            evaluate=lambda stack, runs: [{"loss": 1.0} for _ in runs],
        )


def test_a_diverging_run_is_named_by_its_seed_and_rates():
    """A run whose loss becomes non-finite stops the stack, as it stops the per-model loop,
    and the error names that run's seed and learning rates (a reader's own sweep can reach
    such a rate; the stack's index alone would not say which setting to lower)."""
    config, readout, _ = CASES["agreement"]
    data = sentences()
    setups = [setup(seed=1), setup(seed=7, lr=1e200, grad_clip=None, schedule="constant",
                                   qk_multiplier=2.0)]
    with pytest.raises(FloatingPointError, match=r"seed 7; W_Q and W_K at 2e\+200, the "
                                                 r"embeddings at 1e\+200, the rest at 1e\+200"):
        train_classifiers(models_for(config, 2), data, setups, readout=readout)
