"""Read a chain tree's draft out of a draft engine's outputs (``ModelRunnerCpp`` or Triton's
``tensorrt_llm`` model): the greedy chain, the top-W tokens per chain step, the drafted depth."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def top_tokens(logits: np.ndarray, width: int) -> np.ndarray:
    """[..., V] -> [..., width] token ids, most likely first (ties: lower id first)."""
    return np.argsort(-np.asarray(logits, np.float32), axis=-1, kind="stable")[..., :width]


def draft_from_outputs(
    prefixes: Sequence[Sequence[int]],
    output_ids: np.ndarray,  # [B, S] prompt + generated tokens (padding after sequence_lengths)
    sequence_lengths: np.ndarray,  # [B] tokens in output_ids, prompt included
    generation_logits: np.ndarray | None,  # [B, >=D, V_padded] draft logits per generated step (W > 1)
    depth: int,
    width: int,
    vocab_size: int,
    end_id: int,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Chain ``[B, D]`` (``end_id`` past the drafted depth), top-W ``[B, D, W]`` (None when W = 1)
    and drafted depth ``[B]`` (the draft engine stops early at ``end_id``)."""
    B = len(prefixes)
    chain = np.full((B, depth), end_id, np.int64)
    valid = np.zeros(B, np.int64)
    for b, p in enumerate(prefixes):
        n = int(min(max(int(sequence_lengths[b]) - len(p), 0), depth))
        chain[b, :n] = output_ids[b, len(p): len(p) + n]
        valid[b] = n
    topk = None
    if width > 1:
        if generation_logits is None:
            raise ValueError(f"a tree of width {width} needs the draft's generation logits: request them")
        topk = top_tokens(np.asarray(generation_logits)[:, :depth, :vocab_size], width)  # [B, D, W]
    return chain, topk, valid
