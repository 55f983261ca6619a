"""Regeneration requests: the one interface between label mining and a generation engine.

Mining (PAPER.md section 1) never generates text itself. It sends **regeneration requests**, each
a prefix of token ids, a length cap and a stop rule, and a **regeneration backend** answers a
batch of them with greedy continuations. Backends:

- :class:`..mining.cached_lm.SessionRegenerator`: one request at a time over any
  :class:`.protocol.LanguageModel` (the reference);
- :class:`.regen_transformers.TransformersRegenerator`: batched, reusing the KV cache of shared
  prefixes (CPU or CUDA);
- :class:`.regen_trtllm.TrtllmRegenerator`: ``tensorrt_llm.LLM.generate`` with KV-cache block
  reuse (GPU hosts).

A backend returns the NEW tokens of each request. :func:`serve` checks every request against the
model's context, cuts what a backend returns where the plain greedy loop would have stopped (the
first stop token, the length cap, the first point where ``is_final`` holds), and asks again for
the rest of a continuation that came back short.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence


@dataclass(frozen=True)
class RegenerationRequest:
    """``prefix`` + its greedy continuation, up to ``max_len`` tokens in all, a stop token, or the
    first point where ``is_final(sequence)`` holds (the answer can no longer change)."""

    prefix: tuple[int, ...]  # [P] token ids
    max_len: int  # length cap of prefix + continuation
    stop_ids: frozenset[int]
    is_final: Callable[[list[int]], bool] | None = None
    owner: str = ""  # the prompt it belongs to: named in errors, groups shared prefixes

    @property
    def budget(self) -> int:
        """Tokens the continuation may add."""
        return max(self.max_len - len(self.prefix), 0)

    @property
    def finished(self) -> bool:
        """Nothing to generate: the prefix already fills the cap or ends with a stop token."""
        return self.budget == 0 or (bool(self.prefix) and self.prefix[-1] in self.stop_ids)


@dataclass
class Continuation:
    """What a backend returns for one request."""

    tokens: list[int]  # [T] new tokens (possibly more or fewer than the request's stop rule allows)
    forwarded: int  # tokens run through the model for it (the cost)


@dataclass
class Regeneration:
    """What :func:`serve` returns for one request."""

    sequence: list[int]  # prefix + continuation, cut as the plain greedy loop cuts it
    forwarded: int


class RegenerationBackend(Protocol):
    max_context: int  # longest prefix + continuation the model accepts

    def generate(self, requests: Sequence[RegenerationRequest]) -> list[Continuation]:
        """Greedy continuations of every request, in request order."""
        ...


class ContextLengthError(ValueError):
    pass


def model_context(lm) -> int:
    """The context length of a :class:`.protocol.LanguageModel` (unbounded for one without a config)."""
    config = getattr(getattr(lm, "model", None), "config", None)
    return int(getattr(config, "max_position_embeddings", None) or 2**62)


def check_context(request: RegenerationRequest, max_context: int) -> None:
    if request.max_len > max_context:
        raise ContextLengthError(
            f"prompt {request.owner!r}: a regeneration may reach {request.max_len} tokens "
            f"({len(request.prefix)} in its prefix), more than the target's context of {max_context}: "
            f"lower --max-new-tokens or drop this prompt")


def cut(request: RegenerationRequest, tokens: Sequence[int]) -> tuple[list[int], bool]:
    """(prefix + tokens cut where the plain greedy loop stops, whether that loop would stop there)."""
    seq = list(request.prefix)
    if request.finished:
        return seq, True
    new = [int(t) for t in tokens[: request.budget]]
    stop = next((j for j, t in enumerate(new) if t in request.stop_ids), None)
    if stop is not None:
        new = new[: stop + 1]
    seq += new
    if request.is_final is not None and new:
        # is_final is monotone: the first k with the answer fixed by seq[:k] (one token at least)
        start = len(request.prefix) + 1
        ks = range(start, len(seq) + 1)
        k = start + bisect_left(ks, True, key=lambda k: request.is_final(seq[:k]))
        if k <= len(seq):
            return seq[:k], True
    return seq, stop is not None or len(seq) >= request.max_len


def serve(backend: RegenerationBackend, requests: Sequence[RegenerationRequest]) -> list[Regeneration]:
    """Serve ``requests`` on ``backend`` in batches until every continuation is complete."""
    for r in requests:
        check_context(r, backend.max_context)
    done = [Regeneration(list(r.prefix), 0) for r in requests]
    pending = [i for i, r in enumerate(requests) if not r.finished]
    while pending:
        asked = [requests[i] if len(done[i].sequence) == len(requests[i].prefix) else
                 RegenerationRequest(tuple(done[i].sequence), requests[i].max_len, requests[i].stop_ids,
                                     requests[i].is_final, requests[i].owner) for i in pending]
        answers = backend.generate(asked)
        if len(answers) != len(asked):
            raise RuntimeError(f"{type(backend).__name__} answered {len(answers)} of {len(asked)} requests")
        still = []
        for i, req, ans in zip(pending, asked, answers):
            seq, complete = cut(req, ans.tokens)
            if not complete and len(seq) == len(req.prefix):
                raise RuntimeError(f"prompt {req.owner!r}: {type(backend).__name__} returned no token for a "
                                   f"{len(req.prefix)}-token prefix with {req.budget} tokens of budget left")
            done[i] = Regeneration(seq, done[i].forwarded + ans.forwarded)
            if not complete:  # came back short: ask for the rest, as the greedy loop would go on
                still.append(i)
        pending = still
    return done
