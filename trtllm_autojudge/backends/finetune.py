"""Pieces shared by the embedded-model training scripts (build_scripts/train_target_adapter.py,
build_scripts/train_draft.py): the learning-rate schedule and resumable checkpoints."""
from __future__ import annotations

import math
import os
from pathlib import Path

import torch


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
