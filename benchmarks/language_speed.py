"""The language trainers' speed, side by side in one run, best of interleaved rounds (only the
ratios mean something across machines). Training examples per second of a figure's whole
run set, on ``--workers`` processes as the figures train:

(a) the per-model loop, qkov.language.train.train_classifier, one run after another in each
    worker (timed on a few steps of a few runs: every run of a set costs the same);
(b) the batched trainer, qkov.language.batched.train_classifiers, each worker's share of the
    runs as one stack.

Two models: real-agreement's, with its default run set (every condition, base rate and
seed that it trains: :func:`qkov.figures.real_agreement.train` trains a setting shared by two
names once) and model (d_model 64, 4 heads of 64, attention only, AdamW, each batch cut to its
longest row), on the built corpus's training examples where `make data` has built it, else
on rows of the corpus's vocabulary size and sentence lengths drawn to its shape (the record
says which); and the authors' HateXplain size (d_model 64, 4 heads of 64, an MLP of 256,
biases, BERT's 30,522 WordPiece ids, posts padded to 128), 4 conditions x 5 seeds, on drawn
rows.

It also records the fraction of a same-shape batched matmul that (b) reaches: the
multiply-adds of (b)'s products per example (its forward; the backward is twice that), at
its measured rate, against torch.bmm on the largest of those products' shapes, alone, in
the same process and type. A training step is more than its products (the optimizer reads
every embedding, the loss, the gathers), so this is a ceiling on what a faster product could
give, not an efficiency of the whole.

    .venv/bin/python benchmarks/language_speed.py --output benchmarks/results/language-speed.json
"""

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path

import torch

from qkov.figures import language_hatexplain, real_agreement
from qkov.language import corpus
from qkov.language.batched import train_classifiers
from qkov.language.batches import TokenBatch
from qkov.language.comparison import condition_setup
from qkov.language.models import Decoder, DecoderConfig
from qkov.language.tokenizers import BERT_VOCAB_SIZE
from qkov.language.train import train_classifier
from qkov.processes import map_in_processes
from qkov.provenance import cpu_model
from qkov.seeding import init_generator

CONDITIONS = ("matched", "faster QK", "all faster", "slow OV")
SEEDS = (1234, 1235, 1236, 1237, 1238)
DTYPE = torch.float64  # the language figures' type


def drawn_rows(rows: int, width: int, vocabulary: int, mean_length: float, seed: int = 0):
    """Right-padded rows with lengths drawn geometrically around ``mean_length`` (real
    sentences: many short, a few long), labels 0/1."""
    g = torch.Generator().manual_seed(seed)
    p = 1 / mean_length
    lengths = (torch.log(torch.rand(rows, generator=g)) / torch.log1p(torch.tensor(-p))).long() + 1
    lengths = lengths.clamp(max=width - 1)
    mask = torch.arange(width)[None] < lengths[:, None]
    tokens = torch.randint(1, vocabulary, (rows, width), generator=g) * mask
    return TokenBatch(tokens, mask, labels=torch.randint(0, 2, (rows,), generator=g))


def agreement_model(rows: int):
    """real-agreement's config and runs, and its training rows (see the docstring)."""
    p = real_agreement.Parameters(progress=False)
    try:
        prepared = real_agreement.prepare(p)
        config, data, source = prepared.config, prepared.train, "the built corpus"
    except corpus.SourceError as error:  # not built here (`make data`): rows of its shape
        config = DecoderConfig(vocab_size=8193, max_len=p.max_length, d_model=p.d_model,
                               n_heads=p.n_heads, d_head=p.d_head, d_mlp=0, n_classes=2)
        data = drawn_rows(rows, p.max_length, config.vocab_size, 12.5)
        source = f"drawn rows of the corpus's shape (no built corpus: {type(error).__name__})"
    settings = {}
    for condition, rate, seed in real_agreement.runs(p):
        key = (real_agreement.circuit_rates(p, condition, rate), seed)
        settings.setdefault(key, real_agreement.setup(p, condition, rate, seed))
    return config, data, list(settings.values()), source


def hatexplain_model(rows: int):
    p = language_hatexplain.Parameters()
    config = DecoderConfig(vocab_size=BERT_VOCAB_SIZE, max_len=p.max_length, d_model=p.d_model,
                           n_heads=p.n_heads, d_head=p.d_head, d_mlp=p.d_mlp,
                           attention_bias=p.attention_bias, n_classes=2)
    data = drawn_rows(rows, p.max_length, config.vocab_size, 25.0)
    matched = language_hatexplain.training(p)
    setups = [condition_setup(c, matched.lr, p.qk_multiplier,
                              **{k: v for k, v in matched.__dict__.items()
                                 if k not in ("lr", "qk_multiplier", "embedding_multiplier")}
                              | {"seed": s})
              for c in CONDITIONS for s in SEEDS]
    return config, data, setups, "drawn rows (posts about 25 WordPiece ids long, padded to 128)"


def new_models(config, count: int) -> list[Decoder]:
    return [Decoder(config, generator=init_generator(n)).to(DTYPE) for n in range(count)]


def warm_up(train, config, data, setups) -> None:
    """A few untimed steps first: a fresh worker's first steps pay one-time costs (about a
    second: allocation, first calls into MKL and autograd) that a short timing would
    otherwise count against whichever trainer runs fewer steps."""
    few = data.select(slice(0, 3 * setups[0].batch_size))
    train(new_models(config, len(setups[:2])), few, setups[:2])


def loop_worker(config, data, setups) -> float:
    """Seconds the per-model loop trains ``setups``' runs on ``data`` (making the models,
    the same work for both trainers, not counted)."""
    warm_up(lambda models, rows, runs: [train_classifier(m, rows, s, progress=False)
                                        for m, s in zip(models, runs)], config, data, setups)
    models = new_models(config, len(setups))
    start = time.perf_counter()
    for model, setup in zip(models, setups):
        train_classifier(model, data, setup, progress=False)
    return time.perf_counter() - start


def batched_worker(config, data, setups) -> float:
    """Seconds the batched trainer trains ``setups``' runs on ``data``, as one stack."""
    warm_up(train_classifiers, config, data, setups)
    models = new_models(config, len(setups))
    start = time.perf_counter()
    train_classifiers(models, data, setups)
    return time.perf_counter() - start


def shares(items: list, workers: int) -> list[list]:
    return [items[w::workers] for w in range(workers)]


def examples_per_s(worker, config, data, setups, workers: int) -> float:
    """Training examples per second of the set: each worker's share of the runs, the
    workers at once (the set takes as long as its slowest worker)."""
    seconds = map_in_processes(worker, [(config, data, share)
                                        for share in shares(setups, workers)], workers)
    return len(setups) * len(data) / max(seconds)


def products_per_example(config: DecoderConfig, width: float) -> float:
    """Multiply-adds per example of the batched trainer's forward (one layer read at one
    position): the query, W_K q, the scores and the weighted sum over ``width`` positions,
    W_V, W_O, the MLP at the readout, the head."""
    d, h, e = config.d_model, config.n_heads, config.d_head
    return 4 * d * h * e + 2 * h * width * d + 2 * d * config.d_mlp + d * config.n_classes


def bmm_rate(batch: int, m: int, k: int, n: int, repeats: int = 20) -> float:
    """Multiply-adds per second of torch.bmm on [batch, m, k] x [batch, k, n] (best of 3)."""
    a = torch.randn(batch, m, k, dtype=DTYPE)
    b = torch.randn(batch, k, n, dtype=DTYPE)
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            torch.bmm(a, b)
        best = max(best, repeats * batch * m * k * n / (time.perf_counter() - start))
    return best


def measure(name, config, data, setups, source, args) -> dict:
    batch = setups[0].batch_size
    loop_data = data.select(slice(0, args.loop_steps * batch))
    batched_data = data.select(slice(0, args.steps * batch))
    loop_setups = [replace(s, epochs=1) for s in setups[: args.loop_runs]]
    batched_setups = [replace(s, epochs=1) for s in setups]
    loop_rate = batched_rate = 0.0
    for _ in range(args.rounds):  # interleaved, best of each
        loop_rate = max(loop_rate, examples_per_s(loop_worker, config, loop_data, loop_setups,
                                                  args.workers))
        batched_rate = max(batched_rate, examples_per_s(batched_worker, config, batched_data,
                                                        batched_setups, args.workers))
    widths = [b.trimmed().tokens.shape[1] if setups[0].trim_padding else b.tokens.shape[1]
              for b in batched_data.batches(batch)]
    width = sum(widths) / len(widths)
    runs_per_worker = -(-len(setups) // args.workers)
    reached = products_per_example(config, width) * 3 * batched_rate / args.workers
    # the largest product: the scores (or the weighted sum) of every row and head of a stack
    reference = bmm_rate(runs_per_worker * batch, config.n_heads, config.d_model, round(width))
    return {"model": name, "data": source, "runs": len(setups), "workers": args.workers,
            "config": {k: getattr(config, k) for k in ("vocab_size", "d_model", "n_heads",
                                                       "d_head", "d_mlp", "n_layers")},
            "batch_size": batch, "mean_batch_width": round(width, 1),
            "loop_examples_per_s": round(loop_rate, 1),
            "batched_examples_per_s": round(batched_rate, 1),
            "speedup": round(batched_rate / loop_rate, 2),
            "bmm_fraction": round(reached / reference, 3)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="batches per run, batched")
    parser.add_argument("--loop-steps", type=int, default=40, help="batches per run, loop")
    parser.add_argument("--loop-runs", type=int, default=4, help="runs the loop trains")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved repetitions")
    parser.add_argument("--models", nargs="+", default=["real-agreement", "hatexplain-size"],
                        choices=["real-agreement", "hatexplain-size"])
    parser.add_argument("--output", type=Path, help="write the record here (JSON)")
    args = parser.parse_args(argv)
    for name in ("steps", "loop_steps", "loop_runs", "workers", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected an integer >= 1")
    rows = max(args.steps, args.loop_steps) * 64
    builders = {"real-agreement": agreement_model, "hatexplain-size": hatexplain_model}
    results = []
    for name in args.models:
        config, data, setups, source = builders[name](rows)
        result = measure(name, config, data, setups, source, args)
        print(f"{name}: per-model loop {result['loop_examples_per_s']:,.0f} examples/s, "
              f"batched {result['batched_examples_per_s']:,.0f} ({result['speedup']:.1f}x); "
              f"products at {result['bmm_fraction']:.0%} of a same-shape bmm", flush=True)
        results.append(result)
    record = {"date": time.strftime("%Y-%m-%d", time.gmtime()),
              "machine": f"{cpu_model()}, {platform.machine()}", "torch": torch.__version__,
              "steps": args.steps, "loop_steps": args.loop_steps, "loop_runs": args.loop_runs,
              "rounds": args.rounds, "results": results}
    if args.output:
        args.output.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
