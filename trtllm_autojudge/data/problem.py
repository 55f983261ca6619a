"""One problem: a question, its reference answer (worked solution or program) and the gold final answer."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str  # worked solution ending in "#### N", a program (gsm8k-program), or just the final answer
    gold: str  # canonical final answer, e.g. "18" or "2.5" ("pass" for code)
    template_id: int | None = None  # GSM-Symbolic template (id_shuffled); None for user data
    source: str = "jsonl"  # "original" (GSM8K test question), "variant" (template instance) or "jsonl"
    tests: str | None = None  # code task: the unit tests the checker runs the response against

    def to_json(self) -> dict:
        record = asdict(self)
        if record["tests"] is None:
            del record["tests"]
        return record
