"""The speed benchmark runs (its numbers are printed, never asserted: machines are noisy)."""

import importlib.util
import json

import pytest

from conftest import REPO


def benchmark(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_runs_prints_the_ratio_and_writes_its_record(capsys, tmp_path):
    """A tiny run writes the record the book shows (benchmarks/results/trainer-speed.json
    is this file from a full run): what was run, the rates and the ratios between them."""
    bench = benchmark("trainer_speed")
    out_file = tmp_path / "results" / "speed.json"  # a folder that does not exist yet
    assert bench.main(["--trainer-steps", "10", "--baseline-steps", "1", "--rounds", "1",
                       "--output", str(out_file)]) == 0
    out = capsys.readouterr().out
    for ratio in ("(b)/(a)", "(c)/(a)"):
        assert f"speed-up {ratio}" in out
    for part in ("sampling the data", "laying it out", "ensemble math", "Python and dispatch"):
        assert out.count(part) == 1
    assert out.rstrip().endswith(f"wrote {out_file}")
    record = json.loads(out_file.read_text())
    assert (record["trainer_steps"], record["baseline_steps"], record["rounds"],
            record["workers"]) == (10, 1, 1, 2)
    assert record["workload"] == "paper Fig. 2: 40 runs, batch 32"
    assert record["step"]["members"] == 40 and record["step"]["streams"] == 10
    assert record["speedup_workers"] == pytest.approx(
        record["trainer_workers_model_steps_per_s"] / record["baseline_model_steps_per_s"])
    assert record["speedup_one_process"] == pytest.approx(
        record["trainer_model_steps_per_s"] / record["baseline_model_steps_per_s"])
    assert record["step"]["operators_per_step"] > 10  # the step's batched operators
    step = record["step"]
    assert step["ensemble_math_us"] + step["overhead_us"] == pytest.approx(step["step_us"])
    assert record["fraction_of_batched_matmul"] == pytest.approx(
        record["trainer_gflops"] / record["batched_matmul_gflops"])


def test_baseline_and_library_models_compute_the_same_function():
    """The baseline is a fair comparison: same model, same logits, for every class."""
    import torch
    from torch import nn

    from qkov.circuits import PARAMETERIZATIONS
    from qkov.synthetic import models, tasks

    bench = benchmark("trainer_speed")
    batch = tasks.sample_tokens(torch.Generator().manual_seed(0), 16, 64)
    x = nn.functional.one_hot(batch.inputs, 50).float()
    for p in PARAMETERIZATIONS:
        net = bench.Baseline(models.ModelConfig(p))
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
    bench = benchmark("evaluation_speed")
    assert bench.main(["--eval-batches", "2", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "speed-up (b)/(a)" in out
    assert "SharpeningProbe" in out and "off by up to" in out
