"""Model-steps per second on the paper Fig. 2 workload: a per-model baseline vs qkov's trainer.

    .venv/bin/python benchmarks/trainer_speed.py [--trainer-steps 1000] [--baseline-steps 25]
                              [--rounds 3] [--output benchmarks/results/trainer-speed.json]

Everything is measured in this one run, on this machine, side by side, and the ratios are
printed: machines are shared and noisy, so only the ratios mean something across machines.

(a) baseline: what notebook-first code does - one model at a time, ``nn.Linear`` layers on
    dense one-hot (B, T-1, 50) tensors, autograd, ``torch.optim.SGD`` with a learning rate
    per circuit; (b) ``qkov.synthetic.train.train`` on the same 40 runs (8 panels x 5 seeds,
    batch 32, T = 64 or 128) as one ensemble on token counts with hand-written gradients, in
    one process; (c) the same split over worker processes (what the notebooks use).

Then one training step of (b) is taken apart: drawing the data, laying it out, and the step
itself - the time inside PyTorch's operators ("ensemble math", with the number of PyTorch
operators per step, from torch.profiler) and the rest ("Python and dispatch overhead") -
and the trainer's matrix throughput is set against a batched matmul of the same shape.
``--output`` writes all of it as JSON; the book's reproducibility page shows that file
(benchmarks/results/trainer-speed.json), so no number there is typed by hand.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import time
from pathlib import Path

import torch
from torch import nn

from qkov import seeding, sets
from qkov.figures import paper_fig2
from qkov.synthetic import models, tasks
from qkov.synthetic import train as trainer

V = tasks.VOCAB


class Baseline(nn.Module):
    """The straightforward model: Linear layers applied to every position."""

    def __init__(self, config: models.ModelConfig):
        super().__init__()
        self.qk, self.ov = models.circuits(config.parameterization)
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


def shortened(runs, steps: int):
    """The runs, each for exactly ``steps`` steps (one epoch, no early stop)."""
    return [trainer.RunConfig(r.name, r.model, r.seed, 1, steps, r.lr_qk, r.lr_ov, r.qk_ramp,
                        r.batch_size, r.T) for r in runs]


def trainer_rate(runs, steps: int, workers: int = 1) -> float:
    runs = shortened(runs, steps)
    start = time.perf_counter()
    trainer.train(runs, progress=False, workers=workers)
    return len(runs) * steps / (time.perf_counter() - start)


def flops_per_model_step(run, B: int = 32) -> float:
    """Matrix work of one SGD step of the trainer (counts path), in floating-point ops.

    Products of B x V x V: logits, dLoss/dh and the W_O update for every model; a
    factorized OV circuit adds W_V h, W_V^T dh and the W_V update. The QK circuit touches
    the 4 query rows only (4 x V x V per product, negligible); elementwise work is left out.
    """
    products = 3 if run.model.ov == "collapsed" else 6
    return products * 2 * B * V * V


def step_breakdown(runs, steps: int = 200) -> dict:
    """Where one step of the one-process trainer goes, per step of all ``runs`` together."""
    runs = shortened(runs, steps)
    chunk = tasks.DataStream.CHUNK
    keys = list(dict.fromkeys(r.stream_key for r in runs))
    streams = [tasks.DataStream(seeding.derived_seed(s, "data"), t, b, pc, cut)
               for s, t, b, pc, cut in keys]
    group = trainer._Group(runs, list(range(len(runs))))
    member_streams = [keys.index(c.stream_key) for c in group.configs]

    start = time.perf_counter()
    drawn = [[s.chunk_at(k) for s in streams] for k in range(0, steps, chunk)]
    sampling = time.perf_counter() - start
    start = time.perf_counter()
    for j, part in enumerate(drawn):
        group.load_chunk(j * chunk, part, member_streams)
    layout = time.perf_counter() - start

    group.load_chunk(0, drawn[0], member_streams)
    for k in range(chunk):  # warm up
        group.step(k)
    walls = []  # a chunk's steps, the quickest of five passes (noise only ever adds time)
    for _ in range(5):
        start = time.perf_counter()
        for k in range(chunk):
            group.step(k)
        walls.append((time.perf_counter() - start) / chunk)
    wall = min(walls)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for k in range(chunk):
            group.step(k)
        profiled = time.perf_counter() - start
    # Top-level operators only (their children are inside their time): what a step calls.
    top = [e for e in prof.events() if e.cpu_parent is None and e.name.startswith("aten::")]
    # The share of the time inside PyTorch's operators (the profiler slows the pass it
    # watches: its share, applied to the quick pass).
    inside = wall * min(sum(e.cpu_time_total for e in top) / 1e6 / profiled, 1.0)
    return {
        "sampling_us": 1e6 * sampling / steps,
        "layout_us": 1e6 * layout / steps,
        "step_us": 1e6 * wall,
        "ensemble_math_us": 1e6 * inside,
        "overhead_us": 1e6 * (wall - inside),
        "operators_per_step": len(top) / chunk,
        "members": len(runs),
        "streams": len(streams),
    }


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
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--output", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    for name in ("trainer_steps", "baseline_steps", "workers", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")

    runs = paper_fig2.runs()
    machine = (f"{platform.platform()}, {torch.get_num_threads()} torch threads, "
               f"torch {torch.__version__}")
    print(f"machine: {machine}")
    print(f"workload: paper Fig. 2, {len(runs)} runs (8 panels x 5 seeds), batch 32")
    # Interleaved rounds, best of each: the machine's speed drifts, and a drift between
    # measuring (a) and (b) would otherwise show up in their ratio.
    steps, workers = args.trainer_steps, args.workers
    rates = [(baseline_rate(runs, args.baseline_steps), trainer_rate(runs, steps),
              trainer_rate(runs, steps, workers=workers))
             for _ in range(args.rounds)]
    base, single, fast = (max(r[i] for r in rates) for i in range(3))
    print(f"best of {args.rounds} interleaved rounds:")
    print(f"(a)  per-model baseline : {base:10.0f} model-steps/s "
          f"({len(runs)} runs x {args.baseline_steps} steps)")
    print(f"(b)  qkov trainer       : {single:10.0f} model-steps/s "
          f"({len(runs)} runs x {steps} steps, one process)")
    print(f"(c)  qkov trainer       : {fast:10.0f} model-steps/s "
          f"(the same, split over {workers} worker processes)")
    print(f"speed-up (b)/(a)        : {single / base:10.1f}x")
    print(f"speed-up (c)/(a)        : {fast / base:10.1f}x")

    part = step_breakdown(runs)
    print(f"one step of (b), all {part['members']} runs ({part['streams']} data streams):")
    print(f"  sampling the data    : {part['sampling_us']:8.0f} us")
    print(f"  laying it out        : {part['layout_us']:8.0f} us")
    print(f"  ensemble math        : {part['ensemble_math_us']:8.0f} us (in PyTorch operators; "
          f"{part['operators_per_step']:.0f} PyTorch operators per step)")
    print(f"  Python and dispatch  : {part['overhead_us']:8.0f} us")

    flops = sum(flops_per_model_step(r) for r in runs) / len(runs)
    bmm, gemm = measured_matmul_gflops(len(runs))
    throughput = fast * flops / 1e9
    print(f"matrix work per model-step: {flops / 1e6:.3f} MFLOP (mean over the runs)")
    print(f"trainer (c) throughput: {throughput:.1f} GFLOP/s = {100 * throughput / bmm:.0f}% of a "
          f"batched matmul of the same shape ({bmm:.1f} GFLOP/s, both cores), "
          f"{100 * throughput / gemm:.0f}% of a large matmul ({gemm:.1f} GFLOP/s)")
    total = sum(r.steps for r in runs)
    print(f"paper-scale Fig. 2 without early stopping: {total / 1e6:.2f} M model-steps, "
          f"about {total / fast / 60:.0f} min at this rate")

    if args.output:
        result = {
            "date": datetime.date.today().isoformat(),
            "machine": machine, "cpu_count": __import__("os").cpu_count(),
            "workload": f"paper Fig. 2: {len(runs)} runs, batch 32",
            "trainer_steps": steps, "baseline_steps": args.baseline_steps,
            "workers": workers, "rounds": args.rounds,
            "baseline_model_steps_per_s": base, "trainer_model_steps_per_s": single,
            "trainer_workers_model_steps_per_s": fast,
            "speedup_one_process": single / base, "speedup_workers": fast / base,
            "step": part,
            "mflop_per_model_step": flops / 1e6,
            "trainer_gflops": throughput, "batched_matmul_gflops": bmm,
            "large_matmul_gflops": gemm, "fraction_of_batched_matmul": throughput / bmm,
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        sets.write_atomic(args.output, (json.dumps(result, indent=2) + "\n").encode())
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
