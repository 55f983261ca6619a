"""The fast miner: speculative regeneration, many prompts per batch, one regeneration backend.

Up to ``batch_size`` prompts run :func:`.miner.mining_steps` together. Every round, each prompt's
draft requests (:class:`.miner.Predict`, KV prefix reuse per prompt) and target-probability
requests are served inline until it asks for regenerations; then the regenerations of ALL active
prompts (up to ``depth`` each) go to the backend as one batch (:func:`..backends.regeneration.serve`).
A prompt whose record is complete hands it over and the next prompt takes its place. Records are
the same as :class:`.miner.LabelMiner`'s; see :mod:`..backends.regen_transformers` for when float32
batching can break a near-tie differently.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable, Sequence

from ..backends.protocol import LanguageModel
from ..backends.regeneration import RegenerationBackend, serve
from .cached_lm import CachedLM
from .checkers import TaskChecker
from .miner import MiningConfig, Predict, Regenerate, TargetProbs, TargetScorer, dtype_name, mining_steps


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
        self.dtype = dtype_name(target)
        self.stop_ids = frozenset(target.eos_token_ids if stop_ids is None else stop_ids)

    def mine_many(self, items: Iterable[tuple[str, list[int], dict | None]], on_record: Callable[[dict], None]) -> None:
        pending = iter(items)
        slots: list[dict] = []  # per active prompt: steps, its regeneration request, draft cache, scorer, start

        def advance(slot: dict, answer) -> bool:
            """Feed an answer, serve draft and probability requests inline; False when the prompt is done."""
            try:
                req = slot["steps"].send(answer)
                while not isinstance(req, Regenerate):
                    if isinstance(req, Predict):
                        req = slot["steps"].send(slot["draft"].predictions(req.seq))
                    else:
                        req = slot["steps"].send(slot["scorer"](req))
                slot["request"] = req
                return True
            except StopIteration as done:
                record = done.value
                record["dtype"] = self.dtype
                record["cost"].update(draft_forwarded_tokens=slot["draft"].forwarded,
                                      seconds=round(time.perf_counter() - slot["t0"], 4))
                on_record(record)
                return False

        def start_next() -> bool:
            while True:
                item = next(pending, None)
                if item is None:
                    return False
                pid, prompt, example = item
                slot = {"steps": mining_steps([int(t) for t in prompt], example, self.checker, self.decode,
                                              self.config, pid, self.stop_ids),
                        "draft": CachedLM(self.draft, self.config.reuse_cache), "t0": time.perf_counter(),
                        "scorer": TargetScorer(self.target, self.config.reuse_cache) if self.config.skip_unlikely else None}
                if advance(slot, None):
                    slots.append(slot)
                    return True

        while len(slots) < self.batch_size and start_next():
            pass
        while slots:
            requests = [r for s in slots for r in s["request"].requests]
            answers = iter(serve(self.regenerator, requests))
            alive = [s for s in slots if advance(s, [next(answers) for _ in s["request"].requests])]
            slots[:] = alive
            while len(slots) < self.batch_size and start_next():
                pass
