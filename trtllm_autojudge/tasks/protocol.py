"""The checker interface label mining and evaluation read answers through.

A checker has
- ``answer(text, example) -> str | None``: the final answer of a response (``example`` is the
  prompt's record: code tasks need its unit tests);
- ``is_final(text) -> bool``: True once no continuation of ``text`` can change ``answer``; the
  miner stops a regeneration there (GSM8K: a complete ``#### N`` line);
- ``same(a, b) -> bool``: whether two answers agree (two missing answers agree: nothing changed).

Every task (:mod:`trtllm_autojudge.tasks`) holds one, as ``task.checker``; the built-in checkers
live in :mod:`trtllm_autojudge.tasks.checkers`.
"""
from __future__ import annotations

from typing import Protocol


class TaskChecker(Protocol):
    name: str

    def answer(self, text: str, example: dict | None = None) -> str | None: ...

    def is_final(self, text: str) -> bool: ...

    def same(self, a: str | None, b: str | None) -> bool: ...
