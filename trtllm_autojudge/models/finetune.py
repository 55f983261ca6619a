"""Pieces shared by the embedded-model training scripts (build_scripts/train_target_adapter.py,
build_scripts/train_draft.py): the learning-rate schedule, resumable checkpoints, and the target's
response loss (with a lower weight for comment lines, so a program task learns mostly its code)."""
from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from ..data.batches import Example, pad_batch
from ..data.comment_noise import is_comment

# Tasks with an embedded target, and the dtype their shipped target and draft are trained in
# (gsm8k-cot's were made in float32 before --dtype existed; new ones in bf16 where native, as the demo runs).
EMBEDDED_TASK_DTYPES = {"gsm8k-cot": "float32", "gsm8k-program": "auto", "gsm8k-program-words": "auto"}


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


def token_weights(tokenizer, ids: list[int], start: int, comment_weight: float = 1.0,
                  skip_lines: frozenset[int] = frozenset()) -> list[float]:
    """[len(ids)] the loss weight of predicting each token: 0 before ``start`` (the prompt) and on the
    response lines numbered in ``skip_lines`` (0-based; e.g. perturbed comments, see
    :mod:`~trtllm_autojudge.data.comment_noise`), ``comment_weight`` on comment lines (``# ...``), 1
    elsewhere. A token belongs to the line it starts on (the newline ending a line is that line's)."""
    weights, line, number = [0.0] * len(ids), "", 0
    for k in range(start, len(ids)):
        piece = tokenizer.decode([ids[k]])
        if number in skip_lines:
            weights[k] = 0.0
        else:
            weights[k] = comment_weight if is_comment(line + piece) else 1.0
        number += piece.count("\n")
        line = (line + piece).rsplit("\n", 1)[-1]
    return weights


def response_loss(model, batch: list[Example], pad_id: int, weights: dict[int, list[float]] | None = None) -> torch.Tensor:
    """Weighted mean cross-entropy over the response tokens of ``batch`` (prompt and padding excluded).

    ``weights[id(example)]`` (from :func:`token_weights`) weighs the prediction of each of its
    tokens; None: every response token counts 1.
    """
    ids, mask, learn = pad_batch(batch, pad_id)  # [b, w] each
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state  # [b, w, H]
    logits = model.lm_head(hidden[learn])  # [n, V]: only where a response token is predicted
    loss = torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][learn[:, :-1]], reduction="none")  # [n]
    if weights is None:
        return loss.mean()
    weight = torch.zeros(ids.shape, dtype=torch.float32)  # [b, w]: weight of predicting the token at column j
    for row, example in enumerate(batch):
        weight[row, : len(example[0])] = torch.tensor(weights[id(example)], dtype=torch.float32)
    weight = weight[:, 1:][learn[:, :-1]]  # [n]
    return (loss * weight).sum() / weight.sum().clamp_min(1e-6)
