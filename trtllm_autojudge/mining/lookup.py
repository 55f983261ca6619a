"""Regeneration by lookup: greedy continuations verified against the sequences already computed.

A regeneration in label mining is the target's greedy continuation after ONE swapped token, and it
mostly repeats the sequence it branched from: a renamed variable or a reworded comment changes a
few tokens, and the rest of a program is the same text. :class:`LookupRegenerator` serves requests
one at a time on a :class:`~.cached_lm.CachedLM` of the target, as
:class:`~.cached_lm.SessionRegenerator` does, but proposes the next tokens from the owner's earlier
sequences (the reference) and verifies a window of them in one forward: speculative decoding with
a text lookup as the draft, as in prompt-lookup decoding.

- The reference is the owner's sequence sharing the longest prefix with the request (the request
  itself when there is none, so a first response copies from its prompt).
- The window continues the reference at ``len(seq) + offset``. The offset starts at 0 (the swapped
  token replaced one token) and stays after a mismatch (the target's token replaced the
  reference's), so a renamed variable costs one verify per occurrence.
- When a window is rejected at its first token, the offset is found again: the last 3 (else 2)
  tokens of the sequence, at their occurrence in the reference nearest to the old alignment.
- The window doubles after a fully accepted one (up to ``max_window``) and drops to
  ``min_window`` after a rejection.

With a ``draft`` model (``--regenerator lookup-draft``) the draft arbitrates every window: its
greedy token after the sequence is computed first (one draft step, KV reused); when it equals the
window's first token the looked-up window is verified as above, otherwise the draft's own greedy
continuation (up to ``draft_window`` tokens) is verified instead, as in speculative decoding with
the draft. That serves the text a lookup cannot: the first response (nothing to look up but the
prompt) and a reworded comment after a swap, which the target writes anew. After a drafted window
the alignment is searched again, so the lookup resumes where the text rejoins the reference.

Every emitted token is the target's argmax after the tokens before it (the verify pass computes
it), so the continuation is the greedy one, whatever proposed it. Verifying K tokens in one
forward rounds differently from K one-token steps, so in float32 / bfloat16 a near-tie can break
the other way, as in lossless speculative decoding (float64: equal, tests/test_mining_regeneration.py).
"""
from __future__ import annotations

from typing import Sequence

from ..backends.protocol import LanguageModel
from ..backends.regen_transformers import common_prefix_len
from ..backends.regeneration import RegenerationRequest
from .cached_lm import CachedLM, SessionRegenerator

NGRAMS = (3, 2)  # lengths of the tail searched in the reference to re-align, longest first


def realign(seq: Sequence[int], ref: Sequence[int], expected: int) -> int | None:
    """Index in ``ref`` right after an occurrence of the last n tokens of ``seq`` (n in :data:`NGRAMS`),
    the occurrence nearest to ``expected``; None when no tail occurs."""
    for n in NGRAMS:
        if len(seq) < n:
            continue
        tail = list(seq[-n:])
        hits = [j for j in range(n, len(ref) + 1) if ref[j - 1] == tail[-1] and list(ref[j - n:j]) == tail]
        if hits:
            return min(hits, key=lambda j: abs(j - expected))
    return None


class LookupRegenerator(SessionRegenerator):
    """A :class:`..backends.regeneration.RegenerationBackend`: the reference backend's greedy
    continuations, a window of looked-up (or, with ``draft``, drafted) tokens verified per target forward.

    ``forward_calls`` counts the target forwards (verify passes and prefills), ``draft_forwarded``
    the tokens the draft ran; ``references`` caps the sequences kept per owner.
    """

    def __init__(self, lm: LanguageModel, min_window: int = 8, max_window: int = 64, references: int = 8,
                 draft: LanguageModel | None = None, draft_window: int = 8):
        if not 1 <= min_window <= max_window:
            raise ValueError(f"need 1 <= min_window <= max_window, got {min_window} and {max_window}")
        if draft_window < 1:
            raise ValueError(f"draft_window must be >= 1, got {draft_window}")
        if draft is not None and draft.vocab_size != lm.vocab_size:
            raise ValueError(f"draft vocab {draft.vocab_size} != target vocab {lm.vocab_size}: they must share a tokenizer")
        super().__init__(lm, reuse=True)
        self.min_window, self.max_window, self.references = min_window, max_window, references
        self.drafter = None if draft is None else CachedLM(draft, reuse=True)
        self.draft_window = draft_window
        self.refs: dict[str, list[list[int]]] = {}  # owner -> recent complete sequences, newest last
        self.forward_calls = 0

    @property
    def draft_forwarded(self) -> int:
        return 0 if self.drafter is None else self.drafter.forwarded

    def continue_request(self, r: RegenerationRequest) -> list[int]:
        seq = self._continue(r)
        kept = self.refs.setdefault(r.owner, [])
        kept.append(seq)
        del kept[:-self.references]
        return seq

    def _reference(self, request: RegenerationRequest) -> list[int]:
        best, best_len = list(request.prefix), -1
        for ref in self.refs.get(request.owner, ()):
            n = common_prefix_len(ref, request.prefix)
            if n > best_len:
                best, best_len = ref, n
        return best

    def _draft_next(self, seq: list[int]) -> int:
        self.drafter.extend_to(seq)
        return self.drafter.argmax[-1]

    def _proposal(self, seq: list[int], looked_up: list[int], room: int) -> tuple[list[int], bool]:
        """The window to verify and whether it is the looked-up one: that one when there is no
        draft or the draft's next token opens it, else the draft's greedy continuation."""
        if self.drafter is None or room <= 0:
            return looked_up, True
        first = self._draft_next(seq)
        if looked_up and looked_up[0] == first:
            return looked_up, True
        guess = [first]
        while len(guess) < min(self.draft_window, room):
            guess.append(self._draft_next(seq + guess))
        return guess, False

    def _continue(self, r: RegenerationRequest) -> list[int]:
        seq = [int(t) for t in r.prefix]
        if r.finished:
            return seq
        ref, offset, window = self._reference(r), 0, self.min_window
        while True:
            room = r.max_len - len(seq) - 1  # the last new token is the target's
            start = len(seq) + offset
            guess, looked_up = self._proposal(seq, ref[start:start + min(window, room)], room)  # [W]
            before = self.cached.forwarded
            self.cached.extend_to(seq + guess)
            self.forward_calls += self.cached.forwarded > before
            argmax = self.cached.argmax[len(seq) - 1:]  # [W + 1] the target's token after seq + guess[:k]
            k = 0
            while k < len(guess) and argmax[k] == guess[k]:
                k += 1
            for t in guess[:k] + [argmax[k]]:
                seq.append(t)
                if t in r.stop_ids or len(seq) >= r.max_len or (r.is_final is not None and r.is_final(seq)):
                    return seq
            if looked_up and guess and k == len(guess):
                window = min(2 * window, self.max_window)
                continue
            window = self.min_window
            if k == 0 or not looked_up:
                j = realign(seq, ref, len(seq) + offset)
                if j is not None:
                    offset = j - len(seq)
