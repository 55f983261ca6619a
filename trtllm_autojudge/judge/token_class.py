"""Token classes of a mismatch: where it sits in the program and what its two tokens are.

Used by research tools (``experiments/judged_swaps.py``, ``experiments/token_class_probe.py``),
not by the judge the runtimes run: a judge reads hidden states only (:mod:`.head`).

A mismatch at ``tokens[index]`` (the target wanted ``target``, the draft wrote ``draft``) is in a
``comment`` line when the text of its line before it starts with ``#``, else in ``code``. Each token
is a ``digit`` when its text holds one, a ``word`` when its stripped text is letters, an ``operator``
when it is one of ``+-*/%=()``, and ``in the question`` when its stripped, lower-cased text is a word
of at least two letters of the question.
"""
from __future__ import annotations

import re

import numpy as np

OPERATORS = frozenset("+-*/%=()")
# [C] the columns of token_class_features, in order
COLUMNS = ("comment_line",
           "draft_digit", "draft_word", "draft_operator", "draft_in_question",
           "target_digit", "target_word", "target_operator", "target_in_question")


def line_before(tokenizer, tokens: list[int], index: int) -> str:
    """The text of the line that ``tokens[index]`` continues (what precedes it on its line)."""
    return tokenizer.decode(tokens[:index]).split("\n")[-1]


def in_comment(tokenizer, tokens: list[int], index: int) -> bool:
    return line_before(tokenizer, tokens, index).lstrip().startswith("#")


def has_digit(tokenizer, token: int) -> bool:
    return re.search(r"\d", tokenizer.decode([token])) is not None


def swap_class(tokenizer, tokens: list[int], index: int, draft: int, target: int) -> tuple[str, str]:
    """(``comment`` | ``code``, ``digit`` | ``word``) of the mismatch at ``tokens[index]``: ``digit``
    when either token holds a digit."""
    where = "comment" if in_comment(tokenizer, tokens, index) else "code"
    return where, "digit" if has_digit(tokenizer, draft) or has_digit(tokenizer, target) else "word"


def question_words(text: str) -> frozenset[str]:
    """The lower-cased words of at least two letters of ``text``."""
    return frozenset(w.lower() for w in re.findall(r"[A-Za-z]{2,}", text))


def token_class_features(tokenizer, tokens: list[int], index: int, draft: int, target: int,
                         question: frozenset[str]) -> np.ndarray:  # [C] float32, columns COLUMNS
    """0/1 token-class features of the mismatch at ``tokens[index]`` (module docstring)."""
    def of(token: int) -> list[bool]:
        text = tokenizer.decode([token]).strip()
        return [has_digit(tokenizer, token), text.isalpha(), text in OPERATORS, text.lower() in question]
    return np.asarray([in_comment(tokenizer, tokens, index), *of(draft), *of(target)], np.float32)
