"""Batched greedy generation with left padding, for evaluation and training-data generation.

Faster than :func:`trtllm_autojudge.decoding.speculative.greedy_generate` on CPU, but padding
changes floating-point reductions: batched tokens matched unpadded greedy decoding on about 99% of
positions. Anything compared token for token with greedy decoding must use batch 1.
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers import PreTrainedModel


@torch.inference_mode()
def batched_greedy(model: PreTrainedModel, prompts: Sequence[Sequence[int]], max_new_tokens: int, eos_id: int,
                   pad_id: int, batch_size: int = 8, progress=None) -> list[list[int]]:
    """Greedy continuations of ``prompts`` (token id lists), each cut after its first ``eos_id``.

    Prompts are processed longest first in batches of ``batch_size``; the result keeps the input
    order. ``progress`` (e.g. a tqdm bar) is advanced by the number of finished prompts.
    """
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    results: list[list[int]] = [[] for _ in prompts]
    device = next(model.parameters()).device
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        width = max(len(prompts[i]) for i in idx)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)  # [b, width], left padded
        mask = torch.zeros((len(idx), width), dtype=torch.long)  # [b, width]
        for row, i in enumerate(idx):
            ids[row, width - len(prompts[i]):] = torch.tensor(list(prompts[i]))
            mask[row, width - len(prompts[i]):] = 1
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=max_new_tokens,
                             do_sample=False, eos_token_id=eos_id, pad_token_id=pad_id)  # [b, width + new]
        for row, i in enumerate(idx):
            new = out[row, width:].tolist()
            results[i] = new[: new.index(eos_id) + 1] if eos_id in new else new
        if progress is not None:
            progress.update(len(idx))
    return results
