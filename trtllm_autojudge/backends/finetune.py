"""Pieces shared by the embedded-model training scripts (build_scripts/train_target_adapter.py,
build_scripts/train_draft.py): the learning-rate schedule, resumable checkpoints, and the target's
response loss (with a lower weight for comment lines, so a program task learns mostly its code)."""
from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from ..data.batches import Example, pad_batch

# Tasks with an embedded target, and the dtype their shipped target and draft are trained in
# (gsm8k-cot's were made in float32 before --dtype existed; new ones in bf16 where native, as the demo runs).
EMBEDDED_TASK_DTYPES = {"gsm8k-cot": "float32", "gsm8k-program": "auto"}


def lr_at(step: int, total: int, warmup: int, lr: float) -> float:
    """Linear warm-up over ``warmup`` steps to ``lr``, then cosine decay to 0 at ``total``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    return lr * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(total - warmup, 1)))


def save_checkpoint(path: Path, state: dict) -> None:
    """Write ``state`` atomically: a run killed while saving keeps the previous checkpoint."""
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> dict | None:
    """The saved state, or None when there is no checkpoint yet (a fresh run)."""
    return torch.load(path, weights_only=False) if path.exists() else None


def comment_mask(tokenizer, ids: list[int], start: int) -> list[bool]:
    """[len(ids)] bool: True for the tokens from ``start`` on that lie on a comment line (``# ...``)."""
    mask, line = [False] * len(ids), ""
    for k in range(start, len(ids)):
        piece = tokenizer.decode([ids[k]])
        mask[k] = (line + piece).lstrip().startswith("#")
        line = (line + piece).rsplit("\n", 1)[-1]
    return mask


def response_loss(model, batch: list[Example], pad_id: int, comment_masks: dict[int, list[bool]] | None = None,
                  comment_weight: float = 1.0) -> torch.Tensor:
    """Weighted mean cross-entropy over the response tokens of ``batch`` (prompt and padding excluded).

    A token on a comment line (``comment_masks[id(example)]``, from :func:`comment_mask`) counts
    ``comment_weight``; every other response token counts 1.
    """
    ids, mask, learn = pad_batch(batch, pad_id)  # [b, w] each
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state  # [b, w, H]
    logits = model.lm_head(hidden[learn])  # [n, V]: only where a response token is predicted
    loss = torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][learn[:, :-1]], reduction="none")  # [n]
    if comment_masks is None or comment_weight == 1.0:
        return loss.mean()
    weight = torch.ones(ids.shape, dtype=torch.float32)  # [b, w]: weight of predicting the token at column j
    for row, example in enumerate(batch):
        in_comment = torch.tensor(comment_masks[id(example)], dtype=torch.bool)  # [len(example ids)]
        weight[row, : len(in_comment)][in_comment] = comment_weight
    weight = weight[:, 1:][learn[:, :-1]]  # [n]
    return (loss * weight).sum() / weight.sum()
