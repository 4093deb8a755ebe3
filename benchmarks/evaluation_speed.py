"""Fig. 3's per-epoch measurement: the direct computation vs qkov's SharpeningProbe.

    .venv/bin/python benchmarks/evaluation_speed.py [--eval-batches 250] [--rounds 3]

Measured in this one run, side by side, on one torch thread (as in a training worker):
(a) direct: for each of a worker's 5 OV circuits, the model's logits under fixed attention
    alpha and alpha + d on the held-out sequences, their mean cross-entropies, and the
    pressure as the difference of the two means; (b) ``qkov.synthetic.metrics.SharpeningProbe`` on
    the same circuits and sequences (prepared once, as paper-fig3 does before training),
    batched PyTorch operations.
Both are compared with the same difference taken in float64, so that the printout shows
what each costs and how far each is from the exact value.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
import torch

from qkov.circuits import effective
from qkov.figures import paper_fig3
from qkov.synthetic import metrics, models
from qkov.synthetic.train import train


def direct(circuits, batch, alphas, d, dtype=torch.float32) -> np.ndarray:
    """(E, 2) loss and pressure, one model and one alpha at a time, as a notebook would."""
    out = []
    for k, alpha in enumerate(alphas):
        p = {name: value[k].to(dtype) for name, value in circuits.items()}
        losses = [torch.nn.functional.cross_entropy(models.count_logits(
            p, batch.counts.to(dtype), batch.classes, a)[0], batch.targets).item()
            for a in (alpha, min(alpha + d, 1.0))]
        out.append((losses[0], 0.0 if alpha + d > 1 else (losses[0] - losses[1]) / d))
    return np.array(out)


def best_time(function, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval-batches", type=int, default=250,
                        help="held-out batches of 32 per class (paper-fig3's default)")
    parser.add_argument("--rounds", type=int, default=3, help="repetitions, best of each")
    args = parser.parse_args(argv)
    for name in ("eval_batches", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    torch.set_num_threads(1)
    runs = [r for r in paper_fig3.runs(seeds=[1234]) if r.model.ov == "collapsed"]  # 5 runs
    # Circuits a few hundred steps into training, where the pressure is small.
    trained = train([replace(r, epochs=1, batches_per_epoch=200) for r in runs], progress=False)
    circuits = {"W_OV": torch.stack([effective(r.params)[1] for r in trained]),
                "b": torch.stack([r.params["b"] for r in trained])}
    alphas, d = np.array([r.model.fixed_alpha for r in runs]), 0.005
    batch = metrics.held_out_batches(runs[0].seed, 64, args.eval_batches, per_class=True)
    probe = metrics.SharpeningProbe(batch)

    exact = direct(circuits, batch, alphas, d, torch.float64)
    slow, fast = direct(circuits, batch, alphas, d), probe(circuits, alphas, d)
    t_slow, t_fast = [], []
    for _ in range(args.rounds):  # interleaved: a drift of the machine's speed hits both
        t_slow.append(best_time(lambda: direct(circuits, batch, alphas, d), 1))
        t_fast.append(best_time(lambda: probe(circuits, alphas, d), 1))
    t_slow, t_fast = min(t_slow), min(t_fast)
    sharpenable = alphas + d <= 1

    def error(values):
        return float(np.max(np.abs(values[sharpenable, 1] - exact[sharpenable, 1])))

    print(f"workload: {len(runs)} OV circuits, {len(batch.classes):,} held-out sequences, "
          f"alpha and alpha + {d:g}; one torch thread, best of {args.rounds}")
    print(f"(a) direct, float32        : {1e3 * t_slow:8.1f} ms per evaluation, "
          f"pressure off by up to {error(slow):.1e}")
    print(f"(b) SharpeningProbe        : {1e3 * t_fast:8.1f} ms per evaluation, "
          f"pressure off by up to {error(fast):.1e}")
    print(f"speed-up (b)/(a)           : {t_slow / t_fast:8.1f}x "
          f"(pressures of about {np.abs(exact[sharpenable, 1]).mean():.2g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
