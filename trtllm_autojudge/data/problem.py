"""One GSM8K-style problem: a question, its worked answer and the gold final answer."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str  # worked solution ending in "#### N" (or just the final answer, from user JSONL)
    gold: str  # canonical final answer, e.g. "18" or "2.5"
    template_id: int | None = None  # GSM-Symbolic template (id_shuffled); None for user data
    source: str = "jsonl"  # "original" (GSM8K test question), "variant" (template instance) or "jsonl"

    def to_json(self) -> dict:
        return asdict(self)
