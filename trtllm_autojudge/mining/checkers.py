"""Task checkers: what the "final answer" of a response is, for label mining and evaluation.

A checker has
- ``answer(text, example) -> str | None``: the final answer of a response (``example`` is the
  prompt's record: code tasks need its unit tests);
- ``is_final(text) -> bool``: True once no continuation of ``text`` can change ``answer``; the
  miner stops a regeneration there (GSM8K: a complete ``#### N`` line);
- ``same(a, b) -> bool``: whether two answers agree (two missing answers agree: nothing changed).

Checkers are chosen by name (``gsm8k``, ``exact``, ``code``) or by import path ``module:Class``.
"""
from __future__ import annotations

import importlib
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
from typing import Protocol

from ..data.answers import STRICT_RE, final_answer, same_answer


class TaskChecker(Protocol):
    name: str

    def answer(self, text: str, example: dict | None = None) -> str | None: ...

    def is_final(self, text: str) -> bool: ...

    def same(self, a: str | None, b: str | None) -> bool: ...


class GSM8KChecker:
    """Strict ``#### N`` when present, else the last number (lm-eval-harness conventions)."""

    name = "gsm8k"

    def answer(self, text: str, example: dict | None = None) -> str | None:
        return final_answer(text)

    def is_final(self, text: str) -> bool:
        # the first "#### N" decides the answer; it is complete once a character that cannot
        # continue the number follows it
        match = STRICT_RE.search(text)
        return match is not None and match.end() < len(text) and final_answer(text) is not None

    def same(self, a: str | None, b: str | None) -> bool:
        return (a is None and b is None) or same_answer(a, b)


class ExactMatchChecker:
    """The whole response (stripped) is the answer; for tasks with a short closed-form output."""

    name = "exact"

    def answer(self, text: str, example: dict | None = None) -> str | None:
        return text.strip()

    def is_final(self, text: str) -> bool:
        return False

    def same(self, a: str | None, b: str | None) -> bool:
        return a == b


CODE_BLOCK_RE = re.compile(r"```(?:python|py)?\n(.*?)(?:```|$)", re.S)
# Runs first in the sandboxed interpreter: refuse every network operation through an audit hook.
NO_NETWORK = """import sys
def _deny(event, args):
    if event.startswith(("socket.", "urllib.", "http.")) or event == "socket.getaddrinfo":
        raise PermissionError("network access is disabled in the autojudge sandbox")
sys.addaudithook(_deny)
del _deny
"""


class CodeChecker:
    """Pass/fail of the response's code against the example's unit tests (``example["tests"]``).

    Each run is a fresh ``python -I`` in a temporary directory, in its own process group, with CPU,
    memory and file-size limits and an audit hook that refuses network access; on timeout the whole
    process group is killed. The answer is ``"pass"`` or ``"fail"``, compared as in the paper.
    """

    name = "code"

    def __init__(self, timeout_s: float = 6.0, memory_mb: int = 512):
        self.timeout_s, self.memory_mb = float(timeout_s), int(memory_mb)

    def _limits(self):  # runs in the child before exec
        cpu = int(self.timeout_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        mem = self.memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (2**20, 2**20))

    def run(self, code: str, tests: str) -> bool:
        with tempfile.TemporaryDirectory(prefix="autojudge-sandbox-") as tmp:
            path = os.path.join(tmp, "solution_test.py")
            with open(path, "w") as f:
                f.write(NO_NETWORK + "\n" + code + "\n\n" + tests + "\n")
            proc = subprocess.Popen([sys.executable, "-I", path], cwd=tmp, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"},
                                    preexec_fn=self._limits, start_new_session=True)
            try:
                return proc.wait(timeout=self.timeout_s) == 0
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return False

    def answer(self, text: str, example: dict | None = None) -> str | None:
        if not example or "tests" not in example:
            raise ValueError("the code checker needs the example's unit tests: give each prompt record a 'tests' field")
        blocks = CODE_BLOCK_RE.findall(text)
        code = blocks[0] if blocks else text
        return "pass" if self.run(code, example["tests"]) else "fail"

    def is_final(self, text: str) -> bool:
        return False

    def same(self, a: str | None, b: str | None) -> bool:
        return a == b


BUILTIN = {"gsm8k": GSM8KChecker, "exact": ExactMatchChecker, "code": CodeChecker}


def load_checker(spec: str) -> TaskChecker:
    """A checker by name (gsm8k, exact, code) or import path ``package.module:ClassName``."""
    if spec in BUILTIN:
        return BUILTIN[spec]()
    if ":" not in spec:
        raise ValueError(f"unknown checker {spec!r}: use one of {sorted(BUILTIN)} or 'module:ClassName'")
    module, cls = spec.split(":", 1)
    try:
        return getattr(importlib.import_module(module), cls)()
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load checker {spec!r}: {e}") from e
