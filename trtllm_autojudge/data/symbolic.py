"""Safe evaluation of the expressions inside GSM-Symbolic templates.

Template expressions (``#init:`` right-hand sides, ``#conditions:``, ``#answer:`` and the ``{...}``
blocks of the worked answers) are small Python expressions. They are parsed, checked against a
whitelist of syntax (no attributes, subscripts, lambdas or comprehensions; calls only to the helper
functions below) and compiled once. The helpers follow the GSM-Symbolic conventions except that
``range(a, b)`` excludes ``b`` like Python's, everywhere.
"""
from __future__ import annotations

import ast
from fractions import Fraction
from random import Random
from typing import Any, Callable

_ALLOWED_NODES = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.List, ast.Tuple, ast.BinOp, ast.UnaryOp,
    ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.keyword,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd, ast.Not,
    ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)


class TemplateError(ValueError):
    """A template expression that cannot be compiled or evaluated."""


def is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return abs(value - round(value)) < 1e-6
    return isinstance(value, Fraction) and value.denominator == 1


def divides(a: float, b: float) -> bool:
    """True when ``b`` divides ``a`` (GSM-Symbolic's argument order)."""
    return b != 0 and a % b == 0


def ensure_int(value: Any) -> int:
    if not is_int(value):
        raise TemplateError(f"{value!r} is not an integer")
    return round(value)


def fraction_text(value: Any) -> str:
    """``Fraction(x)`` in templates renders a number as ``a/b`` (or an integer)."""
    if isinstance(value, float):
        value = Fraction(value).limit_denominator()
    if isinstance(value, Fraction):
        return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    return str(value)


def _step_decimals(step: float) -> int:
    text = repr(float(step)).rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0


_FLOAT_WORDS = frozenset({"nan", "inf", "infinity"})  # the only words float() reads


def numeric(value: Any) -> Any:
    """The value an expression sees: numeric strings ("2.5", "1/4") become numbers.

    :func:`numeric_reference` with two shortcuts for rejection sampling, which calls it for every
    drawn value: ints, and words, which int() and float() would both reject by raising."""
    if type(value) is int:
        return value
    if isinstance(value, str):
        letters = value.replace(" ", "")
        if letters.isalpha() and letters.lower() not in _FLOAT_WORDS:
            return value
    return numeric_reference(value)


def numeric_reference(value: Any) -> Any:
    """:func:`numeric` without shortcuts: every string goes through int(), float() and the fraction test."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
        return int(number) if number.is_integer() else number
    except ValueError:
        pass
    num, slash, den = text.partition("/")
    if slash and num.lstrip("-").isdigit() and den.isdigit() and int(den) != 0:
        return Fraction(int(num), int(den))
    return value


def sampling_helpers(rng: Random) -> dict[str, Callable]:
    """The functions templates may call, with the random ones bound to ``rng``."""

    def sample(items, n: int = 1):
        items = list(items)
        return rng.choice(items) if n == 1 else rng.sample(items, n)

    def range_(start: int, end: int, step: int = 1) -> int:
        values = range(start, end, step)
        if not values:
            raise TemplateError(f"range({start}, {end}, {step}) is empty")
        return rng.choice(values)

    def range_str(start: int, end: int, step: int, words: list) -> tuple:
        candidates = [(words[i - 1], i) for i in range(start, end, step) if 0 < i <= len(words)]
        if not candidates:
            raise TemplateError(f"range_str({start}, {end}, {step}) has no number word")
        return rng.choice(candidates)

    def arange(start: float, end: float, step: float = 1) -> str:
        count = round((end - start) / step) + 1
        decimals = _step_decimals(step)
        return str(round(start + step * rng.randrange(count), decimals))

    def sample_sequential(items, n: int) -> list:
        items = list(items)
        first = rng.randrange(len(items))
        return [items[(first + i) % len(items)] for i in range(n)]

    return {
        "sample": sample, "range": range_, "range_str": range_str, "arange": arange,
        "sample_sequential": sample_sequential, "range_list": lambda a, b, s=1: list(range(a, b, s)),
        "is_int": is_int, "divides": divides, "ensure_int": ensure_int, "Fraction": fraction_text,
        "int": int, "float": float, "round": round,
    }


HELPER_NAMES = frozenset(sampling_helpers(Random(0)))


def compile_expression(source: str, where: str):
    """Parse and whitelist-check one template expression; ``where`` names it in errors."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise TemplateError(f"{where}: cannot parse {source!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise TemplateError(f"{where}: {type(node).__name__} is not allowed in template expressions ({source!r})")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in HELPER_NAMES):
            raise TemplateError(f"{where}: only the template helpers may be called ({source!r})")
    return compile(tree, where, "eval")


_NO_BUILTINS = {"__builtins__": {}}  # the globals of every evaluation; eval mode cannot assign to them


def evaluate(code, env: dict[str, Any]) -> Any:
    """Value of a :func:`compile_expression` code object; errors name the ``where`` it was compiled with."""
    try:
        return eval(code, _NO_BUILTINS, env)  # noqa: S307 - whitelisted AST, no builtins
    except TemplateError:
        raise
    except Exception as exc:  # a template bug, reported with its location (the code's file name)
        raise TemplateError(f"{code.co_filename}: {type(exc).__name__}: {exc}") from None
