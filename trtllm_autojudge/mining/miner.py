"""Self-supervised label mining ("semi-greedy search", PAPER.md section 1).

Per prompt, both models greedy:
1. the target answers: ``cur = prompt + response``; its final answer ``A`` is the reference;
2. teacher-force the draft over ``cur``; take the earliest position ``i >= border`` where the
   draft's token differs from ``cur[i]``;
3. swap the draft's token in and let the TARGET continue greedily from ``cur[:i] + [draft]``;
4. same answer as ``A``: UNIMPORTANT (label 0) and ``cur`` becomes the continuation; different:
   IMPORTANT (label 1) and ``cur`` stays; record ``(i, label, target_token, draft_token)``, set
   ``border = i + 1`` and go to 2. Decisions are never revisited.

Positions where the answer is already fixed (``checker.is_final`` holds for ``cur[:i]``) are not
mined: no token there can change the answer. That makes the speed-ups exact: a regeneration stops
as soon as the answer is fixed (``early_stop``), the KV cache of the shared prefix is reused
(``reuse_cache``), and prompts can be batched (:mod:`.batched`). With all of them off this is the
plain algorithm, and the labels are the same.

The algorithm is written once, as a generator (:func:`mining_steps`) that yields model requests
(:class:`Generate`, :class:`Predict`) and receives their answers; a driver serves the requests one
prompt at a time (:class:`LabelMiner`) or many prompts per batch (:mod:`.batched`).
"""
from __future__ import annotations

import time
from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable, Generator, Sequence

from ..backends.protocol import LanguageModel
from .cached_lm import CachedLM
from .checkers import TaskChecker

IMPORTANT, UNIMPORTANT = 1, 0


@dataclass
class MiningConfig:
    max_new_tokens: int = 256  # generation budget of the response (and of every regeneration)
    early_stop: bool = True
    reuse_cache: bool = True


@dataclass
class Generate:
    """Target request: ``prefix`` + greedy continuation, up to ``max_len`` tokens, EOS, or (with
    early stop) the point where ``is_final`` says the answer is fixed."""

    prefix: list[int]
    max_len: int
    is_final: Callable[[list[int]], bool] | None


@dataclass
class Predict:
    """Draft request: teacher-forced greedy predictions over ``seq`` (entry j: after seq[:j+1])."""

    seq: list[int]


def mining_steps(prompt: list[int], example: dict | None, checker: TaskChecker, decode: Callable[[list[int]], str],
                 config: MiningConfig, record_id=None) -> Generator[Generate | Predict, list[int], dict]:
    """The mining algorithm for one prompt; returns its record (fields in :mod:`.store`)."""
    if not prompt:
        raise ValueError("a prompt needs at least one token")
    n, max_len = len(prompt), len(prompt) + config.max_new_tokens
    text = lambda seq: decode(seq[n:])  # noqa: E731
    is_final = (lambda seq: checker.is_final(text(seq))) if config.early_stop else None

    def fixed_at(seq: list[int]) -> int:
        """Smallest k with the answer fixed by seq[:k] (is_final is monotone); len(seq)+1 if none."""
        return n + bisect_left(range(n, len(seq) + 1), True, key=lambda k: checker.is_final(text(seq[:k])))

    cur = yield Generate(list(prompt), max_len, is_final)
    response = cur[n:]
    answer = checker.answer(text(cur), example)
    labels, alt_answers, border = [], [], n
    while True:
        limit = min(len(cur), fixed_at(cur))
        preds = yield Predict(cur[:limit])  # preds[i - 1]: the draft's token at position i
        i = next((i for i in range(border, limit) if cur[i] != preds[i - 1]), None)
        if i is None:
            break
        draft_token = preds[i - 1]
        alt = yield Generate(cur[:i] + [draft_token], max_len, is_final)
        alt_answer = checker.answer(text(alt), example)
        important = not checker.same(answer, alt_answer)
        labels.append([i, IMPORTANT if important else UNIMPORTANT, cur[i], draft_token])
        alt_answers.append(alt_answer)
        if not important:
            cur = alt
        border = i + 1
    return {"id": record_id, "prompt_ids": list(prompt), "response_ids": response, "final_ids": cur,
            "target_answer": answer, "labels": labels,  # [position, important, target_token, draft_token]
            "alt_answers": alt_answers}


class LabelMiner:
    """Serves :func:`mining_steps` one prompt at a time, keeping both models' caches across prompts."""

    def __init__(self, target: LanguageModel, draft: LanguageModel, checker: TaskChecker,
                 decode: Callable[[list[int]], str], config: MiningConfig | None = None,
                 stop_ids: Sequence[int] | None = None):
        if draft.vocab_size != target.vocab_size:
            raise ValueError(f"draft vocab {draft.vocab_size} != target vocab {target.vocab_size}: they must share a tokenizer")
        self.config = config or MiningConfig()
        self.target = CachedLM(target, self.config.reuse_cache)
        self.draft = CachedLM(draft, self.config.reuse_cache)
        self.checker, self.decode = checker, decode
        self.stop_ids = set(target.eos_token_ids if stop_ids is None else stop_ids)

    def mine_many(self, items, on_record: Callable[[dict], None]) -> None:
        """Mine every ``(id, prompt_ids, example)`` in turn, handing each record to ``on_record``."""
        for pid, prompt_ids, example in items:
            on_record(self.mine(prompt_ids, example, pid))

    def mine(self, prompt_ids: Sequence[int], example: dict | None = None, record_id: str | int | None = None) -> dict:
        t_fwd, d_fwd, t0 = self.target.forwarded, self.draft.forwarded, time.perf_counter()
        steps = mining_steps([int(t) for t in prompt_ids], example, self.checker, self.decode, self.config, record_id)
        answer = None
        try:
            while True:
                req = steps.send(answer)
                if isinstance(req, Generate):
                    answer = self.target.continue_greedy(req.prefix, req.max_len, self.stop_ids, req.is_final)
                else:
                    answer = self.draft.predictions(req.seq)
        except StopIteration as done:
            record = done.value
        record["cost"] = {"target_forwarded_tokens": self.target.forwarded - t_fwd,
                          "draft_forwarded_tokens": self.draft.forwarded - d_fwd,
                          "seconds": round(time.perf_counter() - t0, 4)}
        return record
