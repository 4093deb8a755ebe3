"""The speed benchmark runs (its numbers are printed, never asserted: machines are noisy)."""

import importlib.util
import json

import pytest

from conftest import REPO


def test_benchmark_runs_and_prints_the_ratio(capsys, tmp_path):
    spec = importlib.util.spec_from_file_location(
        "trainer_speed", REPO / "benchmarks" / "trainer_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out_file = tmp_path / "speed.json"
    assert bench.main(["--trainer-steps", "10", "--baseline-steps", "1", "--rounds", "1",
                       "--output", str(out_file)]) == 0
    out = capsys.readouterr().out
    for ratio in ("(b)/(a)", "(c)/(a)"):
        assert f"speed-up {ratio}" in out
    for part in ("sampling the data", "laying it out", "ensemble math", "Python and dispatch"):
        assert out.count(part) == 1
    record = json.loads(out_file.read_text())
    assert record["speedup_workers"] == pytest.approx(
        record["trainer_workers_model_steps_per_s"] / record["baseline_model_steps_per_s"])
    assert record["speedup_one_process"] == pytest.approx(
        record["trainer_model_steps_per_s"] / record["baseline_model_steps_per_s"])
    assert record["step"]["operators_per_step"] > 10  # the step's batched operators


def test_the_committed_record_is_a_full_benchmark_run():
    """The book shows benchmarks/results/trainer-speed.json: it must be a real, full run."""
    record = json.loads((REPO / "benchmarks" / "results" / "trainer-speed.json").read_text())
    assert record["trainer_steps"] >= 1000 and record["baseline_steps"] >= 25
    assert record["rounds"] >= 3 and record["workload"].startswith("paper Fig. 2: 40 runs")
    assert "trainer_workers_model_steps_per_s" in record and "step" in record
    assert record["step"]["members"] == 40 and record["step"]["operators_per_step"] > 10


def test_baseline_and_library_models_compute_the_same_function():
    """The baseline is a fair comparison: same model, same logits, for every class."""
    import torch
    from torch import nn

    from qkov.circuits import PARAMETERIZATIONS
    from qkov.synthetic import models, tasks

    spec = importlib.util.spec_from_file_location(
        "trainer_speed", REPO / "benchmarks" / "trainer_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    batch = tasks.sample_tokens(torch.Generator().manual_seed(0), 16, 64)
    x = nn.functional.one_hot(batch.inputs, 50).float()
    for p in PARAMETERIZATIONS:
        net = bench.Baseline(models.ModelSpec(p))
        if p[0] == "F":
            params = {"W_Q": net.query.weight, "W_K": net.key.weight}
        else:
            params = {"W_QK": net.key_query.weight}  # score(q, v) = x_q . (W x_v) = W[q, v]
        if p[2] == "F":
            params |= {"W_V": net.value.weight, "W_O": net.prediction.weight}
        else:
            params |= {"W_OV": net.prediction.weight}
        params["b"] = torch.zeros(50)
        with torch.no_grad():
            ours, _ = models.dense_logits(params, batch.inputs)
            assert torch.allclose(net(x), ours, atol=1e-5), p


def test_evaluation_benchmark_runs_and_prints_the_ratio(capsys):
    spec = importlib.util.spec_from_file_location(
        "evaluation_speed", REPO / "benchmarks" / "evaluation_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--eval-batches", "2", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "speed-up (b)/(a)" in out
    assert "SharpeningProbe" in out and "off by up to" in out
