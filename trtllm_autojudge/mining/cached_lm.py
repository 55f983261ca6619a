"""Greedy predictions over changing token sequences, reusing the KV cache of the common prefix.

Label mining asks the same model about many sequences that share long prefixes (the prompt and
the response up to the current mismatch). :class:`CachedLM` keeps the tokens its cache holds and
the model's argmax after each of them; a new sequence re-computes only what follows the longest
common prefix. :class:`SessionRegenerator` serves regeneration requests with it, one at a time:
the reference regeneration backend (:mod:`..generation.regeneration`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..generation.regeneration import Continuation, RegenerationRequest, RequestQueue, model_context
from ..models.protocol import LanguageModel


class CachedLM:
    """``keep_logits`` also keeps every position's logits (for :meth:`probabilities`)."""

    def __init__(self, lm: LanguageModel, reuse: bool = True, keep_logits: bool = False):
        self.lm, self.reuse = lm, reuse
        self.session = lm.session()
        self.tokens: list[int] = []  # what the cache holds
        self.argmax: list[int] = []  # argmax[j]: greedy token after tokens[: j + 1]
        self.logits = torch.zeros(0, lm.vocab_size) if keep_logits else None  # [len(tokens), V] float32
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
        if self.logits is not None:
            self.logits = self.logits[:keep]
        if len(seq) > keep:
            logits = self.session.forward(seq[keep:]).logits  # [len(seq) - keep, V]
            self.argmax += logits.argmax(-1).tolist()
            if self.logits is not None:
                self.logits = torch.cat([self.logits, logits.float().cpu()])
            self.tokens += seq[keep:]
            self.forwarded += len(seq) - keep

    def predictions(self, seq: Sequence[int]) -> list[int]:
        """Teacher-forced greedy predictions: entry j is the argmax after seq[: j + 1]."""
        self.extend_to(seq)
        return list(self.argmax)

    def probabilities(self, positions: Sequence[int], tokens: Sequence[int]) -> list[float]:
        """Softmax probability of ``tokens[k]`` right after ``self.tokens[:positions[k]]``."""
        if self.logits is None:
            raise RuntimeError("probabilities need CachedLM(keep_logits=True)")
        rows = self.logits[[p - 1 for p in positions]]  # [K, V]
        return rows.softmax(-1)[range(len(tokens)), list(tokens)].tolist()

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


class SessionRegenerator(RequestQueue):
    """The reference regeneration backend: one request at a time on a :class:`CachedLM`, in
    submission order (``collect`` serves the oldest queued request)."""

    def __init__(self, lm: LanguageModel, reuse: bool = True):
        super().__init__()
        self.cached = CachedLM(lm, reuse)
        self.max_context = model_context(lm)

    def collect(self) -> dict[int, Continuation]:
        if not self.queue:
            return {}
        ticket = next(iter(self.queue))
        r = self.queue.pop(ticket)
        before = self.cached.forwarded
        seq = self.continue_request(r)
        return {ticket: Continuation(seq[len(r.prefix):], self.cached.forwarded - before)}

    def continue_request(self, r: RegenerationRequest) -> list[int]:
        """``r.prefix`` + its greedy continuation (subclasses compute it another way)."""
        return self.cached.continue_greedy(r.prefix, r.max_len, set(r.stop_ids), r.is_final)

    def cancel(self, tickets: Sequence[int]) -> dict[int, int]:
        return {t: 0 for t in tickets if self.queue.pop(t, None) is not None}
