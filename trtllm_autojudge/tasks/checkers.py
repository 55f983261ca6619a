"""The built-in tasks' checkers (the :class:`~trtllm_autojudge.tasks.protocol.TaskChecker` interface).

- :class:`GSM8KChecker`: strict ``#### N``, else the last number (lm-eval-harness conventions);
- :class:`ProgramChecker`: executes the response as a Python program in the sandbox; the answer is
  the canonical number in ``answer``, or one of :data:`FAILURE_ANSWERS`;
- :class:`CodeChecker`: runs the response's code with the example's unit tests; ``pass``/``fail``.
"""
from __future__ import annotations

import math
import re
from collections import OrderedDict
from decimal import Decimal
from fractions import Fraction

from ..data.answers import STRICT_RE, canonical_number, final_answer, same_answer, strict_answer
from .sandbox import Outcome, Sandbox

CODE_BLOCK_RE = re.compile(r"```(?:python|py)?\n(.*?)(?:```|$)", re.S)
# The answer of a program that gives no number, per kind of failure: mining compares these like
# any other answer (two programs that both fail to compile agree; one that fails and one that
# gives a number do not), and none of them equals a gold answer.
FAILURE_ANSWERS = {
    "syntax": "error:syntax",  # does not compile
    "exception": "error:exception",  # raised, ran out of memory, or was killed by a signal
    "timeout": "error:timeout",  # past the wall-clock or CPU limit
    "no-answer": "error:no-answer",  # ran, but defined no `answer`
    "not-a-number": "error:not-a-number",  # `answer` is not a finite number
}


class GSM8KChecker:
    """Strict ``#### N`` when present, else the last number (lm-eval-harness conventions)."""

    name = "gsm8k"

    def answer(self, text: str, example: dict | None = None) -> str | None:
        return final_answer(text)

    def is_final(self, text: str) -> bool:
        # the first "#### N" decides the answer; it is complete once a character that cannot
        # continue the number follows it. A first "#### X" without a digit fixes nothing: the
        # answer then falls back to the last number in the text, which later text can change.
        match = STRICT_RE.search(text)
        return match is not None and match.end() < len(text) and strict_answer(text) is not None

    def same(self, a: str | None, b: str | None) -> bool:
        return (a is None and b is None) or same_answer(a, b)


def response_code(text: str) -> str:
    """The code of a response: its first fenced block when it has one, else the whole text."""
    blocks = CODE_BLOCK_RE.findall(text)
    return blocks[0] if blocks else text


class ProgramChecker:
    """The canonical number a response's program leaves in ``answer``, executed in the sandbox.

    A program never fixes its answer before it ends (a later line may reassign ``answer``), so
    :meth:`is_final` is always False: mining regenerates to the end of the response. Answers are
    cached by program text (at most ``cache_size``), so one text always gets one answer in a run.
    """

    name = "program"

    def __init__(self, timeout_s: float = 2.0, memory_mb: int = 512, cache_size: int = 20_000):
        self.sandbox = Sandbox(timeout_s, memory_mb)
        self.cache_size = cache_size
        self._cache: OrderedDict[str, str] = OrderedDict()

    def answer(self, text: str, example: dict | None = None) -> str:
        code = response_code(text)
        if code in self._cache:
            self._cache.move_to_end(code)
            return self._cache[code]
        answer = outcome_answer(self.sandbox.run(code, "answer"))
        self._cache[code] = answer
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return answer

    def is_final(self, text: str) -> bool:
        return False

    def same(self, a: str | None, b: str | None) -> bool:
        return (a is None and b is None) or same_answer(a, b)


def outcome_answer(outcome: Outcome) -> str:
    """A sandbox outcome as an answer: the canonical number, or the failure's answer."""
    if outcome.status != "ok":
        return FAILURE_ANSWERS[outcome.status]
    parse = {"float": float, "Fraction": Fraction, "Decimal": Decimal}.get(outcome.type, int)
    try:
        value = parse(outcome.value)
        if not math.isfinite(value):
            return FAILURE_ANSWERS["not-a-number"]
        return canonical_number(value)
    except (TypeError, ValueError, ArithmeticError):
        return FAILURE_ANSWERS["not-a-number"]


class CodeChecker:
    """Pass/fail of the response's code against the example's unit tests (``example["tests"]``).

    The code and the tests run together in the sandbox (mode ``run``: the standard library minus
    network, processes and ctypes; writes only in the run's directory); the answer is ``"pass"``
    when they complete without an exception inside the time and memory limits, else ``"fail"``.
    """

    name = "code"

    def __init__(self, timeout_s: float = 6.0, memory_mb: int = 512):
        self.sandbox = Sandbox(timeout_s, memory_mb)

    def run(self, code: str, tests: str) -> bool:
        return self.sandbox.run(code + "\n\n" + tests + "\n", "run").status == "ok"

    def answer(self, text: str, example: dict | None = None) -> str | None:
        if not example or not example.get("tests"):
            raise ValueError("the code checker needs the example's unit tests: give each prompt record a 'tests' field")
        return "pass" if self.run(response_code(text), example["tests"]) else "fail"

    def is_final(self, text: str) -> bool:
        return False

    def same(self, a: str | None, b: str | None) -> bool:
        return a == b
