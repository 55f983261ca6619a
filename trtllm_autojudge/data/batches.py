"""Training batches of encoded problems (prompt + response token ids), for the build scripts."""
from __future__ import annotations

import random
from typing import Callable, Sequence

import torch

from .problem import Problem
from .prompt import training_ids

Example = tuple[list[int], int]  # (prompt + response + end-of-turn token ids, number of prompt tokens)


def make_batches(tokenizer, problems: Sequence[Problem], batch: int, seed: int,
                 encode: Callable[[object, Problem], Example] | None = None) -> list[list[Example]]:
    """Encode ``problems`` and group them into batches (:func:`batch_examples`).

    ``encode(tokenizer, problem)`` gives one example (default: the worded task's :func:`.prompt.training_ids`;
    a task's own is ``task.training_ids``).
    """
    encode = encode or (lambda tok, p: training_ids(tok, p.question, p.answer))
    return batch_examples([encode(tokenizer, p) for p in problems], batch, seed)


def batch_examples(examples: Sequence[Example], batch: int, seed: int) -> list[list[Example]]:
    """Group ``examples`` into batches of similar length, in a seeded random order (the examples
    themselves, not copies: callers may key per-example data by ``id``)."""
    examples = list(examples)
    rng = random.Random(seed)
    rng.shuffle(examples)
    window = batch * 16  # sort within windows: little padding, templates still mixed
    examples = [e for s in range(0, len(examples), window) for e in sorted(examples[s:s + window], key=lambda e: len(e[0]))]
    batches = [examples[s:s + batch] for s in range(0, len(examples), batch)]
    rng.shuffle(batches)
    return batches


def pad_batch(batch: Sequence[Example], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``ids`` [b, w] and ``mask`` [b, w], and ``learn`` [b, w] (bool): True at the
    positions whose NEXT token is a response token (the positions a loss or agreement is taken at)."""
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    learn = torch.zeros((len(batch), width), dtype=torch.bool)
    for row, (seq, n_prompt) in enumerate(batch):
        ids[row, :len(seq)] = torch.tensor(seq)
        mask[row, :len(seq)] = 1
        learn[row, n_prompt - 1:len(seq) - 1] = True
    return ids, mask, learn
