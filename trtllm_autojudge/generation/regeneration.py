"""Regeneration requests: the one interface between label mining and a generation engine.

Mining (docs/mining.md) never generates text itself. It sends **regeneration requests**, each
a prefix of token ids, a length cap and a stop rule, and a **regeneration backend** serves them
with greedy continuations, as many at a time as it can:

- ``submit(requests)`` queues requests and returns one ticket each;
- ``collect()`` runs until at least one queued request is complete and returns the complete ones
  by ticket (``{}`` when nothing is queued);
- ``cancel(tickets)`` stops requests whose results are no longer needed and returns the tokens
  each had already forwarded (the waste).

Backends:

- :class:`..mining.cached_lm.SessionRegenerator`: one request at a time over any
  :class:`..models.protocol.LanguageModel` (the reference);
- :class:`.regen_transformers.TransformersRegenerator`: continuous batching, reusing the KV cache
  of shared prefixes (CPU or CUDA);
- :class:`.regen_trtllm.TrtllmRegenerator`: ``tensorrt_llm.LLM.generate`` with KV-cache block
  reuse (GPU hosts).

A backend returns the NEW tokens of each request. :class:`Server` checks every request against the
model's context, cuts what a backend returns where the plain greedy loop would have stopped (the
first stop token, the length cap, the first point where ``is_final`` holds), and asks again for
the rest of a continuation that came back short. :func:`serve` is the synchronous use of it.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
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
    """What :class:`Server` returns for one request."""

    sequence: list[int]  # prefix + continuation, cut as the plain greedy loop cuts it
    forwarded: int


class RegenerationBackend(Protocol):
    max_context: int  # longest prefix + continuation the model accepts

    def submit(self, requests: Sequence[RegenerationRequest]) -> list[int]:
        """Queue ``requests``; one ticket each."""
        ...

    def collect(self) -> dict[int, Continuation]:
        """Run until at least one queued request is complete; the complete ones by ticket."""
        ...

    def cancel(self, tickets: Sequence[int]) -> dict[int, int]:
        """Stop queued requests; the tokens each had forwarded (tickets already collected are ignored)."""
        ...


class RequestQueue:
    """The part every backend shares: queued requests by ticket, in submission order."""

    def __init__(self) -> None:
        self.queue: OrderedDict[int, RegenerationRequest] = OrderedDict()
        self._next = 0

    def submit(self, requests: Sequence[RegenerationRequest]) -> list[int]:
        """Queue ``requests``; one ticket each."""
        tickets = list(range(self._next, self._next + len(requests)))
        self._next += len(requests)
        self.queue.update(zip(tickets, requests))
        return tickets


class ContextLengthError(ValueError):
    pass


def model_context(lm) -> int:
    """The context length of a :class:`..models.protocol.LanguageModel` (unbounded for one without a config)."""
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


class Server:
    """A backend with the plain loop's stopping rules: context checks, cuts, and top-ups of short
    continuations. Same ``submit`` / ``collect`` / ``cancel`` as the backend, returning
    :class:`Regeneration`."""

    def __init__(self, backend: RegenerationBackend):
        self.backend = backend
        self._next = 0
        self._open: dict[int, tuple[RegenerationRequest, Regeneration]] = {}  # ticket -> request, so far
        self._backend_ticket: dict[int, int] = {}  # backend ticket -> our ticket
        self._ready: dict[int, Regeneration] = {}

    def submit(self, requests: Sequence[RegenerationRequest]) -> list[int]:
        for r in requests:
            check_context(r, self.backend.max_context)
        tickets = list(range(self._next, self._next + len(requests)))
        self._next += len(requests)
        send = []
        for t, r in zip(tickets, requests):
            if r.finished:
                self._ready[t] = Regeneration(list(r.prefix), 0)
            else:
                self._open[t] = (r, Regeneration(list(r.prefix), 0))
                send.append(t)
        self._send(send)
        return tickets

    def _send(self, tickets: list[int]) -> None:
        asked = []
        for t in tickets:
            r, so_far = self._open[t]
            asked.append(r if len(so_far.sequence) == len(r.prefix) else
                         RegenerationRequest(tuple(so_far.sequence), r.max_len, r.stop_ids, r.is_final, r.owner))
        for t, bt in zip(tickets, self.backend.submit(asked) if asked else []):
            self._backend_ticket[bt] = t

    def collect(self) -> dict[int, Regeneration]:
        while not self._ready and self._open:
            answers = self.backend.collect()
            if not answers:
                raise RuntimeError(f"{type(self.backend).__name__} returned nothing for {len(self._open)} open requests")
            again = []
            for bt, cont in answers.items():
                t = self._backend_ticket.pop(bt)
                r, so_far = self._open[t]
                asked = RegenerationRequest(tuple(so_far.sequence), r.max_len, r.stop_ids, r.is_final, r.owner)
                seq, complete = cut(asked, cont.tokens)
                if not complete and len(seq) == len(asked.prefix):
                    raise RuntimeError(f"prompt {r.owner!r}: {type(self.backend).__name__} returned no token for a "
                                       f"{len(asked.prefix)}-token prefix with {asked.budget} tokens of budget left")
                done = Regeneration(seq, so_far.forwarded + cont.forwarded)
                if complete:
                    del self._open[t]
                    self._ready[t] = done
                else:  # came back short: ask for the rest, as the greedy loop would go on
                    self._open[t] = (r, done)
                    again.append(t)
            self._send(again)
        ready, self._ready = self._ready, {}
        return ready

    def cancel(self, tickets: Sequence[int]) -> dict[int, int]:
        """Forwarded tokens of each cancelled ticket (also those already complete but not collected)."""
        wasted = {}
        by_backend = {t: bt for bt, t in self._backend_ticket.items()}
        spent = self.backend.cancel([by_backend[t] for t in tickets if t in by_backend])
        for t in tickets:
            if t in self._ready:
                wasted[t] = self._ready.pop(t).forwarded
            elif t in self._open:
                wasted[t] = self._open.pop(t)[1].forwarded + spent.get(by_backend.get(t), 0)
                self._backend_ticket.pop(by_backend.get(t), None)
        return wasted


def serve(backend: RegenerationBackend, requests: Sequence[RegenerationRequest]) -> list[Regeneration]:
    """Serve ``requests`` to completion (nothing else queued on ``backend``); results in request order."""
    server = Server(backend)
    tickets = server.submit(requests)
    results: dict[int, Regeneration] = {}
    while len(results) < len(tickets):
        results.update(server.collect())
    return [results[t] for t in tickets]
