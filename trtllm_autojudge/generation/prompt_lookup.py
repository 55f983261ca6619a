"""Windows of looked-up tokens to verify: the draft of regeneration by lookup.

A regeneration in label mining is the target's greedy continuation after ONE swapped token, and it
mostly repeats the sequence it branched from. Both lookup backends (the one-request-at-a-time
:class:`..mining.lookup.LookupRegenerator` and the batched
:class:`.regen_transformers.TransformersRegenerator` with ``lookup``) propose the next tokens from
that sequence, as prompt-lookup decoding does from the prompt, and verify a window of them per
target forward. This module is what they share:

- :class:`References`: an owner's recent complete sequences; a request's reference is the one
  sharing the longest prefix with it (the request itself when there is none, so a first response
  copies from its prompt);
- :class:`LookupCursor`: where a regeneration stands in its reference. The window continues the
  reference at ``len(seq) + offset``. The offset starts at 0 (the swapped token replaced one token)
  and stays after a mismatch (the target's token replaced the reference's), so a renamed variable
  costs one verify per occurrence. When a window is rejected at its first token, the offset is
  found again (:func:`realign`). The window doubles after a fully accepted one (up to
  ``max_window``) and drops to ``min_window`` after a rejection.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

NGRAMS = (3, 2)  # lengths of the tail searched in the reference to re-align, longest first


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix (binary search over C-level slice comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


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


@dataclass(frozen=True)
class LookupWindows:
    """Window sizes of lookup regeneration and how many sequences per owner are kept as references."""

    min_window: int = 3
    max_window: int = 64
    references: int = 8

    def __post_init__(self):
        if not 1 <= self.min_window <= self.max_window:
            raise ValueError(f"need 1 <= min_window <= max_window, got {self.min_window} and {self.max_window}")
        if self.references < 1:
            raise ValueError(f"references must be >= 1, got {self.references}")


class References:
    """Recent complete sequences per owner (the prompt a request belongs to), newest last."""

    def __init__(self, keep: int):
        self.keep = keep
        self.by_owner: dict[str, list[list[int]]] = {}

    def add(self, owner: str, seq: Sequence[int]) -> None:
        kept = self.by_owner.setdefault(owner, [])
        kept.append(list(seq))
        del kept[:-self.keep]

    def best(self, owner: str, prefix: Sequence[int]) -> list[int]:
        """The sequence of ``owner`` sharing the longest prefix with ``prefix`` (``prefix`` itself if none)."""
        best, best_len = list(prefix), -1
        for ref in self.by_owner.get(owner, ()):
            n = common_prefix_len(ref, prefix)
            if n > best_len:
                best, best_len = ref, n
        return best


@dataclass
class LookupCursor:
    """One regeneration's place in its reference, and the size of its next window."""

    ref: list[int]
    windows: LookupWindows
    offset: int = 0
    window: int = field(init=False)  # the next window's size

    def __post_init__(self):
        self.window = self.windows.min_window

    def propose(self, seq: Sequence[int], room: int) -> list[int]:
        """The looked-up window after ``seq``: at most ``room`` tokens (none when the reference ends)."""
        start = len(seq) + self.offset
        return self.ref[start:start + max(min(self.window, room), 0)]

    def update(self, seq: Sequence[int], proposed: int, accepted: int, looked_up: bool = True) -> None:
        """After a verify: ``seq`` now holds the accepted tokens and the target's own next token;
        ``proposed`` tokens were verified (looked up, or drafted when not ``looked_up``), ``accepted`` kept."""
        if looked_up and proposed and accepted == proposed:
            self.window = min(2 * self.window, self.windows.max_window)
            return
        self.window = self.windows.min_window
        if accepted == 0 or not looked_up:
            j = realign(seq, self.ref, len(seq) + self.offset)
            if j is not None:
                self.offset = j - len(seq)
