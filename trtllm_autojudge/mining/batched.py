"""Batched mining: many prompts' :func:`.miner.mining_steps` served together.

Every round, the target's :class:`.miner.Generate` requests of all active prompts run as ONE
left-padded greedy batch (each row stops on its own: EOS, budget, or answer fixed); the draft's
:class:`.miner.Predict` requests are served per prompt with KV prefix reuse. Padding changes
floating-point reductions, so in float32 a near-tie can break differently than at batch 1 (the
labels then differ from the plain algorithm's); in float64 they are identical (tested).
"""
from __future__ import annotations

import time
from typing import Callable, Iterable, Sequence

import torch
from transformers import DynamicCache

from ..backends.transformers_backend import TransformersLM
from .cached_lm import CachedLM
from .checkers import TaskChecker
from .miner import Generate, MiningConfig, mining_steps


@torch.inference_mode()
def batched_continue(lm: TransformersLM, requests: Sequence[Generate], stop_ids: set[int], pad_id: int = 0) -> list[list[int]]:
    """Greedy continuations of every request's prefix, in one left-padded batch."""
    results = [list(r.prefix) for r in requests]
    live = [i for i, r in enumerate(requests) if len(r.prefix) < r.max_len and r.prefix[-1] not in stop_ids]
    if not live:
        return results
    device = lm.device
    width = max(len(requests[i].prefix) for i in live)
    ids = torch.full((len(live), width), pad_id, dtype=torch.long)  # [b, width], left padded
    mask = torch.zeros((len(live), width), dtype=torch.long)  # [b, width]
    for row, i in enumerate(live):
        ids[row, width - len(requests[i].prefix):] = torch.tensor(requests[i].prefix)
        mask[row, width - len(requests[i].prefix):] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # [b, width]
    cache = DynamicCache(config=lm.model.config)
    running = [True] * len(live)
    hidden = lm.model.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache,
                            use_cache=True).last_hidden_state[:, -1]  # [b, H]
    while True:
        tokens = lm.model.lm_head(hidden).argmax(-1)  # [b]
        for row, i in enumerate(live):
            if not running[row]:
                continue
            seq, req = results[i], requests[i]
            seq.append(int(tokens[row]))
            if seq[-1] in stop_ids or len(seq) >= req.max_len or (req.is_final is not None and req.is_final(seq)):
                running[row] = False
        if not any(running):
            return results
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)  # [b, width + t]
        positions = positions[:, -1:] + 1  # [b, 1]
        hidden = lm.model.model(input_ids=tokens[:, None], attention_mask=mask, position_ids=positions, cache=cache,
                                use_cache=True).last_hidden_state[:, -1]


class BatchedLabelMiner:
    """Mines up to ``batch_size`` prompts at a time (same records as :class:`.miner.LabelMiner`)."""

    def __init__(self, target: TransformersLM, draft, checker: TaskChecker, decode: Callable[[list[int]], str],
                 config: MiningConfig | None = None, batch_size: int = 8, stop_ids: Sequence[int] | None = None):
        if draft.vocab_size != target.vocab_size:
            raise ValueError(f"draft vocab {draft.vocab_size} != target vocab {target.vocab_size}: they must share a tokenizer")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.target, self.draft, self.checker, self.decode = target, draft, checker, decode
        self.config, self.batch_size = config or MiningConfig(), batch_size
        self.stop_ids = set(target.eos_token_ids if stop_ids is None else stop_ids)

    def mine_many(self, items: Iterable[tuple[str, list[int], dict | None]], on_record: Callable[[dict], None]) -> None:
        pending = iter(items)
        slots: list[dict] = []  # per active prompt: steps, request, draft cache, costs, start time

        def start_next() -> bool:
            item = next(pending, None)
            if item is None:
                return False
            pid, prompt, example = item
            steps = mining_steps([int(t) for t in prompt], example, self.checker, self.decode, self.config, pid)
            slots.append({"steps": steps, "request": next(steps), "draft": CachedLM(self.draft), "target_tokens": 0,
                          "t0": time.perf_counter()})
            return True

        def advance(slot: dict, answer) -> bool:
            """Feed an answer; serve draft requests inline; False when the prompt is done."""
            try:
                slot["request"] = slot["steps"].send(answer)
                while not isinstance(slot["request"], Generate):
                    slot["request"] = slot["steps"].send(slot["draft"].predictions(slot["request"].seq))
                return True
            except StopIteration as done:
                record = done.value
                record["cost"] = {"target_forwarded_tokens": slot["target_tokens"],
                                  "draft_forwarded_tokens": slot["draft"].forwarded,
                                  "seconds": round(time.perf_counter() - slot["t0"], 4)}
                on_record(record)
                return False

        while len(slots) < self.batch_size and start_next():
            pass
        while slots:
            requests = [s["request"] for s in slots]
            answers = batched_continue(self.target, requests, self.stop_ids)
            width = max(len(r.prefix) for r in requests)
            alive = []
            for slot, req, ans in zip(slots, requests, answers):
                slot["target_tokens"] += width + len(ans) - len(req.prefix)  # padded prefill + generated
                if advance(slot, ans):
                    alive.append(slot)
            slots[:] = alive
            while len(slots) < self.batch_size and start_next():
                pass
