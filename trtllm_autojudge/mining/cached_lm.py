"""Greedy predictions over changing token sequences, reusing the KV cache of the common prefix.

Label mining asks the same model about many sequences that share long prefixes (the prompt and
the response up to the current mismatch). :class:`CachedLM` keeps the tokens its cache holds and
the model's argmax after each of them; a new sequence re-computes only what follows the longest
common prefix.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..backends.protocol import LanguageModel


class CachedLM:
    def __init__(self, lm: LanguageModel, reuse: bool = True):
        self.lm, self.reuse = lm, reuse
        self.session = lm.session()
        self.tokens: list[int] = []  # what the cache holds
        self.argmax: list[int] = []  # argmax[j]: greedy token after tokens[: j + 1]
        self.forwarded = 0  # tokens run through the model (the cost)

    def extend_to(self, seq: Sequence[int]) -> None:
        """Make the cache hold exactly ``seq`` (re-using the common prefix when ``reuse``)."""
        seq = [int(t) for t in seq]
        keep = 0
        if self.reuse:
            limit = min(len(self.tokens), len(seq))
            while keep < limit and self.tokens[keep] == seq[keep]:
                keep += 1
        else:
            self.session = self.lm.session()
        if keep < self.session.cached_len:
            self.session.retain(keep)
        del self.tokens[keep:], self.argmax[keep:]
        if len(seq) > keep:
            logits = self.session.forward(seq[keep:]).logits  # [len(seq) - keep, V]
            self.argmax += logits.argmax(-1).tolist()
            self.tokens += seq[keep:]
            self.forwarded += len(seq) - keep

    def predictions(self, seq: Sequence[int]) -> list[int]:
        """Teacher-forced greedy predictions: entry j is the argmax after seq[: j + 1]."""
        self.extend_to(seq)
        return list(self.argmax)

    def continue_greedy(
        self,
        prefix: Sequence[int],
        max_len: int,
        stop_ids: set[int],
        is_final: Callable[[list[int]], bool] | None = None,
    ) -> list[int]:
        """prefix + its greedy continuation, up to ``max_len`` tokens in all, EOS, or ``is_final``.

        ``is_final(sequence)`` lets the caller stop once the task's answer cannot change.
        """
        seq = [int(t) for t in prefix]
        if seq and seq[-1] in stop_ids:
            return seq
        while len(seq) < max_len:
            self.extend_to(seq)
            tok = self.argmax[-1]
            seq.append(tok)
            if tok in stop_ids or (is_final is not None and is_final(seq)):
                break
        return seq
