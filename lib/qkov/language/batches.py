"""Token sequences as the language models read them: ``tokens`` [N, T] (right-padded),
``attention_mask`` [N, T] (True = a real token) and, where the task has them, ``labels``
[N] (class ids), ``loss_mask`` [N, T] (True = the token at that position is a target of
next-token training, e.g. the answer of a generative QA prompt) and ``rationale`` [N, T]
(True = a token a human or the grammar marks as the evidence for the label).

One container for every task, so that loaders, the training loop and the metrics agree on
shapes; it checks them when it is made.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields, replace

import torch


@dataclass(frozen=True)
class TokenBatch:
    tokens: torch.Tensor  # [N, T] long
    attention_mask: torch.Tensor  # [N, T] bool, True = real token; real tokens come first
    labels: torch.Tensor | None = None  # [N] long
    loss_mask: torch.Tensor | None = None  # [N, T] bool
    rationale: torch.Tensor | None = None  # [N, T] bool

    def __post_init__(self):
        tokens, mask = self.tokens, self.attention_mask
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError(f"tokens: expected a [N, T] long tensor, got "
                             f"{getattr(tokens, 'dtype', type(tokens))} "
                             f"{tuple(getattr(tokens, 'shape', ()))}")
        for name in ("attention_mask", "loss_mask", "rationale"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, torch.Tensor) or value.dtype != torch.bool \
                    or value.shape != tokens.shape:
                raise ValueError(f"{name}: expected a bool tensor of the tokens' shape "
                                 f"{tuple(tokens.shape)}, got {getattr(value, 'dtype', type(value))} "
                                 f"{tuple(getattr(value, 'shape', ()))}")
        if mask is None:
            raise ValueError("attention_mask: required")
        # Right padding: once a row's padding starts, it does not stop.
        if (mask[:, 1:] & ~mask[:, :-1]).any():
            row = int((mask[:, 1:] & ~mask[:, :-1]).any(1).nonzero()[0])
            raise ValueError(f"attention_mask: row {row} has a real token after padding; "
                             "expected right-padded sequences")
        if self.labels is not None:
            if not isinstance(self.labels, torch.Tensor) or self.labels.shape != tokens.shape[:1] \
                    or self.labels.dtype != torch.long:
                raise ValueError(f"labels: expected a [{tokens.shape[0]}] long tensor, got "
                                 f"{getattr(self.labels, 'dtype', type(self.labels))} "
                                 f"{tuple(getattr(self.labels, 'shape', ()))}")

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def _per_row(self):
        """Names of the fields that hold one entry per row (tensors, first dimension N)."""
        return [f.name for f in fields(self)
                if isinstance(getattr(self, f.name), torch.Tensor)
                and getattr(self, f.name).dim() >= 1 and getattr(self, f.name).shape[0] == len(self)]

    def select(self, index) -> TokenBatch:
        """The rows ``index`` (a slice, index tensor or bool mask), every per-row field alike
        (subclasses' fields included)."""
        return replace(self, **{name: getattr(self, name)[index] for name in self._per_row()})

    def to(self, device) -> TokenBatch:
        return replace(self, **{f.name: getattr(self, f.name).to(device) for f in fields(self)
                                if isinstance(getattr(self, f.name), torch.Tensor)})

    def batches(self, batch_size: int, generator: torch.Generator | None = None
                ) -> Iterator[TokenBatch]:
        """Consecutive batches of ``batch_size`` rows (the last may be smaller), in the order
        of a permutation drawn from ``generator`` (in order when it is None)."""
        if batch_size < 1:
            raise ValueError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
        order = (torch.randperm(len(self), generator=generator) if generator is not None
                 else torch.arange(len(self)))
        for start in range(0, len(self), batch_size):
            yield self.select(order[start:start + batch_size])

    def trimmed(self, spare: int = 1) -> TokenBatch:
        """The rows cut to their longest real length plus ``spare`` padding columns (a
        readout slot after the tokens; never wider than now): padding no row needs is not
        computed. Real tokens attend only to real tokens, so the model's outputs at real
        positions and at the first padding slot are those of the uncut rows (up to rounding:
        products of another width may round differently). Every [N, T] field is cut."""
        width = min(self.tokens.shape[1], int(self.lengths.max()) + spare)
        return replace(self, **{f.name: getattr(self, f.name)[:, :width] for f in fields(self)
                                if isinstance(getattr(self, f.name), torch.Tensor)
                                and getattr(self, f.name).shape == self.tokens.shape})

    def widened(self, width: int, pad_id: int = 0) -> TokenBatch:
        """The rows padded on the right to ``width`` columns (never narrower than now):
        tokens with ``pad_id``, the masks with False."""
        extra = width - self.tokens.shape[1]
        if extra <= 0:
            return self

        def pad(tensor, value):
            return torch.nn.functional.pad(tensor, (0, extra), value=value)
        return replace(self, **{f.name: pad(getattr(self, f.name),
                                            pad_id if f.name == "tokens" else False)
                                for f in fields(self)
                                if isinstance(getattr(self, f.name), torch.Tensor)
                                and getattr(self, f.name).shape == self.tokens.shape})

    @property
    def lengths(self) -> torch.Tensor:
        """Real tokens per row: [N]."""
        return self.attention_mask.sum(1)
