"""Model-steps per second on the paper Fig. 2 workload: a per-model baseline vs qkov's trainer.

    .venv/bin/python benchmarks/trainer_speed.py [--trainer-steps 1000] [--baseline-steps 25]

Both are measured in this one run, on this machine, side by side, and the ratio is printed:
machines are shared and noisy, so only the ratio means something across machines.

(a) baseline: what notebook-first code does - one model at a time, ``nn.Linear`` layers on
    dense one-hot (B, T-1, 50) tensors, autograd, ``torch.optim.SGD`` with a learning rate
    per circuit; (b) ``qkov.train.train`` on the same 40 runs (8 panels x 5 seeds, batch 32,
    T = 64 or 128) as one batched computation on token counts with hand-written gradients;
    (c) the same split over worker processes (``workers=2``, what the notebooks use).
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import torch
from torch import nn

from qkov import models, paper, tasks
from qkov import train as T

V = tasks.VOCAB


class Baseline(nn.Module):
    """The straightforward model: Linear layers applied to every position."""

    def __init__(self, spec: models.ModelSpec):
        super().__init__()
        self.qk, self.ov = models.circuits(spec.parameterization)
        linear = lambda: nn.Linear(V, V, bias=False)  # noqa: E731
        if self.qk == "factorized":
            self.query, self.key = linear(), linear()
        else:
            self.key_query = linear()
        if self.ov == "factorized":
            self.value = linear()
        self.prediction = linear()

    def forward(self, x):  # x: (B, T-1, V) one-hot
        if self.qk == "factorized":
            query, key = self.query(x[:, -1:]), self.key(x)
        else:
            query, key = x[:, -1:], self.key_query(x)
        attention = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(V), dim=-1)
        h = attention @ x
        if self.ov == "factorized":
            h = self.value(h)
        return self.prediction(h).squeeze(1)

    def circuit_groups(self, lr_qk, lr_ov):
        qk = [p for n, p in self.named_parameters() if n.split(".")[0] in ("query", "key",
                                                                             "key_query")]
        ov = [p for n, p in self.named_parameters() if n.split(".")[0] in ("value",
                                                                            "prediction")]
        return [{"params": qk, "lr": lr_qk}, {"params": ov, "lr": lr_ov}]


def baseline_rate(runs, steps: int) -> float:
    """Model-steps per second, training each run alone for ``steps`` steps."""
    elapsed = 0.0
    for run in runs:
        torch.manual_seed(run.seed)
        model = Baseline(run.model)
        opt = torch.optim.SGD(model.circuit_groups(run.lr_qk, run.lr_ov))
        generator = torch.Generator().manual_seed(run.seed)
        start = time.perf_counter()
        for _ in range(steps):
            batch = tasks.sample_tokens(generator, run.batch_size, run.T)
            x = nn.functional.one_hot(batch.inputs, V).float()
            loss = nn.functional.cross_entropy(model(x), batch.targets)
            opt.zero_grad()
            loss.backward()
            opt.step()
        elapsed += time.perf_counter() - start
    return len(runs) * steps / elapsed


def trainer_rate(runs, steps: int, workers: int = 1) -> float:
    runs = [T.RunConfig(r.name, r.model, r.seed, 1, steps, r.lr_qk, r.lr_ov, r.qk_ramp,
                        r.batch_size, r.T) for r in runs]
    start = time.perf_counter()
    T.train(runs, progress=False, workers=workers)
    return len(runs) * steps / (time.perf_counter() - start)


def flops_per_model_step(run, B: int = 32) -> float:
    """Matrix work of one SGD step of the trainer (counts path), in floating-point ops.

    Collapsed OV: logits, dW_OV, dh (3 products of B x V x V); factorized OV applied as
    W_O (W_V h): 5 such products. The QK circuit touches 4 query rows only (4 x V x V per
    product, negligible). Elementwise work (softmax, scores) is O(B V) and left out.
    """
    products = 3 if run.model.ov == "collapsed" else 5
    return products * 2 * B * V * V


def measured_matmul_gflops(members: int, B: int = 32) -> tuple[float, float]:
    """(batched (members, B, V) x (V, V) matmul, large 2000^2 matmul) throughput in GFLOP/s."""
    def rate(f, flops, repeat):
        f()
        start = time.perf_counter()
        for _ in range(repeat):
            f()
        return flops * repeat / (time.perf_counter() - start) / 1e9

    a, w = torch.randn(members, B, V), torch.randn(members, V, V)
    big = torch.randn(2000, 2000)
    return (rate(lambda: a @ w, 2 * members * B * V * V, 2000),
            rate(lambda: big @ big, 2 * 2000**3, 10))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainer-steps", type=int, default=1000)
    parser.add_argument("--baseline-steps", type=int, default=25)
    parser.add_argument("--workers", type=int, default=2, help="processes for (c)")
    args = parser.parse_args(argv)

    runs = paper.fig2_runs()
    print(f"machine: {platform.platform()}, {torch.get_num_threads()} torch threads, "
          f"torch {torch.__version__}")
    print(f"workload: paper Fig. 2, {len(runs)} runs (8 panels x 5 seeds), batch 32")
    base = baseline_rate(runs, args.baseline_steps)
    single = trainer_rate(runs, args.trainer_steps)
    fast = trainer_rate(runs, args.trainer_steps, workers=args.workers)
    print(f"(a) per-model baseline : {base:10.0f} model-steps/s "
          f"({len(runs)} runs x {args.baseline_steps} steps)")
    print(f"(b) qkov trainer       : {single:10.0f} model-steps/s "
          f"({len(runs)} runs x {args.trainer_steps} steps, one process)")
    print(f"(c) qkov trainer       : {fast:10.0f} model-steps/s "
          f"(the same, split over {args.workers} worker processes)")
    print(f"speed-up (b)/(a)       : {single / base:10.1f}x")
    print(f"speed-up (c)/(a)       : {fast / base:10.1f}x")

    flops = sum(flops_per_model_step(r) for r in runs) / len(runs)
    bmm, gemm = measured_matmul_gflops(len(runs))
    print(f"matrix work per model-step: {flops / 1e6:.3f} MFLOP (mean over the runs)")
    print(f"trainer throughput: {fast * flops / 1e9:.1f} GFLOP/s = "
          f"{100 * fast * flops / 1e9 / bmm:.0f}% of a batched matmul of the same shape "
          f"({bmm:.1f} GFLOP/s), {100 * fast * flops / 1e9 / gemm:.0f}% of a large matmul "
          f"({gemm:.1f} GFLOP/s)")
    total = sum(r.steps for r in runs)
    print(f"paper-scale Fig. 2 without early stopping: {total / 1e6:.2f} M model-steps, "
          f"about {total / fast / 60:.0f} min at this rate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
