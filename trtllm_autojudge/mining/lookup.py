"""Regeneration by lookup, one request at a time: greedy continuations verified against the
sequences already computed.

:class:`LookupRegenerator` serves requests one at a time on a :class:`~.cached_lm.CachedLM` of the
target, as :class:`~.cached_lm.SessionRegenerator` does, but proposes the next tokens from the
owner's earlier sequences and verifies a window of them in one forward: speculative decoding with a
text lookup as the draft, as in prompt-lookup decoding. The windows (reference, offset, re-alignment,
window sizes) are :mod:`..generation.prompt_lookup`'s, shared with the batched lookup of
:class:`..generation.regen_transformers.TransformersRegenerator`.

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

from ..generation.prompt_lookup import LookupCursor, LookupWindows, References
from ..generation.regeneration import RegenerationRequest
from ..models.protocol import LanguageModel
from .cached_lm import CachedLM, SessionRegenerator


class LookupRegenerator(SessionRegenerator):
    """A :class:`..generation.regeneration.RegenerationBackend`: the reference backend's greedy
    continuations, a window of looked-up (or, with ``draft``, drafted) tokens verified per target forward.

    ``forward_calls`` counts the target forwards (verify passes and prefills), ``draft_forwarded``
    the tokens the draft ran; ``references`` caps the sequences kept per owner.
    """

    def __init__(self, lm: LanguageModel, min_window: int = 3, max_window: int = 64, references: int = 8,
                 draft: LanguageModel | None = None, draft_window: int = 8):
        if draft_window < 1:
            raise ValueError(f"draft_window must be >= 1, got {draft_window}")
        if draft is not None and draft.vocab_size != lm.vocab_size:
            raise ValueError(f"draft vocab {draft.vocab_size} != target vocab {lm.vocab_size}: they must share a tokenizer")
        self.windows = LookupWindows(min_window, max_window, references)
        super().__init__(lm, reuse=True)
        self.drafter = None if draft is None else CachedLM(draft, reuse=True)
        self.draft_window = draft_window
        self.refs = References(references)
        self.forward_calls = 0

    @property
    def draft_forwarded(self) -> int:
        return 0 if self.drafter is None else self.drafter.forwarded

    def continue_request(self, r: RegenerationRequest) -> list[int]:
        seq = self._continue(r)
        self.refs.add(r.owner, seq)
        return seq

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
        cursor = LookupCursor(self.refs.best(r.owner, r.prefix), self.windows)
        while True:
            room = r.max_len - len(seq) - 1  # the last new token is the target's
            guess, looked_up = self._proposal(seq, cursor.propose(seq, room), room)  # [W]
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
            cursor.update(seq, len(guess), k, looked_up)
