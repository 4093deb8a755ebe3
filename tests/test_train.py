"""The batched trainer: schedules, paired data, ensemble independence, stopping rules."""

import numpy as np
import pytest
import torch

from qkov import models as M
from qkov import train as T


def run(name, parameterization="CACO", seed=1234, **kw):
    model = kw.pop("model", M.ModelSpec(parameterization))
    kw = {"epochs": 3, "batches_per_epoch": 20, **kw}
    return T.RunConfig(name, model, seed, **kw)


def test_a_member_does_not_depend_on_the_rest_of_the_ensemble():
    probe = run("probe", "FAFO", lr_qk=0.2, qk_ramp=(1, 5))
    alone = T.train([probe], progress=False)[0]
    crowd = T.train([
        run("a", "CACO", seed=1), run("b", "CAFO", seed=1234, T=128), probe,
        run("c", "FACO", seed=99, epochs=1), run("d", "FAFO", seed=1234, lr_ov=0.05),
    ], progress=False)[2]
    assert crowd.config.name == "probe"
    assert np.allclose(alone.epoch_losses, crowd.epoch_losses, rtol=0, atol=1e-6)
    for k, v in alone.params.items():
        assert torch.allclose(v, crowd.params[k], atol=1e-6), k


def test_same_seed_means_the_same_data():
    """Two identical models with the same seed train identically; another seed differs."""
    results = T.train([run("x", seed=5), run("y", seed=5), run("z", seed=6)], progress=False)
    assert np.array_equal(results[0].epoch_losses, results[1].epoch_losses)
    assert not np.allclose(results[0].epoch_losses, results[2].epoch_losses)


def test_training_lowers_the_loss():
    result = T.train([run("caco", epochs=10, batches_per_epoch=50, lr_qk=1.0, lr_ov=1.0)],
                     progress=False)[0]
    assert result.epoch_losses[-1] < 0.7 * result.epoch_losses[0]
    assert result.epochs_run == 10 and not result.early_stopped


def test_qk_ramp_is_linear_per_step():
    """With the OV rate at zero, W_QK moves by lr_qk * multiplier(t) * gradient at step t."""
    config = run("ramp", epochs=1, batches_per_epoch=4, lr_ov=0.0, lr_qk=0.1, qk_ramp=(1, 9))
    group = T._Group([config], [0])
    multipliers = (group.ramp_start + group.ramp_slope * torch.arange(4)).tolist()
    assert multipliers == pytest.approx([1, 3, 5, 7])  # start + (end - start) * t / steps
    stream = T.tasks.DataStream(T.derived_seed(1234, "data"), 64, 32)
    for t in range(4):
        batch = stream.batch_at(t)
        counts, classes = batch.counts[None], batch.classes[None]
        before = group.ensemble.params["W_QK"].clone()
        _, grads = group.ensemble.loss_and_grads(counts, classes)
        group.step(t, counts, classes, torch.log(counts))
        moved = group.ensemble.params["W_QK"] - before
        expected = torch.zeros_like(before)
        expected[:, M.QUERY_ROWS] = -0.1 * multipliers[t] * grads["query_rows"]
        assert torch.allclose(moved, expected, atol=1e-7)


def test_early_stop_at_the_mean_epoch_loss():
    fast = run("fast", epochs=50, batches_per_epoch=20, lr_qk=0.5, lr_ov=0.5,
               early_stop_loss=2.0)
    result = T.train([fast, run("slow", epochs=2)], progress=False)[0]
    assert result.early_stopped and result.epochs_run < 50
    assert result.epoch_losses[-1] <= 2.0 and np.all(result.epoch_losses[:-1] > 2.0)


def test_divergence_names_the_run_and_the_step():
    with pytest.raises(T.TrainingDiverged, match=r"run 'boom' diverged: non-finite loss "
                                                 r"from step \d+ \(epoch \d+, batch \d+\)"):
        T.train([run("fine"), run("boom", lr_qk=1e6, lr_ov=1e6)], progress=False)


def test_epoch_callback_sees_each_members_parameters():
    seen = []
    T.train([run("a", epochs=2), run("b", "FAFO", epochs=3)], progress=False,
            epoch_callback=lambda c, p, e: seen.append((c.name, e, sorted(p))))
    assert ("a", 0, ["W_OV", "W_QK", "b"]) in seen and ("b", 3, ["W_K", "W_O", "W_Q", "W_V",
                                                                   "b"]) in seen
    assert len(seen) == 3 + 4


@pytest.mark.parametrize("bad, name", [({"epochs": 0}, "epochs"), ({"lr_qk": -1.0}, "lr_qk"),
                                        ({"batch_size": 2.5}, "batch_size")])
def test_bad_run_configs_name_run_and_parameter(bad, name):
    with pytest.raises(ValueError, match=f"run 'x': parameter '{name}'"):
        run("x", **bad)


def test_derived_seeds_differ_by_purpose_and_are_stable():
    seeds = {T.derived_seed(1234, p) for p in ("data", "init", "eval")}
    assert len(seeds) == 3 and T.derived_seed(1234, "data") == T.derived_seed(1234, "data")


def test_worker_processes_give_the_same_results():
    runs = [run("a", "FAFO", lr_qk=0.2), run("b", "CACO", seed=7), run("c", "FACO", epochs=2),
            run("d", "CAFO", T=128)]
    def callback(config, params, epoch):
        return (config.name, epoch)

    alone = T.train(runs, progress=False, epoch_callback=callback)
    split = T.train(runs, progress=False, epoch_callback=callback, workers=2)
    for x, y in zip(alone, split):
        assert x.config == y.config
        assert np.allclose(x.epoch_losses, y.epoch_losses, rtol=0, atol=1e-6)
        assert x.epoch_callback_values == y.epoch_callback_values
        for k in x.params:
            assert torch.allclose(x.params[k], y.params[k], atol=1e-6)
    with pytest.raises(ValueError, match="parameter 'workers'"):
        T.train(runs, workers=0)


def test_split_balances_the_work():
    runs = [run(f"r{i}", "FAFO" if i % 2 else "CACO", epochs=i + 1) for i in range(7)]
    parts = T._split(runs, 2)
    assert sorted(i for part in parts for i in part) == list(range(7))
    cost = [sum(runs[i].steps * (2 if runs[i].model.ov == "factorized" else 1) for i in part)
            for part in parts]
    assert max(cost) / sum(cost) < 0.6
