"""The trainer's speed, side by side in one run, best of interleaved rounds (only the ratios
mean something across machines). Model-steps per second on paper Fig. 2's 40 runs: (a) what
notebook-first code does, one run at a time: nn.Linear layers on one-hot tensors, autograd,
torch.optim.SGD; (b) qkov.synthetic.train, all runs as one ensemble in one process; (c) the
same over two worker processes, as the notebooks train. Fig. 3's per-epoch measure of 5 OV
circuits: (d) one at a time, a pressure as the difference of two losses; (e) SharpeningProbe,
batched. It prints (b)'s profile and the record the book shows:
    .venv/bin/python benchmarks/trainer_speed.py --output benchmarks/results/trainer-speed.json
"""

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from qkov.circuits import effective
from qkov.figures import paper_fig2, paper_fig3
from qkov.synthetic import metrics, models, tasks
from qkov.synthetic import train as trainer

V = tasks.VOCAB


def timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def baseline(config):
    """(a)'s QK and OV layers, named as the library's weights, and its model on one-hot inputs."""
    layers = lambda *names: nn.ModuleDict({n: nn.Linear(V, V, bias=False) for n in names})  # noqa: E731
    qk = layers("W_Q", "W_K") if config.qk == "factorized" else layers("W_QK")
    ov = layers("W_V", "W_O") if config.ov == "factorized" else layers("W_OV")

    def model(x):
        query, key = (qk["W_Q"](x[:, -1:]), qk["W_K"](x)) if "W_Q" in qk else (x[:, -1:], qk["W_QK"](x))
        h = torch.softmax(query @ key.transpose(-2, -1) / V**0.5, dim=-1) @ x
        return (ov["W_O"](ov["W_V"](h)) if "W_V" in ov else ov["W_OV"](h)).squeeze(1)
    return qk, ov, model


def baseline_rate(runs, steps: int) -> float:
    elapsed = 0.0
    for run in runs:
        torch.manual_seed(run.seed)
        qk, ov, model = baseline(run.model)
        opt = torch.optim.SGD([{"params": qk.parameters(), "lr": run.lr_qk},
                               {"params": ov.parameters(), "lr": run.lr_ov}])
        generator = torch.Generator().manual_seed(run.seed)
        start = time.perf_counter()
        for _ in range(steps):
            batch = tasks.sample_tokens(generator, run.batch_size, run.T)
            opt.zero_grad()
            nn.functional.cross_entropy(model(nn.functional.one_hot(batch.inputs, V).float()),
                                        batch.targets).backward()
            opt.step()
        elapsed += time.perf_counter() - start
    return len(runs) * steps / elapsed


def trainer_rate(runs, steps: int, workers: int) -> float:
    runs = [replace(r, epochs=1, batches_per_epoch=steps, early_stop_loss=None) for r in runs]
    return len(runs) * steps / timed(lambda: trainer.train(runs, progress=False, workers=workers))


def evaluation(eval_batches: int, rounds: int) -> dict:
    """(d) and (e), a few hundred steps into training (where the pressure is small)."""
    runs = [r for r in paper_fig3.runs(seeds=[1234]) if r.model.ov == "collapsed"]
    trained = trainer.train([replace(r, epochs=1, batches_per_epoch=200) for r in runs], progress=False)
    circuits = {"W_OV": torch.stack([effective(r.params)[1] for r in trained]),
                "b": torch.stack([r.params["b"] for r in trained])}
    alphas, d = [r.model.fixed_alpha for r in runs], 0.005
    batch = metrics.held_out_batches(runs[0].seed, 64, eval_batches, per_class=True)
    probe = metrics.SharpeningProbe(batch)

    def direct():  # per circuit, one at a time: L(alpha) and the pressure (L(alpha) - L(alpha + d)) / d
        for k, x in enumerate(alphas):
            p = {name: value[k] for name, value in circuits.items()}
            logits = (models.count_logits(p, batch.counts, batch.classes, a)[0] for a in (x, min(x + d, 1)))
            low, high = (nn.functional.cross_entropy(z, batch.targets).item() for z in logits)
            yield low, 0.0 if x + d > 1 else (low - high) / d

    ways = (lambda: list(direct()), lambda: probe(circuits, np.array(alphas), d))
    slow, quick = np.min([[timed(way) for way in ways] for _ in range(rounds + 1)][1:], axis=0)  # warmed up
    return {"evaluation": f"paper Fig. 3: {len(runs)} OV circuits, {len(batch.classes)} sequences",
            "direct_ms": 1e3 * slow, "probe_ms": 1e3 * quick, "speedup_probe": slow / quick}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainer-steps", type=int, default=1000)
    parser.add_argument("--baseline-steps", type=int, default=25)
    parser.add_argument("--eval-batches", type=int, default=250, help="held-out batches for (d), (e)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--output", type=Path, help="write the record here (JSON)")
    args = parser.parse_args(argv)
    runs, steps, workers = paper_fig2.runs(), args.trainer_steps, 2
    # interleaved: a drift of the machine's speed between (a) and (b) would enter the ratio
    rates = [(baseline_rate(runs, args.baseline_steps), trainer_rate(runs, steps, 1),
              trainer_rate(runs, steps, workers)) for _ in range(args.rounds)]
    base, single, fast = (max(r[i] for r in rates) for i in range(3))
    with torch.profiler.profile() as prof:  # where (b)'s time goes; the rest is Python's
        trainer_rate(runs, steps, 1)
    print("(b) profiled:\n" + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
    record = json.dumps({
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.platform()}, "
        f"{torch.get_num_threads()} torch threads, torch {torch.__version__}",
        "workload": f"paper Fig. 2: {len(runs)} runs, batch 32", "trainer_steps": steps,
        "baseline_steps": args.baseline_steps, "workers": workers, "rounds": args.rounds,
        "baseline_model_steps_per_s": base, "trainer_model_steps_per_s": single,
        "trainer_workers_model_steps_per_s": fast, "speedup_one_process": single / base,
        "speedup_workers": fast / base, **evaluation(args.eval_batches, args.rounds)}, indent=2)
    print(record)
    if args.output:
        args.output.write_text(record + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
