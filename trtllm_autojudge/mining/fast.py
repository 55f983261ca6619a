"""The fast miner: speculative regeneration over many prompts, on one regeneration backend.

Up to ``batch_size`` prompts run :func:`.miner.mining_steps` at once. Each prompt's draft requests
(:class:`.miner.Predict`, KV prefix reuse per prompt) and target-probability requests are served
inline; its regenerations (up to ``depth`` in flight per prompt) are queued on the backend, which
batches everything queued (continuous batching on the transformers backend). Whenever results
come in, every prompt whose awaited result is there moves on: it labels, queues its next
regenerations, cancels the ones an unimportant label made useless, or hands over its record and
makes room for the next prompt. Records are the same as :class:`.miner.LabelMiner`'s; see
:mod:`..generation.regen_transformers` for when float32 batching can break a near-tie differently.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Generator, Iterable, Sequence

from ..generation.regeneration import Regeneration, RegenerationBackend, Server
from ..models.protocol import LanguageModel
from ..tasks.protocol import TaskChecker
from .cached_lm import CachedLM
from .eagle_predictions import EaglePredictions, draft_predictions
from .miner import (Await, Drop, MiningConfig, Predict, Regenerate, TargetProbs, TargetScorer, mining_steps,
                    weights_dtype)


@dataclass
class Slot:
    """One prompt in flight."""

    steps: Generator
    draft: CachedLM | EaglePredictions
    scorer: TargetScorer | None
    t0: float
    tickets: list[int] = field(default_factory=list)  # request number -> server ticket
    results: dict[int, Regeneration] = field(default_factory=dict)  # ticket -> result not yet awaited
    waiting: int | None = None  # the ticket it waits for


class FastLabelMiner:
    def __init__(self, target: LanguageModel, draft: LanguageModel, checker: TaskChecker,
                 decode: Callable[[list[int]], str], regenerator: RegenerationBackend,
                 config: MiningConfig | None = None, batch_size: int = 8, stop_ids: Sequence[int] | None = None):
        if draft.vocab_size != target.vocab_size:
            raise ValueError(f"draft vocab {draft.vocab_size} != target vocab {target.vocab_size}: they must share a tokenizer")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.target, self.draft, self.checker, self.decode = target, draft, checker, decode
        self.regenerator, self.config, self.batch_size = regenerator, config or MiningConfig(), batch_size
        self.dtype = weights_dtype(target)
        self.stop_ids = frozenset(target.eos_token_ids if stop_ids is None else stop_ids)

    def mine_many(self, items: Iterable[tuple[str, list[int], dict | None]], on_record: Callable[[dict], None]) -> None:
        pending = iter(items)
        server = Server(self.regenerator)
        owner: dict[int, Slot] = {}  # ticket -> slot
        slots: list[Slot] = []

        def advance(slot: Slot, answer) -> bool:
            """Run the prompt until it waits for a result not in yet; False when it is done."""
            try:
                while True:
                    req = slot.steps.send(answer)
                    if isinstance(req, Predict):
                        answer = slot.draft.predictions(req.seq)
                    elif isinstance(req, TargetProbs):
                        answer = slot.scorer(req)
                    elif isinstance(req, Regenerate):
                        tickets = server.submit(req.requests)
                        slot.tickets += tickets
                        owner.update(dict.fromkeys(tickets, slot))
                        answer = None
                    elif isinstance(req, Drop):
                        tickets = [slot.tickets[k] for k in req.indices]
                        spent = server.cancel([t for t in tickets if t not in slot.results])
                        answer = [slot.results.pop(t).forwarded if t in slot.results else spent.get(t, 0) for t in tickets]
                        for t in tickets:
                            owner.pop(t, None)
                    else:  # Await
                        ticket = slot.tickets[req.index]
                        if ticket not in slot.results:
                            slot.waiting = ticket
                            return True
                        answer = slot.results.pop(ticket)
                        owner.pop(ticket, None)
            except StopIteration as done:
                record = done.value
                record["dtype"] = self.dtype
                record["cost"].update(draft_forwarded_tokens=slot.draft.forwarded,
                                      seconds=round(time.perf_counter() - slot.t0, 4))
                on_record(record)
                return False

        def fill() -> None:
            while len(slots) < self.batch_size:
                item = next(pending, None)
                if item is None:
                    return
                pid, prompt, example = item
                slot = Slot(mining_steps([int(t) for t in prompt], example, self.checker, self.decode, self.config, pid,
                                         self.stop_ids),
                            draft_predictions(self.draft, self.target, self.config.reuse_cache),
                            TargetScorer(self.target, self.config.reuse_cache) if self.config.skip_unlikely else None,
                            time.perf_counter())
                if advance(slot, None):
                    slots.append(slot)

        fill()
        while slots:
            ready = server.collect()
            if not ready:
                raise RuntimeError("the regeneration backend has nothing left to run, yet prompts wait for results")
            for ticket, result in ready.items():
                if ticket in owner:
                    owner[ticket].results[ticket] = result
            for slot in list(slots):
                if slot.waiting in slot.results:
                    ticket, slot.waiting = slot.waiting, None
                    owner.pop(ticket, None)
                    if not advance(slot, slot.results.pop(ticket)):
                        slots.remove(slot)
            fill()
