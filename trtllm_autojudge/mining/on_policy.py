"""On-policy labels: the judge's own acceptances, labelled along its own decoding.

The semi-greedy miner (:mod:`.miner`) labels the mismatches of one trajectory:
the target's response, with each swap kept only where mining found it harmless. A judge decodes
another trajectory: its own acceptances, harmful ones included, stay in the context of every later
decision. This miner labels exactly those decisions.

Per prompt, with the judge at threshold ``T`` (a rule, :class:`..decoding.modes.JudgeRule`):

1. decode losslessly: the reference answer ``a_0`` (the target's greedy answer);
2. decode with the judge: the response and its judged acceptances ``j = 1..J``, each at output index
   ``i_j``, the draft token ``d_j`` kept where the target wanted ``t_j``;
3. ``a_j``: the answer of the target's greedy continuation of ``prompt + response[:i_j + 1]`` (the
   state right after acceptance j, earlier acceptances included). The tokens between two
   acceptances are the target's greedy ones, so the continuation after acceptance j-1 passes
   through them and meets ``t_j`` at ``i_j``: ``a_{j-1}`` is also the answer had acceptance j been
   rejected. After the last acceptance the response itself is that continuation, so
   ``a_J`` is the response's answer and only ``J - 1`` continuations are decoded;
4. acceptance j is IMPORTANT when ``a_j`` differs from ``a_{j-1}``: it changed the answer of the
   state it was made in.

Records use the label-file format of :mod:`.store` (``final_ids`` is the judge's response, which
holds every ``d_j``; a label is ``[position, important, target_token, draft_token]``), so
``features`` and ``train`` read them as they read mined labels. ``policy`` records the judge,
threshold and draft tree. Continuations are lossless speculative decoding with the same pair and
tree: the target's greedy continuation (token for token in float32; in bf16 up to near-ties, as
everywhere else in this project).
"""
from __future__ import annotations

import time
from typing import Callable, Iterable, Sequence

from ..decoding.modes import JudgeRule
from ..decoding.speculative import speculative_generate
from ..decoding.tree import DraftTree
from ..tasks.protocol import TaskChecker


class OnPolicyMiner:
    """Labels of a judge's acceptances along its own decoding (module docstring).

    ``mine_many(items, on_record)`` is the interface :func:`.run.mine_prompts` drives.
    """

    def __init__(self, target, draft, checker: TaskChecker, decode: Callable[[list[int]], str], rule: JudgeRule,
                 tree: DraftTree, max_new_tokens: int, dtype: str):
        self.target, self.draft, self.checker, self.decode = target, draft, checker, decode
        self.rule, self.tree, self.max_new_tokens, self.dtype = rule, tree, max_new_tokens, dtype

    def _decode(self, prompt: list[int], rule: JudgeRule | None, budget: int) -> list[int]:
        return speculative_generate(self.target, self.draft, prompt, tree=self.tree, rule=rule,
                                    max_new_tokens=budget).tokens

    def mine(self, prompt_ids: Sequence[int], example: dict | None = None, record_id: str | int | None = None) -> dict:
        t0, prompt = time.perf_counter(), [int(t) for t in prompt_ids]
        answer = lambda tokens: self.checker.answer(self.decode(tokens), example)  # noqa: E731
        reference = answer(self._decode(prompt, None, self.max_new_tokens))
        run = speculative_generate(self.target, self.draft, prompt, tree=self.tree, rule=self.rule,
                                   max_new_tokens=self.max_new_tokens)
        answers, labels, forwarded = [reference], [], 0
        for j, (i, d, t) in enumerate(run.judged_tokens):
            if j == len(run.judged_tokens) - 1:
                state = answer(run.tokens)
            else:
                kept = run.tokens[: i + 1]
                rest = self._decode(prompt + kept, None, self.max_new_tokens - len(kept))
                forwarded += len(rest)
                state = answer(kept + rest)
            labels.append([len(prompt) + i, int(not self.checker.same(state, answers[-1])), int(t), int(d)])
            answers.append(state)
        return {"id": record_id, "prompt_ids": prompt, "final_ids": prompt + run.tokens, "target_answer": reference,
                "labels": labels, "alt_answers": answers[1:], "dtype": self.dtype,
                "policy": {"judge": self.rule.head.fingerprint(), "threshold": self.rule.threshold,
                           "tree_parents": list(self.tree.parents)},
                "cost": {"regenerations": max(len(labels) - 1, 0), "target_forwarded_tokens": forwarded,
                         "seconds": time.perf_counter() - t0}}

    def mine_many(self, items: Iterable[tuple[str, list[int], dict | None]], on_record: Callable[[dict], None]) -> None:
        for record_id, prompt_ids, example in items:
            on_record(self.mine(prompt_ids, example, record_id))
