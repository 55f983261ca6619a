"""Problems as JSON Lines: one ``{"question": ..., "answer": ...}`` object per line.

``answer`` is a worked solution ending in ``#### N`` (GSM8K), just the final answer (a number), or
any response (a program) when the record also has ``gold``, the final answer. Optional keys
``template_id`` and ``source`` are kept; others are ignored. Blank lines are skipped.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from .answers import canonical_number, normalize_answer, strict_answer
from .problem import Problem


def _problem(record, where: str) -> Problem:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object with 'question' and 'answer', got {type(record).__name__}")
    question, answer = record.get("question"), record.get("answer")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: 'question' must be a non-empty string")
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(answer)
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError(f"{where}: 'answer' must be a worked solution ending in '#### N' or a number")
    gold = record.get("gold")
    if gold is None:
        gold = strict_answer(answer)
        gold = gold if gold is not None else normalize_answer(answer)
    try:
        gold = canonical_number(gold)
    except ValueError:
        raise ValueError(f"{where}: no gold answer: give 'gold', or an 'answer' that ends in '#### N' or is a number "
                         f"(got {answer[-60:]!r})") from None
    template_id = record.get("template_id")
    if template_id is not None and not isinstance(template_id, int):
        raise ValueError(f"{where}: 'template_id' must be an integer or null")
    return Problem(question, answer, gold, template_id, str(record.get("source", "jsonl")))


def load_jsonl(path: str | Path) -> list[Problem]:
    """Read problems; a malformed line raises ValueError naming the file and line number."""
    path = Path(path)
    problems = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            problems.append(_problem(record, where))
    if not problems:
        raise ValueError(f"{path}: no problems (the file is empty)")
    return problems


def write_jsonl(problems: Iterable[Problem], path: str | Path) -> None:
    with Path(path).open("w", encoding="utf-8") as f:
        for p in problems:
            f.write(json.dumps(p.to_json(), ensure_ascii=False) + "\n")
