"""A fake LanguageModel whose greedy token at position p is f(p), whatever came before.

With it the continuation from any prefix is known in advance, so the labels of the miner are
known by construction.
"""
from __future__ import annotations

import torch

from trtllm_autojudge.models.protocol import ForwardOutput


class PositionalLM:
    hidden_size = 8

    def __init__(self, vocab: int, token_at, eos_token_ids=()):
        self.vocab_size, self.token_at, self.eos_token_ids = vocab, token_at, tuple(eos_token_ids)

    def session(self):
        return PositionalSession(self)


class PositionalSession:
    def __init__(self, lm: PositionalLM):
        self.lm, self.cached_len = lm, 0

    def forward(self, tokens, positions=None, mask=None):
        positions = list(positions) if positions is not None else list(range(self.cached_len, self.cached_len + len(tokens)))
        logits = torch.zeros(len(tokens), self.lm.vocab_size)  # [T, V]
        for row, p in enumerate(positions):
            logits[row, self.lm.token_at(p + 1)] = 1.0  # prediction for the NEXT position
        self.cached_len += len(tokens)
        return ForwardOutput(logits=logits, hidden=torch.zeros(len(tokens), self.lm.hidden_size))

    def retain(self, keep, slots=()):
        self.cached_len = keep + len(slots)
