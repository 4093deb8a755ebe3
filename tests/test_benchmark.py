"""The speed benchmark runs; its timings are printed, never asserted (machines are noisy)."""

import json
import runpy

import pytest
import torch

from conftest import REPO
from qkov.circuits import PARAMETERIZATIONS
from qkov.synthetic import models, tasks

BENCHMARK = str(REPO / "benchmarks" / "trainer_speed.py")


def test_the_benchmark_runs_and_prints_its_ratios(capsys, tmp_path):
    args = ["--trainer-steps", "10", "--baseline-steps", "1", "--eval-batches", "2", "--rounds", "1"]
    assert runpy.run_path(BENCHMARK)["main"]([*args, "--output", str(tmp_path / "speed.json")]) == 0
    out = capsys.readouterr().out
    r = json.loads((tmp_path / "speed.json").read_text())
    assert "aten::" in out and out.endswith(json.dumps(r, indent=2) + "\n")  # the profile, the record
    assert r["speedup_workers"] == pytest.approx(r["trainer_workers_model_steps_per_s"]
                                                 / r["baseline_model_steps_per_s"])
    assert r["speedup_probe"] == pytest.approx(r["direct_ms"] / r["probe_ms"])


@pytest.mark.parametrize("parameterization", PARAMETERIZATIONS)
def test_the_baseline_computes_the_library_model(parameterization):
    """A fair comparison: (a)'s model computes the library's logits."""
    qk, ov, model = runpy.run_path(BENCHMARK)["baseline"](models.ModelConfig(parameterization))
    weights = {name: layer.weight for name, layer in (*qk.items(), *ov.items())}
    batch = tasks.sample_tokens(torch.Generator().manual_seed(0), 16, 64)
    with torch.no_grad():
        ours = models.dense_logits(weights | {"b": torch.zeros(50)}, batch.inputs)[0]
        assert torch.allclose(model(torch.nn.functional.one_hot(batch.inputs, 50).float()), ours, atol=1e-5)


def test_the_language_benchmark_runs_and_prints_its_ratios(capsys, tmp_path):
    script = runpy.run_path(str(REPO / "benchmarks" / "language_speed.py"))
    args = ["--steps", "2", "--loop-steps", "1", "--loop-runs", "2", "--rounds", "1",
            "--workers", "1", "--models", "real-agreement"]
    assert script["main"]([*args, "--output", str(tmp_path / "speed.json")]) == 0
    r = json.loads((tmp_path / "speed.json").read_text())
    assert capsys.readouterr().out.endswith(json.dumps(r, indent=2) + "\n")
    (result,) = r["results"]
    assert result["model"] == "real-agreement" and result["runs"] == 54  # 60 runs, 6 shared
    assert result["speedup"] == pytest.approx(result["batched_examples_per_s"]
                                              / result["loop_examples_per_s"], rel=0.01)
    assert 0 < result["bmm_fraction"] and result["mean_batch_width"] > 1
