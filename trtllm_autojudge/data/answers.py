"""GSM8K answer checking with the lm-eval-harness conventions.

- strict: the number after the first ``#### `` (``#### (\\-?[0-9\\.\\,]+)``);
- flexible: the last number anywhere (``(-?[$0-9.,]{2,})|(-?[0-9]+)``);
- both are normalised by dropping ``,`` and ``$`` and one trailing ``.``.

:func:`final_answer` is the task checker of label mining: the strict answer when the response has
one, else the flexible one. :func:`same_answer` compares two answers as numbers, so ``18.00`` and
``18`` agree (lm-eval-harness would compare the strings; numeric equality only differs there).
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

STRICT_RE = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_RE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")


def normalize_answer(text: str) -> str:
    """Drop ``,`` and ``$``, surrounding space and one trailing ``.`` (lm-eval-harness)."""
    text = text.replace(",", "").replace("$", "").strip()
    return text[:-1] if text.endswith(".") else text


def strict_answer(response: str) -> str | None:
    """The ``#### N`` answer, normalised; None when the response has no well-formed one."""
    match = STRICT_RE.search(response)
    if match is None:
        return None
    answer = normalize_answer(match.group(1))
    return answer if any(c.isdigit() for c in answer) else None


def flexible_answer(response: str) -> str | None:
    """The last number in the response, normalised; None when it has no number."""
    for groups in reversed(FLEXIBLE_RE.findall(response)):
        answer = normalize_answer(groups[0] or groups[1])
        if any(c.isdigit() for c in answer):
            return answer
    return None


def final_answer(response: str) -> str | None:
    """The response's final answer: strict when present, else flexible (the mining task checker)."""
    strict = strict_answer(response)
    return strict if strict is not None else flexible_answer(response)


def canonical_number(value: int | float | Fraction | str) -> str:
    """A number as GSM8K writes answers: ``12``, ``-3``, ``2.5`` (no exponent, no trailing zeros)."""
    if isinstance(value, Fraction):
        value = value.numerator if value.denominator == 1 else Decimal(value.numerator) / Decimal(value.denominator)
    if isinstance(value, float):
        value = round(value, 6)
    try:
        number = Decimal(normalize_answer(str(value)))
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a number") from None
    if number == number.to_integral_value():
        return str(int(number))
    return format(number.normalize(), "f")


def same_answer(a: str | None, b: str | None) -> bool:
    """True when both answers exist and are the same number (or the same string if not numbers)."""
    if a is None or b is None:
        return False
    try:
        return canonical_number(a) == canonical_number(b)
    except ValueError:
        return normalize_answer(a) == normalize_answer(b)


def is_correct(response: str, gold: str, strict: bool = False) -> bool:
    """Gold accuracy of one response: strict (``#### N`` only) or flexible (final answer)."""
    return same_answer(strict_answer(response) if strict else final_answer(response), gold)
