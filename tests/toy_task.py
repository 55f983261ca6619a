"""A user's task for the routing tests (loaded as ``--task toy_task:ToyTask``): it records every use."""
from __future__ import annotations

from trtllm_autojudge.data.problem import Problem
from trtllm_autojudge.tasks import Task

CALLS: list[str] = []


class ToyTokenizer:
    """Token ids as text: ``decode([5, 7]) == "5 7"`` (what the tiny random pair needs)."""

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(int(i)) for i in ids)


class KeyTokenChecker:
    """Answer: the response's token ids divisible by 5; no early stop."""

    name = "key-tokens"

    def answer(self, text, example=None):
        CALLS.append("answer")
        return " ".join(t for t in text.split() if int(t) % 5 == 0)

    def is_final(self, text):
        return False

    def same(self, a, b):
        return a == b


class ToyTask(Task):
    name = "toy"
    system_prompt = "toy"

    def make_checker(self):
        return KeyTokenChecker()

    def problems(self, split, originals, variants_per_template, seed):
        CALLS.append("problems")
        return [Problem(f"q{i}", "unused", "0", source="toy") for i in range(3)]

    def prompt_ids(self, tokenizer, question):
        CALLS.append("prompt_ids")
        return [3 + int(question[1:]), 11, 17, 29, 41]
