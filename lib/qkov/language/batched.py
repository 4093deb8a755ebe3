"""Training many language classifiers of one shape at once: every run of a figure (condition x
seed x base rate) is one slice of a stacked model, and one forward, backward and optimizer
step per batch trains them all.

Why: a language figure's runs are small models (d_model 32-64). One at a time, the per-model
loop (:func:`qkov.language.train.train_classifier`) spends its time in many small products
and kernel launches. Stacked on a leading run axis, the runs' products become batched
products. The training forward also computes only what the loss reads: a classifier's loss
reads one position (the readout), so the last layer attends from that position alone,
where the per-model loop computes every position's attention and drops all but one row.

What stays each run's own (a run is a :class:`~qkov.language.models.Decoder`, its initial
weights, and a :class:`~qkov.language.train.TrainingSetup`):

- its weights, starting from its own Decoder's;
- its batch order (its setup's seed), so it sees the batches the per-model loop gives it;
- every parameter group's learning rate (base rate x the group's multiplier x its schedule
  at its step), weight decay, momentum, the optimizer (AdamW or SGD) and clipping;
- its cap (its setup's epochs) and, with :class:`Stopping`, its early stop. A run that stops
  leaves the stack, so it costs no more work.

:func:`train_classifiers` gives each run the per-model loop's numbers to float64 rounding:
the same formulas, with products that add in another order (tests/test_language_batched.py).
After training each run's weights are copied back into its Decoder, so a figure measures
its models with the per-model code it has.

Within a batch every run has the same number of rows, and every batch the data's width: a
run's batch cut to its longest row (``trim_padding``) is padded back, which changes nothing
(its real tokens lie within its own width, and the causal mask hides every column after its
readout). So every stack computes on the same shapes, and a run's numbers do not depend on
which runs share its stack (how a figure splits its runs over worker processes), to the bit.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from tqdm import tqdm

from .. import seeding
from .batches import TokenBatch
from .models import Decoder, DecoderConfig, circuit_of, readout_positions, schedule_factor
from .train import PROGRESS_INTERVAL_S, TrainingSetup, optimizer_steps

# torch's AdamW defaults, which the per-model loop uses (models.make_optimizer)
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_ divides by the norm plus this


@dataclass(frozen=True)
class Stopping:
    """Early stopping: after each evaluation, a run whose ``measure`` (returned by the
    ``evaluate`` function of :func:`train_classifiers`) has not improved on its best for
    ``patience`` evaluations in a row stops, and gets back its weights of its best evaluation.
    ``mode "min"``: lower is better (a loss), "max": higher is better (an accuracy)."""

    measure: str = "validation_loss"
    patience: int = 3
    mode: str = "min"

    def __post_init__(self):
        if not isinstance(self.measure, str) or not self.measure:
            raise ValueError(
                f"Stopping.measure: expected the name of a measure, got {self.measure!r}"
            )
        if (
            isinstance(self.patience, bool)
            or not isinstance(self.patience, int)
            or self.patience < 1
        ):
            raise ValueError(
                f"Stopping.patience: expected an integer >= 1 (evaluations "
                f"without improvement before a run stops), got {self.patience!r}"
            )
        if self.mode not in ("min", "max"):
            raise ValueError(f"Stopping.mode: expected 'min' or 'max', got {self.mode!r}")

    def improves(self, value: float, best: float | None) -> bool:
        if best is None:
            return True
        return value < best if self.mode == "min" else value > best


@dataclass
class RunHistory:
    """One run of :func:`train_classifiers`: the mean training loss of each epoch it
    finished, what ``evaluate`` returned at each evaluation (with the optimizer ``step`` and
    ``epoch`` it was made after), how many steps the run took, and why it ended ("cap": it
    trained all its epochs; "patience": it stopped early). ``best_step``: the step whose
    weights the run ends with (its last, unless early stopping restored an earlier one)."""

    loss: list[float] = field(default_factory=list)
    evaluations: list[dict] = field(default_factory=list)
    steps: int = 0
    ended_by: str = "cap"
    best_step: int = 0
    seconds: float = 0.0


class StackedClassifier:
    """The weights of R classifier runs of one :class:`DecoderConfig`, each stacked on a
    leading run axis ([R, ...] per parameter of the Decoder, by its name).

    :meth:`readout` is the forward the loss needs: the logits at each row's readout position
    and the last layer's attention from there. Earlier layers compute every position (the
    next layer's keys and values need them)."""

    def __init__(self, config: DecoderConfig, weights: dict[str, torch.Tensor]):
        check_config(config)
        self.config = config
        self.weights = weights

    @classmethod
    def from_decoders(cls, models: list[Decoder]) -> StackedClassifier:
        if not models:
            raise ValueError("models: expected at least one Decoder, got none")
        config = models[0].config
        for number, model in enumerate(models):
            if not isinstance(model, Decoder):
                raise TypeError(f"models[{number}]: expected a Decoder, got {type(model).__name__}")
            if model.config != config:
                raise ValueError(
                    f"models[{number}]: its DecoderConfig differs from models[0]'s; "
                    "runs stacked together need one shape"
                )
        names = [name for name, _ in models[0].named_parameters()]
        dtypes = {param.dtype for model in models for param in model.parameters()}
        if len(dtypes) != 1:
            raise ValueError(
                f"models: expected one floating-point type, got {sorted(map(str, dtypes))}"
            )
        with torch.no_grad():
            weights = {
                name: torch.stack([dict(m.named_parameters())[name].detach() for m in models])
                .clone()
                .requires_grad_()
                for name in names
            }
        return cls(config, weights)

    def __len__(self) -> int:
        return next(iter(self.weights.values())).shape[0]

    def copy_into(self, run: int, model: Decoder) -> None:
        """Run ``run``'s weights into ``model`` (a Decoder of this config)."""
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(self.weights[name][run])

    def keep(self, runs: torch.Tensor) -> StackedClassifier:
        """The runs ``runs`` (indices into this stack) as a stack of their own."""
        return StackedClassifier(
            self.config,
            {
                name: w.detach().index_select(0, runs).requires_grad_(w.requires_grad)
                for name, w in self.weights.items()
            },
        )

    # --- the forward -------------------------------------------------------------------

    def readout(
        self,
        tokens: torch.Tensor,
        attention_mask: torch.Tensor,
        widths: torch.Tensor | None = None,
        readout: str = "first_pad",
        token_vectors: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``tokens``, ``attention_mask`` [R, B, T] (each run its own rows) or [B, T] (the
        same rows for every run); ``widths`` [R]: each run's own width of the batch, where
        its rows were cut and then padded to a wider batch (None: T for every run);
        ``token_vectors`` [R, B, T, d]: the token embeddings of ``tokens``, where the caller
        looked them up (the trainer does, to route their gradient itself).

        Returns the logits [R, B, classes], the last layer's attention from the readout
        position [R, B, heads, T], and the readout positions [R, B]."""
        w, config = self.weights, self.config
        R = len(self)
        if tokens.dim() == 2:
            tokens, attention_mask = (
                tokens.expand(R, *tokens.shape),
                attention_mask.expand(R, *tokens.shape),
            )
        if tokens.dim() != 3 or tokens.shape[0] != R or attention_mask.shape != tokens.shape:
            raise ValueError(
                f"tokens, attention_mask: expected [{R}, B, T] or [B, T], got "
                f"{tuple(tokens.shape)} and {tuple(attention_mask.shape)}"
            )
        B, T = tokens.shape[1:]
        if T > config.max_len:
            raise ValueError(f"tokens: {T} positions, more than max_len={config.max_len}")
        index = readout_positions(attention_mask.reshape(R * B, T), readout).view(R, B)
        if readout == "first_pad" and widths is not None:
            # a full row of a run is read at the run's own last column, as the per-model loop
            # reads it. Nothing else needs a run's width: its real tokens lie within it, and
            # the causal mask hides every column after the readout.
            index = torch.minimum(index, (widths - 1)[:, None])
        keys = attention_mask if config.mask_padding else torch.ones_like(attention_mask)

        runs = torch.arange(R)[:, None, None]
        if token_vectors is None:
            token_vectors = w["token_embedding.weight"][runs, tokens]
        x = token_vectors + w["position_embedding.weight"][:, None, :T]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        for layer in range(config.n_layers - 1):
            allowed = causal & keys[:, :, None, :]  # [R, B, T (query), T (key)]
            empty = ~allowed.any(-1, keepdim=True)  # a query with no key attends to itself
            allowed = allowed | (empty & torch.eye(T, dtype=torch.bool))
            x = self._block_everywhere(f"layers.{layer}.", x, allowed)

        rows = torch.arange(B)[None, :]
        allowed = (torch.arange(T) <= index[..., None]) & keys  # [R, B, T]
        empty = ~allowed.any(-1, keepdim=True)
        allowed = allowed | (empty & (torch.arange(T) == index[..., None]))
        x_read, pattern = self._block_at_readout(
            f"layers.{config.n_layers - 1}.", x, x[torch.arange(R)[:, None], rows, index], allowed
        )
        if config.layer_norm == "pre":
            x_read = _layer_norm(x_read, w["ln_final.weight"], w["ln_final.bias"])
        logits = torch.einsum("rbd,rcd->rbc", x_read, w["head.weight"]) + w["head.bias"][:, None]
        return logits, pattern, index

    def _attention_inputs(self, prefix: str, x: torch.Tensor) -> torch.Tensor:
        if self.config.layer_norm == "pre":
            return _layer_norm(
                x, self.weights[prefix + "ln_attn.weight"], self.weights[prefix + "ln_attn.bias"]
            )
        return x

    def _mlp(self, prefix: str, x: torch.Tensor, equation_in: str, equation_out: str):
        w = self.weights
        if not self.config.d_mlp:
            return x
        h = x
        if self.config.layer_norm == "pre":
            h = _layer_norm(h, w[prefix + "ln_mlp.weight"], w[prefix + "ln_mlp.bias"])
        extra = (None,) * (x.dim() - 2)  # broadcast a bias [R, width] over the middle axes
        h = (
            torch.einsum(equation_in, h, w[prefix + "mlp.0.weight"])
            + w[prefix + "mlp.0.bias"][(slice(None), *extra)]
        )
        h = (
            torch.einsum(equation_out, F.gelu(h), w[prefix + "mlp.2.weight"])
            + w[prefix + "mlp.2.bias"][(slice(None), *extra)]
        )
        return x + h if self.config.residual else h

    def _block_everywhere(self, prefix: str, x: torch.Tensor, allowed: torch.Tensor):
        """A block at every position (a layer below the last): ``x`` [R, B, T, d]."""
        w, config = self.weights, self.config
        a = prefix + "attn."
        inputs = self._attention_inputs(prefix, x)
        q, k, v = (
            torch.einsum("rbtd,rhde->rbhte", inputs, w[a + name]) for name in ("W_Q", "W_K", "W_V")
        )
        if config.attention_bias:
            q, k, v = (t + w[a + name][:, None] for t, name in ((q, "b_Q"), (k, "b_K"), (v, "b_V")))
        scores = torch.einsum("rbhqe,rbhke->rbhqk", q, k) * (1.0 / math.sqrt(config.d_head))
        pattern = torch.softmax(scores.masked_fill(~allowed[:, :, None], float("-inf")), -1)
        out = torch.einsum(
            "rbhqe,rhed->rbqd", torch.einsum("rbhqk,rbhke->rbhqe", pattern, v), w[a + "W_O"]
        )
        if config.attention_bias:
            out = out + w[a + "b_O"][:, None, None]
        x = x + out if config.residual else out
        return self._mlp(prefix, x, "rbtd,rmd->rbtm", "rbtm,rdm->rbtd")

    def _block_at_readout(
        self, prefix: str, x: torch.Tensor, x_read: torch.Tensor, allowed: torch.Tensor
    ):
        """The last block at the readout position only: ``x`` [R, B, T, d] (the inputs of
        the keys and values), ``x_read`` [R, B, d]; the attention [R, B, heads, T].

        One query needs no keys or values at every position: its score at position t is
        q . (W_K^T x_t) = (W_K q) . x_t, and its output is W_V^T (sum_t p_t x_t). So the
        products are per example, not per position; the numbers are the per-model loop's up
        to rounding. (The bias b_K adds q . b_K to every score, which the softmax ignores;
        it is added all the same, so the model is the same function of its weights.)"""
        w, config = self.weights, self.config
        a = prefix + "attn."
        inputs = self._attention_inputs(prefix, x)
        query = self._attention_inputs(prefix, x_read)
        q = torch.einsum("rbd,rhde->rbhe", query, w[a + "W_Q"])
        if config.attention_bias:
            q = q + w[a + "b_Q"][:, None, :, 0]
        scores = torch.einsum(
            "rbhd,rbtd->rbht", torch.einsum("rbhe,rhde->rbhd", q, w[a + "W_K"]), inputs
        )
        if config.attention_bias:
            scores = scores + (q * w[a + "b_K"][:, None, :, 0]).sum(-1, keepdim=True)
        scores = scores * (1.0 / math.sqrt(config.d_head))
        pattern = torch.softmax(scores.masked_fill(~allowed[:, :, None], float("-inf")), -1)
        values = torch.einsum(
            "rbhd,rhde->rbhe", torch.einsum("rbht,rbtd->rbhd", pattern, inputs), w[a + "W_V"]
        )
        if config.attention_bias:
            values = values + w[a + "b_V"][:, None, :, 0]
        out = torch.einsum("rbhe,rhed->rbd", values, w[a + "W_O"])
        if config.attention_bias:
            out = out + w[a + "b_O"][:, None]
        x_read = x_read + out if config.residual else out
        return self._mlp(prefix, x_read, "rbd,rmd->rbm", "rbm,rdm->rbd"), pattern


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """nn.LayerNorm (eps 1e-5) with each run's own gain and bias ([R, d])."""
    extra = (None,) * (x.dim() - 2)
    return (
        F.layer_norm(x, x.shape[-1:]) * weight[(slice(None), *extra)] + bias[(slice(None), *extra)]
    )


def check_config(config: DecoderConfig) -> None:
    """What the stacked forward computes: a classifier, without dropout."""
    if config.n_classes is None:
        raise ValueError(
            "DecoderConfig.n_classes: the batched trainer trains classifiers; "
            "a next-token model (n_classes None) trains with train_language_model"
        )
    if config.dropout:
        raise ValueError(
            f"DecoderConfig.dropout: the batched trainer trains without dropout "
            f"(its draws would differ from the per-model loop's), got {config.dropout}"
        )


# --- the optimizer ----------------------------------------------------------------------------


def check_setups(setups: list[TrainingSetup]) -> None:
    """What runs trained together must share, and what the batched trainer does not do."""
    if not setups:
        raise ValueError("setups: expected one TrainingSetup per model, got none")
    for number, setup in enumerate(setups):
        if not isinstance(setup, TrainingSetup):
            raise TypeError(
                f"setups[{number}]: expected a TrainingSetup, got {type(setup).__name__}"
            )
        if setup.accumulation_steps != 1:
            raise ValueError(
                f"setups[{number}].accumulation_steps: the batched trainer takes one "
                f"step per batch; expected 1, got {setup.accumulation_steps}"
            )
        if setup.label_smoothing:
            raise ValueError(
                f"setups[{number}].label_smoothing: applies to the next-token loss "
                f"only; expected 0 for a classifier, got {setup.label_smoothing}"
            )
        if setup.batch_size != setups[0].batch_size:
            raise ValueError(
                f"setups[{number}].batch_size: runs trained together take batches of "
                f"one size; expected {setups[0].batch_size} (setups[0]'s), got "
                f"{setup.batch_size}"
            )


def group_of(name: str, setup: TrainingSetup) -> str:
    """A parameter's learning-rate group as models.parameter_groups forms it."""
    if setup.position_multiplier is not None and name.startswith("position_embedding."):
        return "position"
    return circuit_of(name, setup.qk_bias)


def rate_and_decay(name: str, setup: TrainingSetup) -> tuple[float, float]:
    """A parameter's base learning rate and weight decay in a run (before the schedule)."""
    group = group_of(name, setup)
    multiplier = {
        "qk": setup.qk_multiplier,
        "embedding": setup.embedding_multiplier,
        "position": setup.position_multiplier,
        "other": 1.0,
    }[group]
    decay = setup.weight_decay
    if group == "embedding" and setup.embedding_weight_decay is not None:
        decay = setup.embedding_weight_decay
    return setup.lr * multiplier, decay


class StackedOptimizer:
    """AdamW or SGD with momentum, per run, on a :class:`StackedClassifier`: the per-model
    loop's torch.optim step (its formulas, single-tensor form) with each run's own rates,
    decay, momentum and schedule, and torch.nn.utils.clip_grad_norm_ per run."""

    def __init__(self, setups: list[TrainingSetup], names: list[str], total_steps: list[int]):
        self.setups = list(setups)
        self.total_steps = list(total_steps)
        self.adam = torch.tensor([s.optimizer == "adamw" for s in setups])
        self.step_count = 0  # steps taken, the same for every active run
        self.rates = {
            name: torch.tensor([rate_and_decay(name, s)[0] for s in setups], dtype=torch.float64)
            for name in names
        }
        self.decays = {
            name: torch.tensor([rate_and_decay(name, s)[1] for s in setups], dtype=torch.float64)
            for name in names
        }
        self.momentum = torch.tensor([s.momentum for s in setups], dtype=torch.float64)
        self.clip = torch.tensor(
            [math.inf if s.grad_clip is None else s.grad_clip for s in setups], dtype=torch.float64
        )
        self.state: dict[str, dict[str, torch.Tensor]] = {}

    def keep(self, runs: torch.Tensor) -> None:
        """Keep the runs ``runs`` (indices into the current stack), as the model's keep."""
        picked = runs.tolist()
        self.setups = [self.setups[i] for i in picked]
        self.total_steps = [self.total_steps[i] for i in picked]
        self.adam = self.adam[runs]
        self.momentum, self.clip = self.momentum[runs], self.clip[runs]
        self.rates = {n: r[runs] for n, r in self.rates.items()}
        self.decays = {n: d[runs] for n, d in self.decays.items()}
        self.state = {
            n: {k: t.index_select(0, runs) for k, t in s.items()} for n, s in self.state.items()
        }

    def clip_gradients(self, weights: dict[str, torch.Tensor]) -> None:
        grads = [w.grad for w in weights.values()]
        norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), 2, dim=1) for g in grads])
        total = torch.linalg.vector_norm(norms, 2, dim=0)  # [R]
        factor = torch.clamp(self.clip.to(total.dtype) / (total + CLIP_EPS), max=1.0)
        for g in grads:
            g.mul_(_per_row(factor, g))

    @torch.no_grad()
    def step(self, weights: dict[str, torch.Tensor]) -> None:
        """One optimizer step of every run. The updates are torch's fused CPU kernels (those
        of ``torch.optim.AdamW(fused=True)`` and ``SGD(fused=True)``): one pass over a
        parameter where the single-tensor form takes ten, which matters here because a
        stack's embeddings are most of its memory traffic. Each call takes one learning
        rate, so the runs' rows are grouped by their hyperparameters."""
        if torch.isfinite(self.clip).any():
            self.clip_gradients(weights)
        factor = self.schedule_at(self.step_count)
        self.step_count += 1
        groups: dict[tuple, list[tuple[str, int]]] = {}
        adam, momentum = self.adam.tolist(), self.momentum.tolist()
        for name in weights:
            rates = (self.rates[name] * factor).tolist()
            decays = self.decays[name].tolist()
            for row in range(len(adam)):
                key = (
                    ("adamw", rates[row], decays[row])
                    if adam[row]
                    else ("sgd", rates[row], decays[row], momentum[row])
                )
                groups.setdefault(key, []).append((name, row))
        for key, members in groups.items():
            params = [weights[name][row] for name, row in members]
            grads = [weights[name].grad[row] for name, row in members]
            if key[0] == "adamw":
                _, lr, decay = key
                exp_avg = [self._state(name, "exp_avg", weights)[row] for name, row in members]
                exp_avg_sq = [
                    self._state(name, "exp_avg_sq", weights)[row] for name, row in members
                ]
                steps = [torch.tensor(float(self.step_count))] * len(members)
                torch._fused_adamw_(
                    params,
                    grads,
                    exp_avg,
                    exp_avg_sq,
                    [],
                    steps,
                    lr=lr,
                    beta1=ADAM_BETAS[0],
                    beta2=ADAM_BETAS[1],
                    weight_decay=decay,
                    eps=ADAM_EPS,
                    amsgrad=False,
                    maximize=False,
                )
            else:
                _, lr, decay, momentum = key
                buffers = (
                    []
                    if momentum == 0
                    else [
                        self._state(name, "momentum_buffer", weights)[row] for name, row in members
                    ]
                )
                torch._fused_sgd_(
                    params,
                    grads,
                    buffers,
                    weight_decay=decay,
                    momentum=momentum,
                    lr=lr,
                    dampening=0.0,
                    nesterov=False,
                    maximize=False,
                    is_first_step=self.step_count == 1 and momentum != 0,
                )

    def _state(self, name: str, kind: str, weights: dict[str, torch.Tensor]) -> torch.Tensor:
        """The stacked state ``kind`` of parameter ``name`` (zeros at first)."""
        state = self.state.setdefault(name, {})
        if kind not in state:
            state[kind] = torch.zeros_like(weights[name])
        return state[kind]

    def schedule_at(self, step: int) -> torch.Tensor:
        """[R]: each run's schedule factor at ``step`` (0-based), as the per-model loop's
        LambdaLR gives it."""
        return torch.tensor(
            [
                schedule_factor(s.schedule, step, total, s.warmup_fraction)
                for s, total in zip(self.setups, self.total_steps)
            ],
            dtype=torch.float64,
        )


def _per_row(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """[R] values shaped to broadcast over ``like`` [R, ...], in its type."""
    return values.to(like.dtype).view(-1, *(1,) * (like.dim() - 1))


# --- the training loop --------------------------------------------------------------------------


def train_classifiers(
    models: list[Decoder],
    data: TokenBatch,
    setups: list[TrainingSetup],
    *,
    readout: str = "first_pad",
    evaluate: Callable[[StackedClassifier, list[int]], list[dict]] | None = None,
    eval_every: int | None = None,
    evaluate_at_start: bool = False,
    stopping: Stopping | None = None,
    progress: bool = False,
    desc: str = "training",
    position: int | None = None,
) -> list[RunHistory]:
    """Train each ``models[i]`` with ``setups[i]`` on ``data`` (classifier cross-entropy at
    the ``readout`` position), all in one stack; the trained weights are copied back into
    the models. What :func:`~qkov.language.train.train_classifier` does to each alone, to
    float64 rounding (the module's docstring says what is per run).

    ``evaluate(stack, runs)`` measures the runs still training (``runs``: their indices
    into ``models``, in the stack's order; :meth:`StackedClassifier.readout` gives their
    logits and attention) and returns one dict of numbers per run. It runs after every
    ``eval_every`` optimizer steps, or after every epoch when ``eval_every`` is None; with
    ``evaluate_at_start``, also before the first step (step 0, epoch 0: the initial weights,
    where a trajectory starts, so that every loss between the initial one and the first
    evaluation's is seen to be crossed). ``stopping`` (needs ``evaluate``) stops a run
    whose measure stopped improving and restores its best weights; a run that reaches its
    cap also ends at its best evaluation.
    """
    if len(models) != len(setups):
        raise ValueError(f"setups: expected one per model ({len(models)}), got {len(setups)}")
    check_setups(setups)
    if data.labels is None:
        raise ValueError("training data: labels are required to train a classifier")
    if len(data) == 0:
        raise ValueError("training data: no rows")
    stack = StackedClassifier.from_decoders(models)
    n_classes = stack.config.n_classes
    if int(data.labels.max()) >= n_classes or int(data.labels.min()) < 0:
        raise ValueError(
            f"labels: expected class ids in [0, {n_classes}), got "
            f"{int(data.labels.min())}..{int(data.labels.max())}"
        )
    if eval_every is not None and (
        isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 1
    ):
        raise ValueError(
            f"eval_every: expected None (after every epoch) or an integer >= 1, got {eval_every!r}"
        )
    if evaluate_at_start and evaluate is None:
        raise ValueError("evaluate_at_start: needs an evaluate function to measure the runs")
    if stopping is not None and evaluate is None:
        raise ValueError("stopping: early stopping needs an evaluate function to measure the runs")
    if stopping is not None and not isinstance(stopping, Stopping):
        raise TypeError(f"stopping: expected a Stopping, got {type(stopping).__name__}")

    R = len(models)
    batch_size = setups[0].batch_size
    steps_per_epoch = math.ceil(len(data) / batch_size)
    totals = [optimizer_steps(len(data), s) for s in setups]
    optimizer = StackedOptimizer(setups, list(stack.weights), totals)
    orders = [seeding.generator(seeding.derived_seed(s.seed, "data")) for s in setups]
    histories = [RunHistory() for _ in range(R)]
    active = list(range(R))  # the original index of each run in the stack
    best: dict[int, tuple[float, int, dict]] = {}  # run -> (measure, step, its weights)
    since_best = [0] * R
    started = time.perf_counter()
    bar = tqdm(
        total=max(totals),
        desc=desc,
        disable=not progress,
        leave=False,
        mininterval=PROGRESS_INTERVAL_S,
        unit="step",
        position=position,
        file=sys.stderr,
    )

    def measure(epoch: int) -> list[int]:
        """Evaluate the active runs; the runs that ran out of patience."""
        with torch.no_grad():
            found = evaluate(stack, list(active))
        if not isinstance(found, list) or len(found) != len(active):
            raise ValueError(
                f"evaluate: expected a list of one dict per active run "
                f"({len(active)}), got {type(found).__name__} of "
                f"{len(found) if isinstance(found, list) else '?'}"
            )
        stopped = []
        for slot, (run, measures) in enumerate(zip(active, found)):
            histories[run].evaluations.append(
                {"step": optimizer.step_count, "epoch": epoch, **measures}
            )
            if stopping is None:
                continue
            if stopping.measure not in measures:
                raise KeyError(
                    f"evaluate: the measure {stopping.measure!r} that stopping reads "
                    f"is missing (it returned {sorted(measures)})"
                )
            value = float(measures[stopping.measure])
            if stopping.improves(value, best.get(run, (None,))[0]):
                best[run] = (
                    value,
                    optimizer.step_count,
                    {n: w[slot].detach().clone() for n, w in stack.weights.items()},
                )
                since_best[run] = 0
            else:
                since_best[run] += 1
                if since_best[run] >= stopping.patience:
                    stopped.append(slot)
        return [active[slot] for slot in stopped]

    def finish(runs: list[int], reason: str) -> None:
        """The runs ``runs`` end: their weights go back to their models; the rest stay."""
        nonlocal stack, active, embedding_grad
        for run in runs:
            slot = active.index(run)
            history = histories[run]
            history.ended_by, history.steps = reason, optimizer.step_count
            history.seconds = time.perf_counter() - started
            history.best_step = optimizer.step_count
            stack.copy_into(slot, models[run])
            if run in best:  # early stopping ends each run at its best evaluation
                _, history.best_step, weights = best[run]
                with torch.no_grad():
                    for name, param in models[run].named_parameters():
                        param.copy_(weights[name])
        keep = [slot for slot, run in enumerate(active) if run not in runs]
        if keep:
            index = torch.tensor(keep)
            stack = stack.keep(index)
            optimizer.keep(index)
            embedding_grad = embedding_grad[: len(keep)]  # all zeros between steps
        active = [active[slot] for slot in keep]

    # The token embedding's gradient is routed by hand: autograd would fill a new [R,
    # vocabulary, d] tensor with zeros at every step (most of a step's time with real-agreement's
    # 8,193 words), where the rows a batch touched are few. Its stacked weight takes no
    # autograd gradient; the looked-up vectors do, and are added into a buffer kept at zero
    # between steps.
    def table_of(stack: StackedClassifier) -> torch.Tensor:
        return stack.weights["token_embedding.weight"]

    table_of(stack).requires_grad_(False)
    embedding_grad = torch.zeros_like(table_of(stack))

    if evaluate_at_start:
        measure(0)  # the initial weights (a run's first evaluation cannot stop it)
    epoch = 0
    while active:
        epoch += 1
        # each run's batches of this epoch, in its own order (drawn as the per-model loop draws)
        run_batches = {run: data.batches(batch_size, orders[run]) for run in active}
        epoch_loss = {run: 0.0 for run in active}
        for number in range(1, steps_per_epoch + 1):
            batches = [next(run_batches[run]) for run in active]
            batches = [
                b.trimmed() if setups[run].trim_padding else b for b, run in zip(batches, active)
            ]
            widths = torch.tensor([b.tokens.shape[1] for b in batches])
            batches = [b.widened(data.tokens.shape[1], stack.config.pad_id) for b in batches]
            tokens = torch.stack([b.tokens for b in batches])
            mask = torch.stack([b.attention_mask for b in batches])
            labels = torch.stack([b.labels for b in batches])
            runs = torch.arange(len(active))[:, None, None]
            vectors = table_of(stack)[runs, tokens].requires_grad_()
            logits, _, _ = stack.readout(tokens, mask, widths, readout, vectors)
            losses = (
                F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
                .view(len(active), -1)
                .mean(1)
            )
            if not torch.isfinite(losses).all():
                run = active[int((~torch.isfinite(losses)).nonzero()[0])]
                qk, embeddings, rest = setups[run].circuit_rates()
                raise FloatingPointError(
                    f"models[{run}] (seed {setups[run].seed}; W_Q and W_K at {qk:g}, the "
                    f"embeddings at {embeddings:g}, the rest at {rest:g}): training loss "
                    f"became non-finite at step {optimizer.step_count}; lower its learning rate"
                )
            for w in stack.weights.values():
                w.grad = None
            losses.sum().backward()
            embedding_grad.index_put_((runs, tokens), vectors.grad, accumulate=True)
            table_of(stack).grad = embedding_grad
            optimizer.step(stack.weights)
            zero = torch.zeros((), dtype=embedding_grad.dtype)
            embedding_grad.index_put_((runs, tokens), zero)  # zero again, for the next step
            table_of(stack).grad = None
            bar.update()
            for run, loss in zip(active, losses.tolist()):
                epoch_loss[run] += loss * len(labels[0])

            last = number == steps_per_epoch
            if last:
                for run in active:
                    histories[run].loss.append(epoch_loss[run] / len(data))
            due = (
                eval_every is None
                and last
                or (eval_every is not None and optimizer.step_count % eval_every == 0)
            )
            if evaluate is not None and due:
                stopped = measure(epoch)
                if stopped:
                    finish(stopped, "patience")
            if last:
                capped = [run for run in active if epoch >= setups[run].epochs]
                if capped:
                    finish(capped, "cap")
            if not active:
                break
    bar.close()
    return histories
