"""Self-supervised label mining (the AutoJudge paper's "semi-greedy search").

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
(``reuse_cache``), and prompts can be batched (:mod:`.fast`).

**Speculative regeneration** (``depth`` S > 1). While labels are important ``cur`` does not
change, so every later mismatch of the same draft pass is already known. The regenerations of the
next S mismatches are requested at once (a sliding window: each result consumed makes room for
the next mismatch), under the hypothesis "everything before is important", and walked in order: every result up to and including the first UNIMPORTANT label is exactly what
the plain loop computes; the ones after it were made for a ``cur`` that no longer holds and are
dropped (cancelled where still running; what they had cost is counted as waste). With S = 1
this is the plain loop, and the labels are the same for every S.

**Skip unlikely** (``skip_unlikely`` P > 0, opt-in, as the research code does with P = 0.01): a
draft token whose target probability is below P is labelled important without regeneration. It
changes labels.

The algorithm is written once, as a generator (:func:`mining_steps`) that yields model requests
(:class:`Regenerate`, then :class:`Await` for each result in order and :class:`Drop` for the ones
no longer needed; :class:`Predict`; :class:`TargetProbs`) and receives their answers; a driver
serves them one prompt at a time (:class:`LabelMiner`, which computes a regeneration only when it
is awaited, so it never wastes one) or many prompts at once on a batching backend (:mod:`.fast`).
"""
from __future__ import annotations

import time
from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable, Generator, Sequence

from ..generation.regeneration import Regeneration, RegenerationBackend, RegenerationRequest, serve
from ..models.dtype import dtype_name
from ..models.protocol import LanguageModel
from ..tasks.protocol import TaskChecker
from .cached_lm import CachedLM, SessionRegenerator
from .eagle_predictions import draft_predictions

IMPORTANT, UNIMPORTANT = 1, 0


@dataclass
class MiningConfig:
    max_new_tokens: int = 256  # generation budget of the response (and of every regeneration)
    early_stop: bool = True
    reuse_cache: bool = True
    depth: int = 1  # speculation depth S: regenerations requested at once per prompt
    skip_unlikely: float = 0.0  # P: draft tokens with target probability < P are important, unregenerated

    def __post_init__(self):
        if self.depth < 1:
            raise ValueError(f"speculation depth must be >= 1, got {self.depth}")
        if not 0.0 <= self.skip_unlikely < 1.0:
            raise ValueError(f"--skip-unlikely must be in [0, 1), got {self.skip_unlikely}")


@dataclass
class Regenerate:
    """Target requests to queue (answer: None); their results are asked for one by one. Requests
    are numbered per prompt in the order they were made, from 0 (the response)."""

    requests: list[RegenerationRequest]


@dataclass
class Await:
    """The :class:`Regeneration` of request number ``index``."""

    index: int


@dataclass
class Drop:
    """Requests whose results are no longer needed (answer: the tokens each had forwarded, 0 for
    one never started)."""

    indices: list[int]


@dataclass
class Predict:
    """Draft request: teacher-forced greedy predictions over ``seq`` (entry j: after seq[:j+1])."""

    seq: list[int]


@dataclass
class TargetProbs:
    """Target request: the probability of ``tokens[k]`` right after ``seq[:positions[k]]``."""

    seq: list[int]
    positions: list[int]
    tokens: list[int]


def mining_steps(prompt: list[int], example: dict | None, checker: TaskChecker, decode: Callable[[list[int]], str],
                 config: MiningConfig, record_id=None, stop_ids: frozenset[int] = frozenset()
                 ) -> Generator[Regenerate | Await | Drop | Predict | TargetProbs, object, dict]:
    """The mining algorithm for one prompt; returns its record (fields in :mod:`.store`)."""
    if not prompt:
        raise ValueError("a prompt needs at least one token")
    n, max_len = len(prompt), len(prompt) + config.max_new_tokens
    text = lambda seq: decode(seq[n:])  # noqa: E731
    is_final = (lambda seq: checker.is_final(text(seq))) if config.early_stop else None
    owner = "" if record_id is None else str(record_id)
    request = lambda prefix: RegenerationRequest(tuple(prefix), max_len, stop_ids, is_final, owner)  # noqa: E731
    cost = {"regenerations": 0, "wasted_regenerations": 0, "wasted_target_tokens": 0, "skipped_unlikely": 0,
            "target_forwarded_tokens": 0}

    def fixed_at(seq: list[int]) -> int:
        """Smallest k with the answer fixed by seq[:k] (is_final is monotone); len(seq)+1 if none."""
        return n + bisect_left(range(n, len(seq) + 1), True, key=lambda k: checker.is_final(text(seq[:k])))

    yield Regenerate([request(prompt)])
    first = yield Await(0)
    requested = 1  # requests made so far: Await and Drop name them by this count
    cur = first.sequence
    cost["target_forwarded_tokens"] += first.forwarded
    response = cur[n:]
    answer = checker.answer(text(cur), example)
    labels, alt_answers, border = [], [], n
    while True:
        limit = min(len(cur), fixed_at(cur))
        preds = yield Predict(cur[:limit])  # preds[i - 1]: the draft's token at position i
        mismatches = [i for i in range(border, limit) if cur[i] != preds[i - 1]]
        if not mismatches:
            break
        unlikely = set()
        if config.skip_unlikely > 0:
            probs, forwarded = yield TargetProbs(cur[:limit], mismatches, [preds[i - 1] for i in mismatches])
            cost["target_forwarded_tokens"] += forwarded
            unlikely = {i for i, p in zip(mismatches, probs) if p < config.skip_unlikely}
        # a sliding window: up to `depth` regenerations in flight, all for this cur, launched in order
        inflight: dict[int, int] = {}  # position -> request index
        launched = 0  # mismatches[:launched] are requested (or skipped as unlikely)
        for i in mismatches:
            new = []
            while launched < len(mismatches) and len(inflight) + len(new) < config.depth:
                if mismatches[launched] not in unlikely:
                    new.append(mismatches[launched])
                launched += 1
            if new:
                yield Regenerate([request(cur[:j] + [preds[j - 1]]) for j in new])
                inflight.update((j, requested + k) for k, j in enumerate(new))
                requested += len(new)
            draft_token = preds[i - 1]
            if i in unlikely:
                important, alt_answer = True, None
                cost["skipped_unlikely"] += 1
            else:
                result = yield Await(inflight.pop(i))
                cost["regenerations"] += 1
                cost["target_forwarded_tokens"] += result.forwarded
                alt = result.sequence
                alt_answer = checker.answer(text(alt), example)
                important = not checker.same(answer, alt_answer)
            labels.append([i, IMPORTANT if important else UNIMPORTANT, cur[i], draft_token])
            alt_answers.append(alt_answer)
            border = i + 1
            if not important:  # cur changes: what was requested for the old cur is dropped
                if inflight:
                    spent = yield Drop(sorted(inflight.values()))
                    started = [f for f in spent if f > 0]
                    cost["regenerations"] += len(started)
                    cost["wasted_regenerations"] += len(started)
                    cost["wasted_target_tokens"] += sum(started)
                    cost["target_forwarded_tokens"] += sum(started)
                cur = alt
                break
    return {"id": record_id, "prompt_ids": list(prompt), "response_ids": response, "final_ids": cur,
            "target_answer": answer, "labels": labels,  # [position, important, target_token, draft_token]
            "alt_answers": alt_answers, "cost": cost}


def weights_dtype(lm) -> str | None:
    """'float32' / 'bfloat16' / ... of a model's weights (None for a fake model without a dtype)."""
    dtype = getattr(lm, "dtype", None)
    return None if dtype is None else dtype_name(dtype)


class TargetScorer:
    """Serves :class:`TargetProbs` with a :class:`CachedLM` of the target that keeps its logits."""

    def __init__(self, target: LanguageModel, reuse: bool = True):
        self.cached = CachedLM(target, reuse, keep_logits=True)

    def __call__(self, req: TargetProbs) -> tuple[list[float], int]:
        before = self.cached.forwarded
        self.cached.extend_to(req.seq)
        return self.cached.probabilities(req.positions, req.tokens), self.cached.forwarded - before


class LabelMiner:
    """Serves :func:`mining_steps` one prompt at a time, keeping both models' caches across prompts.

    Regenerations go to ``regenerator`` (default: the sequential :class:`.cached_lm.SessionRegenerator`
    on the target, today's miner).
    """

    def __init__(self, target: LanguageModel, draft: LanguageModel, checker: TaskChecker,
                 decode: Callable[[list[int]], str], config: MiningConfig | None = None,
                 stop_ids: Sequence[int] | None = None, regenerator: RegenerationBackend | None = None):
        if draft.vocab_size != target.vocab_size:
            raise ValueError(f"draft vocab {draft.vocab_size} != target vocab {target.vocab_size}: they must share a tokenizer")
        self.config = config or MiningConfig()
        self.regenerator = regenerator or SessionRegenerator(target, self.config.reuse_cache)
        self.draft = draft_predictions(draft, target, self.config.reuse_cache)
        self.scorer = TargetScorer(target, self.config.reuse_cache) if self.config.skip_unlikely > 0 else None
        self.checker, self.decode, self.dtype = checker, decode, weights_dtype(target)
        self.stop_ids = frozenset(target.eos_token_ids if stop_ids is None else stop_ids)

    def mine_many(self, items, on_record: Callable[[dict], None]) -> None:
        """Mine every ``(id, prompt_ids, example)`` in turn, handing each record to ``on_record``."""
        for pid, prompt_ids, example in items:
            on_record(self.mine(prompt_ids, example, pid))

    def mine(self, prompt_ids: Sequence[int], example: dict | None = None, record_id: str | int | None = None) -> dict:
        d_fwd, t0 = self.draft_forwarded(), time.perf_counter()
        steps = mining_steps([int(t) for t in prompt_ids], example, self.checker, self.decode, self.config,
                             record_id, self.stop_ids)
        answer, queued = None, []
        try:
            while True:
                req = steps.send(answer)
                if isinstance(req, Regenerate):  # served lazily, in order: nothing is ever dropped half-done
                    queued.extend(req.requests)
                    answer = None
                elif isinstance(req, Await):
                    (answer,) = serve(self.regenerator, [queued[req.index]])
                elif isinstance(req, Drop):
                    answer = [0] * len(req.indices)
                elif isinstance(req, TargetProbs):
                    answer = self.scorer(req)
                else:
                    answer = self.draft.predictions(req.seq)
        except StopIteration as done:
            record = done.value
        record["dtype"] = self.dtype
        record["cost"].update(draft_forwarded_tokens=self.draft_forwarded() - d_fwd,
                              seconds=round(time.perf_counter() - t0, 4))
        return record

    def draft_forwarded(self) -> int:
        """Draft tokens run so far: teacher-forced passes, and the regenerator's proposals (lookup-draft)."""
        return self.draft.forwarded + getattr(self.regenerator, "draft_forwarded", 0)
