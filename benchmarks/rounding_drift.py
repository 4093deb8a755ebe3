"""How far rounding carries through a real-sentiment training run: one condition and seed
trained twice, in float64, under torch's native kernels and under its scalar ones
(ATEN_CPU_CAPABILITY=default: the same data, seeds and initial weights, another rounding),
each in its own process. It prints the largest difference between the two runs' weights
every ``--every`` optimizer steps, and between their test measures at the end. A difference
that stays near 1e-16 relative is rounding; one that grows step by step is training that
amplifies it, whose printed results then depend on the CPU (issue 45: faster QK at a multiple
of 30; matched and all faster were not affected).

    .venv/bin/python benchmarks/rounding_drift.py --condition "faster QK" --multiple 30
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

MEASURES = ("attention_rollout", "probability", "comprehensiveness", "sufficiency")


def train(condition: str, multiple: float, seed: int, every: int, output: str) -> None:
    """In this process: train one run and save the weights every ``every`` steps."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from qkov.figures import real_sentiment

    p = real_sentiment.Parameters(qk_multiplier=multiple, progress=False)
    prepared = real_sentiment.prepare(p)
    snapshots, steps = [], [0]

    def snapshot(optimizer, args, kwargs):
        steps[0] += 1
        if steps[0] % every == 0:
            snapshots.append(torch.cat([w.detach().flatten() for group in optimizer.param_groups
                                        for w in group["params"]]))

    register_optimizer_step_post_hook(snapshot)
    run = real_sentiment.train_one(p, prepared, condition, seed)
    measured = {m: torch.as_tensor(run["measured"][m]).double() for m in MEASURES}
    torch.save({"weights": torch.stack(snapshots), "measured": measured}, output)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--condition", default="faster QK", help="matched, faster QK, all faster")
    parser.add_argument("--multiple", type=float, default=30.0, help="the QK multiple m")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--every", type=int, default=60, help="optimizer steps between prints")
    parser.add_argument("--train", metavar="OUTPUT", help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args()
    if args.train:
        train(args.condition, args.multiple, args.seed, args.every, args.train)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for name, capability in (("native", None), ("scalar", "default")):
            env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
            env |= {"ATEN_CPU_CAPABILITY": capability} if capability else {}
            output = str(Path(tmp) / f"{name}.pt")
            subprocess.run([sys.executable, __file__, "--condition", args.condition,
                            "--multiple", str(args.multiple), "--seed", str(args.seed),
                            "--every", str(args.every), "--train", output], check=True, env=env)
            runs[name] = torch.load(output)
    native, scalar = runs["native"], runs["scalar"]
    print(f"{args.condition}, multiple {args.multiple:g}, seed {args.seed}: largest |native - "
          "scalar| of the weights")
    for k, (a, b) in enumerate(zip(native["weights"], scalar["weights"]), 1):
        print(f"  step {k * args.every:5d}: {float((a - b).abs().max()):.1e}")
    for m in MEASURES:
        difference = float((native["measured"][m] - scalar["measured"][m]).abs().max())
        print(f"  test {m}: mean {float(native['measured'][m].mean()):.4f}, largest "
              f"difference {difference:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
