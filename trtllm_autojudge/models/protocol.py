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
