"""The language figures' training shows progress, and a run's cost is told and bounded
before it starts.

language-agreement trains in worker processes; each seed's stack of conditions shows a tqdm
bar of its steps on stderr (one line per worker), and the bar changes nothing: the results are the
same, to the bit, with it and without. Its ``Parameters.work`` counts the run, so a typo
such as ``-p epochs 100000`` is refused before any work unless ``allow_long``; sizes that
would fill the memory before the first step are refused whatever ``allow_long`` says. The
real-data pipelines' training shows its bar too.
"""

import re

import numpy as np
import pytest
import torch

from qkov.checks import ParameterError
from qkov.cost import CEILING_MINUTES
from qkov.figures import language_agreement as la

TINY = {"seeds": [1, 2], "conditions": ["matched", "faster QK"], "train_sentences": 48,
        "test_sentences": 8, "max_modifiers": 2, "epochs": 2, "batch_size": 16,
        "workers": 2}


def same(a, b) -> bool:
    """Equal to the bit: arrays and tensors element by element (NaN where NaN), the rest
    with ==, through dicts and lists."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (np.ndarray, torch.Tensor)):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return type(a) is type(b) and (a == b or (a != a and b != b))


def test_training_shows_a_bar_per_run_on_stderr_and_the_same_results_without(capfd):
    shown = la.train(la.Parameters(**TINY, progress=True))
    err = capfd.readouterr().err
    for seed in TINY["seeds"]:
        assert f"seed {seed}:" in err, err  # written by the worker processes
    assert re.search(r"\d+%\|.*\| \d+/6 \[", err), err  # 2 epochs x 3 steps of 16 sentences

    hidden = la.train(la.Parameters(**TINY, progress=False))
    err = capfd.readouterr().err
    assert "seed 1:" not in err and "%|" not in err, err
    assert same(shown, hidden)
    assert same(la.rows(shown), la.rows(hidden))


def test_the_bar_has_a_line_per_worker_process():
    assert la.bar_position(2) == 0  # in the main process (workers 1, or one run)
    from qkov.processes import map_in_processes

    positions = map_in_processes(la.bar_position, [(3,)] * 9, 3)
    assert set(positions) <= {0, 1, 2}


def test_the_default_run_is_accepted_with_its_estimate_and_a_typo_in_epochs_is_refused():
    p = la.Parameters()
    assert p.cost().startswith("work: 2,996,000 sentence passes (of the default model); "
                               "about 0.55 min on 2 cores")
    with pytest.raises(ParameterError, match="^parameter 'allow_long': work: .*above the "
                       f"ceiling of {CEILING_MINUTES:g} min.*-p allow_long True"):
        la.Parameters(epochs=100000)  # ~4,300 x the default
    long = la.Parameters(epochs=100000, allow_long=True)
    assert long.work().amount > 1000 * p.work().amount
    # four times the epochs: less than four times the work (the final measurement is once)
    assert 3 * p.work().amount < la.Parameters(epochs=80).work().amount < 4 * p.work().amount


def test_the_work_counts_what_the_run_computes():
    base = la.Parameters().work().amount
    # Runs: seeds x conditions (each on both variants).
    assert la.Parameters(seeds=[1], conditions=["matched"]).work().amount == base / 25
    # The harder variant: fewer sentences, no measurement after every epoch.
    alone = la.Parameters(rare_attractors=False).work().amount
    assert 0.3 * alone < base - alone < 0.5 * alone
    assert la.Parameters(rare_train_sentences=2000).work().amount > base
    # Smaller batches: more steps, each with a small fixed cost, over the same sentences.
    assert la.Parameters(batch_size=8).work().amount > 1.15 * base
    assert la.Parameters(batch_size=2000).work().amount < base
    # A wider, deeper model or longer sentences: a pass costs more.
    for kw in ({"d_model": 128}, {"n_layers": 2}, {"n_heads": 8}, {"max_modifiers": 6},
               {"test_sentences": 2000}):
        assert la.Parameters(**kw).work().amount > 1.5 * base, kw


@pytest.mark.parametrize("kw, name", [
    ({"d_model": 4096}, "d_model"), ({"n_layers": 100}, "n_layers"),
    ({"max_modifiers": 50}, "max_modifiers"), ({"n_heads": 64, "d_model": 128}, "n_heads"),
    ({"train_sentences": 10_000_000}, "train_sentences"),
    ({"test_sentences": 1_000_000}, "test_sentences"),
    # each within its bound, together: attention maps of 277 GB for one held-out set
    ({"test_sentences": 100_000, "max_modifiers": 20, "n_heads": 32, "d_model": 64},
     "test_sentences"),
    ({"batch_size": 100_000, "train_sentences": 100_000, "max_modifiers": 20, "n_heads": 32,
      "d_model": 64}, "batch_size"),
])
def test_sizes_that_would_fill_the_memory_are_refused_even_with_allow_long(kw, name):
    with pytest.raises(ParameterError, match=f"^parameter '{name}'"):
        la.Parameters(**kw, allow_long=True)


def test_the_real_data_pipelines_show_their_bars(tmp_path, capfd):
    from test_language_data import write_agreement
    from test_language_pipelines import notebook_code

    from qkov.language.batches import TokenBatch
    from qkov.language.models import Decoder, DecoderConfig
    from qkov.language.train import TrainingSetup, train_language_model

    # language-sva and language-hatexplain: qkov.language.pipelines.run_classifier
    notebook_code("language-sva", agreement_tsv=str(write_agreement(tmp_path / "agr.tsv")),
                  train_fraction=0.5, seeds=[1234], epochs=1, d_model=8, n_heads=2, d_head=4,
                  device="cpu", artifacts_dir=str(tmp_path / "out"))  # progress by default
    err = capfd.readouterr().err
    assert err.count("training:") >= 2 and "step" in err, err  # matched and faster QK
    # language-squad: train_language_model
    tokens = torch.tensor([[1, 3, 2, 3]] * 8)
    data = TokenBatch(tokens=tokens, attention_mask=torch.ones_like(tokens, dtype=torch.bool),
                      loss_mask=torch.tensor([[False, False, False, True]] * 8))
    model = Decoder(DecoderConfig(vocab_size=5, max_len=4, d_model=8, n_heads=2, d_head=4,
                                  d_mlp=8), generator=torch.Generator().manual_seed(0))
    train_language_model(model, data, TrainingSetup(epochs=1, batch_size=4), desc="squad run")
    assert "squad run:" in capfd.readouterr().err
