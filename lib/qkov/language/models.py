"""A small GPT-style decoder for the language tasks, with its parameters grouped by circuit.

Each layer's attention keeps ``W_Q``, ``W_K``, ``W_V`` and ``W_O`` as separate parameters
(one [heads, d_model, d_head] tensor each, ``W_O`` [heads, d_head, d_model]), so the query-key
circuit can be given its own learning rate: :func:`parameter_groups` puts ``W_Q`` and ``W_K``
at ``qk_multiplier`` times the base learning rate and the token and position embeddings at
``embedding_multiplier`` times it (``position_multiplier`` gives the position embedding a
rate of its own: the authors' HateXplain notebooks raise the token embedding alone; their
agreement notebook raises both embeddings, and ``b_Q``, ``b_K``; their SQuAD notebooks keep
the token embedding at 0.1x in both conditions), everything else at the base rate.
:func:`make_optimizer` and :func:`make_schedule` build AdamW or SGD with momentum on those
groups and a warmup + cosine / one-cycle / constant schedule that scales
every group by the same factor, so the multipliers hold throughout training.

The variants of the paper's section 5: ``d_mlp = 0`` (attention output only, the agreement
model), ``layer_norm = "pre"`` (pre-LN, the SQuAD model), ``residual = False``,
``n_classes`` (a classifier read at one position) or ``None`` (a next-token head over the
vocabulary). Masks: causal, and padding (a query never attends to a padding key; a query
with no real key before it - a row of padding only - attends to itself, so no row of the
softmax is empty); ``mask_padding = False``: causal only, as the authors' HateXplain model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .. import seeding

LAYER_NORMS = ("none", "pre")
READOUTS = ("first_pad", "last")
OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("cosine", "one_cycle", "constant")
INIT_STD = 0.02  # GPT-2's initialisation of every weight matrix and embedding


@dataclass(frozen=True)
class DecoderConfig:
    """The decoder's shape. ``d_mlp = 0``: no MLP (attention output only); ``n_classes``
    None: next-token logits over the vocabulary, else a classifier head."""

    vocab_size: int
    max_len: int
    d_model: int = 64
    n_heads: int = 4
    d_head: int = 64
    d_mlp: int = 256
    n_layers: int = 1
    layer_norm: str = "none"  # "none" or "pre"
    residual: bool = True
    n_classes: int | None = None
    pad_id: int = 0
    # False: padding keys are attended like any other (causal mask only), as in the authors'
    # HateXplain notebooks; the readout slot then also attends to itself
    mask_padding: bool = True
    # Dropout in training on the embeddings, the attention weights and the MLP (the authors'
    # SQuAD model: 0.2); the measured patterns are the undropped ones
    dropout: float = 0.0
    # The next-token head's weight is the token embedding (the authors' SQuAD model)
    tie_output: bool = False
    # Biases b_Q, b_K, b_V ([heads, d_head]) and b_O ([d_model]), zero at first (the authors'
    # models have them). They learn at the base rate, as in the authors' HateXplain
    # notebooks; parameter_groups(qk_bias=True) puts b_Q, b_K at the QK rate instead, as
    # their agreement and SQuAD notebooks do
    attention_bias: bool = False

    def __post_init__(self):
        def positive(name, minimum=1):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"DecoderConfig.{name}: expected an integer >= {minimum}, "
                                 f"got {value!r}")

        for name in ("vocab_size", "max_len", "d_model", "n_heads", "d_head", "n_layers"):
            positive(name)
        positive("d_mlp", 0)
        positive("pad_id", 0)
        if self.pad_id >= self.vocab_size:
            raise ValueError(f"DecoderConfig.pad_id: expected an id below vocab_size="
                             f"{self.vocab_size}, got {self.pad_id}")
        if self.layer_norm not in LAYER_NORMS:
            raise ValueError(f"DecoderConfig.layer_norm: expected one of {LAYER_NORMS}, "
                             f"got {self.layer_norm!r}")
        for name in ("residual", "mask_padding", "attention_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"DecoderConfig.{name}: expected True or False, got "
                                 f"{getattr(self, name)!r}")
        if self.n_classes is not None:
            positive("n_classes", 2)
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) \
                or not 0 <= self.dropout < 1:
            raise ValueError(f"DecoderConfig.dropout: expected a number in [0, 1), got "
                             f"{self.dropout!r}")
        if not isinstance(self.tie_output, bool) or self.tie_output and self.n_classes is not None:
            raise ValueError(f"DecoderConfig.tie_output: expected True (a next-token model only, "
                             f"n_classes None) or False, got {self.tie_output!r}")


@dataclass
class DecoderOutput:
    logits: torch.Tensor  # [B, n_classes] (classifier), [B, T, V] (LM) or [B, V] (LM read out)
    attentions: list[torch.Tensor]  # per layer, [B, H, T, T] attention probabilities
    readout_index: torch.Tensor | None = None  # [B] position read out, where one was


def readout_positions(attention_mask: torch.Tensor, readout: str) -> torch.Tensor:
    """[B] positions to read: "first_pad" - the first padding position (the paper's
    HateXplain setup; a row without padding is read at its last position), "last" - the last
    real token."""
    if readout not in READOUTS:
        raise ValueError(f"readout: expected one of {READOUTS} or None, got {readout!r}")
    lengths = attention_mask.sum(1)
    if readout == "first_pad":
        return lengths.clamp(max=attention_mask.shape[1] - 1)
    if (lengths == 0).any():
        raise ValueError("readout 'last': a row has no real token")
    return lengths - 1


class Attention(nn.Module):
    """Multi-head causal self-attention with separate W_Q, W_K, W_V, W_O (no biases)."""

    def __init__(self, d_model: int, n_heads: int, d_head: int, dropout: float = 0.0,
                 bias: bool = False):
        super().__init__()
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        self.W_Q = nn.Parameter(torch.empty(n_heads, d_model, d_head))
        self.W_K = nn.Parameter(torch.empty(n_heads, d_model, d_head))
        self.W_V = nn.Parameter(torch.empty(n_heads, d_model, d_head))
        self.W_O = nn.Parameter(torch.empty(n_heads, d_head, d_model))
        if bias:
            for name in ("b_Q", "b_K", "b_V"):
                setattr(self, name, nn.Parameter(torch.zeros(n_heads, 1, d_head)))
            self.b_O = nn.Parameter(torch.zeros(d_model))
        self.bias = bias
        self.scale = 1.0 / math.sqrt(d_head)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor):
        q = torch.einsum("btd,hde->bhte", x, self.W_Q)
        k = torch.einsum("btd,hde->bhte", x, self.W_K)
        v = torch.einsum("btd,hde->bhte", x, self.W_V)
        if self.bias:
            q, k, v = q + self.b_Q, k + self.b_K, v + self.b_V
        scores = torch.einsum("bhqe,bhke->bhqk", q, k) * self.scale
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        pattern = torch.softmax(scores, -1)
        out = torch.einsum("bhqk,bhke,hed->bqd", self.dropout(pattern), v, self.W_O)
        return (out + self.b_O if self.bias else out), pattern


class Block(nn.Module):
    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.config = config
        pre = config.layer_norm == "pre"
        self.ln_attn = nn.LayerNorm(config.d_model) if pre else nn.Identity()
        self.attn = Attention(config.d_model, config.n_heads, config.d_head, config.dropout,
                              config.attention_bias)
        if config.d_mlp:
            self.ln_mlp = nn.LayerNorm(config.d_model) if pre else nn.Identity()
            # Dropout after the GELU and after the output (the authors' SQuAD model); none
            # where dropout is 0, so the layers keep their names
            dropped = [nn.Dropout(config.dropout)] if config.dropout else []
            self.mlp = nn.Sequential(nn.Linear(config.d_model, config.d_mlp), nn.GELU(),
                                     *dropped, nn.Linear(config.d_mlp, config.d_model),
                                     *dropped)
        else:
            self.mlp = None

    def forward(self, x, allowed):
        out, pattern = self.attn(self.ln_attn(x), allowed)
        x = x + out if self.config.residual else out
        if self.mlp is not None:
            out = self.mlp(self.ln_mlp(x))
            x = x + out if self.config.residual else out
        return x, pattern


class Decoder(nn.Module):
    """Token embedding + learned positions, ``n_layers`` blocks, a head.

    ``embedding_init`` ([vocab_size, d_model], e.g. GloVe vectors) replaces the random token
    embedding; ``generator`` draws the initial weights (use ``qkov.seeding.init_generator``).
    """

    def __init__(self, config: DecoderConfig, embedding_init: torch.Tensor | None = None,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = nn.Embedding(config.max_len, config.d_model)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_final = nn.LayerNorm(config.d_model) if config.layer_norm == "pre" else nn.Identity()
        self.head = nn.Linear(config.d_model, config.n_classes or config.vocab_size)
        if config.tie_output:
            self.head.weight = self.token_embedding.weight
        self.embedding_dropout = nn.Dropout(config.dropout) if config.dropout else nn.Identity()
        self._initialise(generator)
        if embedding_init is not None:
            expected = (config.vocab_size, config.d_model)
            if not isinstance(embedding_init, torch.Tensor) or tuple(embedding_init.shape) != expected:
                raise ValueError(f"embedding_init: expected a tensor of shape {expected}, got "
                                 f"{tuple(getattr(embedding_init, 'shape', ())) or type(embedding_init)}")
            with torch.no_grad():
                self.token_embedding.weight.copy_(embedding_init.to(torch.float32))

    def _initialise(self, generator):
        with torch.no_grad():
            for name, param in self.named_parameters():
                if name.endswith(("bias", ".b_Q", ".b_K", ".b_V", ".b_O")):
                    param.zero_()
                elif ".ln_" in name or name.startswith("ln_"):
                    param.fill_(1.0)  # LayerNorm gains
                else:
                    # float64 draws: float32 normal_ depends on the CPU (qkov.seeding)
                    seeding.normal_(param, INIT_STD, generator)

    def forward(self, tokens: torch.Tensor, attention_mask: torch.Tensor,
                readout: str | None = None) -> DecoderOutput:
        """``tokens`` [B, T] long, ``attention_mask`` [B, T] bool (True = real token).

        Classifier: logits [B, n_classes] at the ``readout`` position ("first_pad" when None).
        Next-token head: logits [B, T, V] when ``readout`` is None, else [B, V] at it.
        """
        if self.config.n_classes is not None and readout is None:
            readout = "first_pad"
        x, attentions = self.features(tokens, attention_mask)
        index = None
        if readout is not None:
            index = readout_positions(attention_mask, readout)
            x = x[torch.arange(len(tokens), device=tokens.device), index]
        return DecoderOutput(self.head(x), attentions, index)

    def features(self, tokens: torch.Tensor, attention_mask: torch.Tensor
                 ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The final hidden states [B, T, d_model] (before the head) and the attention
        patterns. A loss on a few positions applies ``head`` there only: a next-token head
        at every position ([B, T, vocabulary]) would be most of the memory."""
        if tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError(f"tokens: expected a [B, T] long tensor, got {tokens.dtype} "
                             f"{tuple(tokens.shape)}")
        if attention_mask.shape != tokens.shape or attention_mask.dtype != torch.bool:
            raise ValueError(f"attention_mask: expected a bool tensor of shape "
                             f"{tuple(tokens.shape)}, got {attention_mask.dtype} "
                             f"{tuple(attention_mask.shape)}")
        T = tokens.shape[1]
        if T > self.config.max_len:
            raise ValueError(f"tokens: {T} positions, more than max_len={self.config.max_len}")
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        keys = attention_mask if self.config.mask_padding else torch.ones_like(attention_mask)
        allowed = causal & keys[:, None, :]
        # A query with no real key at or before it attends to itself.
        empty = ~allowed.any(-1, keepdim=True)
        allowed = allowed | (empty & torch.eye(T, dtype=torch.bool, device=tokens.device))

        x = self.token_embedding(tokens) + self.position_embedding.weight[:T]
        x = self.embedding_dropout(x)
        attentions = []
        for block in self.layers:
            x, pattern = block(x, allowed)
            attentions.append(pattern)
        return self.ln_final(x), attentions


# --- parameters by circuit, optimizers and schedules ---------------------------------------


def circuit_of(name: str, qk_bias: bool = False) -> str:
    """The learning-rate group of a parameter by its name: "qk" (W_Q, W_K, and with
    ``qk_bias`` their biases b_Q, b_K), "embedding" (token and position embeddings) or
    "other"."""
    last = name.rsplit(".", 1)[-1]
    if last in ("W_Q", "W_K") or qk_bias and last in ("b_Q", "b_K"):
        return "qk"
    if name.startswith(("token_embedding.", "position_embedding.")):
        return "embedding"
    return "other"


def parameter_groups(model: nn.Module, *, base_lr: float, qk_multiplier: float = 1.0,
                     embedding_multiplier: float = 1.0, weight_decay: float = 0.0,
                     position_multiplier: float | None = None,
                     embedding_weight_decay: float | None = None,
                     qk_bias: bool = False) -> list[dict]:
    """Optimizer parameter groups: W_Q, W_K at ``base_lr * qk_multiplier``, token and position
    embeddings at ``base_lr * embedding_multiplier``, everything else at ``base_lr``; every
    parameter in exactly one group. Each group records its ``circuit`` and ``multiplier``.
    With ``position_multiplier`` the position embedding is a group of its own ("position") at
    ``base_lr * position_multiplier`` (the authors' notebooks keep it at the base rate while
    the token embedding learns faster). ``embedding_weight_decay``: the decay of the
    "embedding" group - the token embedding, and the position embedding unless it has a rate
    of its own - where it differs from ``weight_decay`` (the authors' SQuAD notebooks: 0 for
    the token embedding, whose position embedding learns and decays with the rest).
    ``qk_bias``: the biases b_Q, b_K learn with W_Q, W_K (the authors' agreement and SQuAD
    notebooks; their HateXplain notebooks keep them at the base rate)."""
    for name, value in (("base_lr", base_lr), ("qk_multiplier", qk_multiplier),
                        ("embedding_multiplier", embedding_multiplier),
                        ("position_multiplier", 1.0 if position_multiplier is None
                         else position_multiplier)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                or not math.isfinite(value):
            raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)) \
            or not weight_decay >= 0:
        raise ValueError(f"weight_decay: expected a number >= 0, got {weight_decay!r}")
    if not isinstance(qk_bias, bool):
        raise ValueError(f"qk_bias: expected True or False, got {qk_bias!r}")
    multipliers = {"qk": qk_multiplier, "embedding": embedding_multiplier, "other": 1.0}
    if position_multiplier is not None:
        multipliers["position"] = position_multiplier
    members: dict[str, list] = {circuit: [] for circuit in multipliers}
    for name, param in model.named_parameters():
        if param.requires_grad:
            circuit = circuit_of(name, qk_bias)
            if position_multiplier is not None and name.startswith("position_embedding."):
                circuit = "position"
            members[circuit].append(param)
    decay = {circuit: weight_decay for circuit in multipliers}
    if embedding_weight_decay is not None:
        if isinstance(embedding_weight_decay, bool) or not isinstance(
                embedding_weight_decay, (int, float)) or not embedding_weight_decay >= 0:
            raise ValueError(f"embedding_weight_decay: expected None or a number >= 0, got "
                             f"{embedding_weight_decay!r}")
        decay["embedding"] = embedding_weight_decay
    return [{"params": params, "lr": base_lr * multipliers[circuit], "weight_decay": decay[circuit],
             "circuit": circuit, "multiplier": multipliers[circuit]}
            for circuit, params in members.items() if params]


def make_optimizer(model: nn.Module, kind: str = "adamw", *, lr: float, weight_decay: float = 0.0,
                   momentum: float = 0.0, qk_multiplier: float = 1.0,
                   embedding_multiplier: float = 1.0,
                   position_multiplier: float | None = None,
                   embedding_weight_decay: float | None = None,
                   qk_bias: bool = False) -> torch.optim.Optimizer:
    """AdamW or SGD (with ``momentum``) on :func:`parameter_groups`."""
    groups = parameter_groups(model, base_lr=lr, qk_multiplier=qk_multiplier,
                              embedding_multiplier=embedding_multiplier, weight_decay=weight_decay,
                              position_multiplier=position_multiplier,
                              embedding_weight_decay=embedding_weight_decay, qk_bias=qk_bias)
    if kind == "adamw":
        return torch.optim.AdamW(groups, lr=lr)
    if kind == "sgd":
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) \
                or not 0 <= momentum < 1:
            raise ValueError(f"momentum: expected a number in [0, 1), got {momentum!r}")
        return torch.optim.SGD(groups, lr=lr, momentum=momentum)
    raise ValueError(f"optimizer kind: expected one of {OPTIMIZERS}, got {kind!r}")


def schedule_factor(kind: str, step: int, total_steps: int, warmup_fraction: float) -> float:
    """The factor every group's learning rate is multiplied by at ``step`` (0-based).

    Linear warmup over the first ``warmup_fraction`` of the steps (from 0 to 1 for "cosine"
    and "constant", as Hugging Face's warmup schedules; from 1/25 to 1 for "one_cycle", as
    torch's OneCycleLR), then
    "cosine": half a cosine down to 0 at the end; "one_cycle": the same down to 1e-4;
    "constant": 1.
    """
    warmup = int(round(warmup_fraction * total_steps))
    if step < warmup:
        if kind == "one_cycle":
            return 1 / 25 + (1 - 1 / 25) * step / warmup
        return step / warmup
    if kind == "constant":
        return 1.0
    progress = (step - warmup) / max(total_steps - warmup, 1)
    floor = 1e-4 if kind == "one_cycle" else 0.0
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def make_schedule(optimizer: torch.optim.Optimizer, kind: str = "cosine", *, total_steps: int,
                  warmup_fraction: float = 0.1) -> torch.optim.lr_scheduler.LambdaLR:
    """A per-step schedule (call ``.step()`` after each optimizer step) that multiplies
    every group's own learning rate by :func:`schedule_factor`, keeping the groups' ratios."""
    if kind not in SCHEDULES:
        raise ValueError(f"schedule: expected one of {SCHEDULES}, got {kind!r}")
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps: expected an integer >= 1, got {total_steps!r}")
    if isinstance(warmup_fraction, bool) or not isinstance(warmup_fraction, (int, float)) \
            or not 0 <= warmup_fraction < 1:
        raise ValueError(f"warmup_fraction: expected a number in [0, 1), got {warmup_fraction!r}")
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: schedule_factor(kind, step, total_steps, warmup_fraction))
