"""What the speculative loop needs from a model: a per-sequence session over a KV cache.

A session holds the KV cache of ONE sequence. ``forward`` appends ``T`` new tokens to the cache
and returns, for every new position, the logits and the last-layer hidden state after the final
norm (the input of the LM head: the AutoJudge feature). ``retain`` then keeps the cache entries
that stay valid: the first ``keep`` entries plus chosen later slots (the accepted tree nodes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch


@dataclass
class ForwardOutput:
    logits: torch.Tensor  # [T, V] float32, one row per new token
    hidden: torch.Tensor  # [T, H] float32, final-norm hidden state (input of the LM head)


class ModelSession(Protocol):
    cached_len: int  # entries in the KV cache

    def forward(
        self,
        tokens: Sequence[int],  # [T] new input tokens
        positions: Sequence[int] | None = None,  # [T] position ids; default cached_len + arange(T)
        mask: torch.Tensor | None = None,  # [T, cached_len + T] bool, True = attend; default causal
    ) -> ForwardOutput: ...

    def retain(self, keep: int, slots: Sequence[int] = ()) -> None:
        """Keep cache entries [0, keep) followed by ``slots`` (indices >= keep, increasing)."""
        ...


class LanguageModel(Protocol):
    vocab_size: int
    hidden_size: int
    eos_token_ids: tuple[int, ...]

    def session(self) -> ModelSession: ...


def check_forward(cached_len: int, T: int, positions: Sequence[int] | None, mask: torch.Tensor | None) -> None:
    """Refuse a :meth:`ModelSession.forward` call whose arguments do not fit its cache."""
    if T == 0:
        raise ValueError("forward needs at least one new token")
    if mask is not None and tuple(mask.shape) != (T, cached_len + T):
        raise ValueError(f"mask must be [T, cached_len + T] = [{T}, {cached_len + T}], got {tuple(mask.shape)}")
    if positions is not None and len(positions) != T:
        raise ValueError(f"positions must give one position per token: {len(positions)} for {T} tokens")


def check_retain(cached_len: int, keep: int, slots: Sequence[int]) -> None:
    """Refuse a :meth:`ModelSession.retain` call outside the cache."""
    if not 0 <= keep <= cached_len or any(s < keep or s >= cached_len for s in slots):
        raise ValueError(f"retain({keep}, {list(slots)}) is outside the cache of {cached_len} entries")
