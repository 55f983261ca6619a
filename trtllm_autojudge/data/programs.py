"""GSM-Symbolic variants answered as short commented Python programs (the ``gsm8k-program`` task).

A program is generated mechanically from its template and checked by executing it::

    x = 10
    k = 2
    y = 6
    # First, find the combined length of the remoras in inches: 6 inches/remora * 2 remoras = v1 inches.
    v1 = k * y
    # Then divide that number by 12 to convert it to feet: v1 inches / 12 inches/foot = v2 foot.
    v2 = v1 // 12
    # Then divide the combined remora length in feet by the shark's length and multiply by 100% to express
    # the answer as a percentage: v2 foot / 10 feet * 100% = answer%
    answer = int(v1 / (12 * x) * 100)

- INPUTS: the quantities the template's ``{expr}`` blocks use, named as its ``#init:`` variables,
  valued as the question shows them (a word drawn with a number, ``mult_txt, mult_val =
  sample(...)``, gives its number), in the order the question mentions them;
- STEPS: each line of the worked solution (``answer_annotated``) becomes a comment (its calculator
  annotations dropped, each ``{expr}`` written as the input's value or the step's name), then one
  assignment ``vN = ...`` per new computed ``{expr}`` of the line, with every sub-expression already
  named by an earlier step replaced by that name (no precomputed numbers);
- ANSWER: the ``#### {expr}`` line's expression as ``answer = ...`` (when a step already computes
  it as the last assignment, that step is named ``answer`` and the solution's lines after it, which
  only restate it, are left out): the program ends with ``answer = ...``.

Every program is executed when it is made and must give the ``#answer:`` value (canonically).
Templates that cannot be converted are in :data:`BROKEN_PROGRAM_TEMPLATES` with the reason.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from random import Random
from typing import Any

from .answers import canonical_number
from .gsm8k import variant_instances
from .problem import Problem
from .templates import BROKEN_TEMPLATES, EXPR_RE, SLOT_RE, Instance, Template, display, load_replacements, load_templates

# Templates with variants whose programs cannot be generated, with the reason (none: tests/test_programs.py
# converts every other template). Their worded variants and original questions still exist.
BROKEN_PROGRAM_TEMPLATES: dict[int, str] = {}

PROGRAM_SYSTEM_PROMPT = ("Solve the math word problem with a short Python program: assign the question's numbers "
                         "to variables, compute one step per line, and store the final number in `answer`.")
STEP_PREFIX = "v"  # intermediate results are v1, v2, ... (no template has an #init variable named so)
ANSWER_NAME = "answer"
# Builtins a generated program may call; template helpers map onto them (ensure_int(x) -> round(x)).
PROGRAM_FUNCTIONS = {"int": int, "float": float, "round": round, "abs": abs, "min": min, "max": max}
_HELPER_REWRITES = {"ensure_int": "round"}
_CALCULATOR_RE = re.compile(r"<<[^>]*>>")
_FINAL_RE = re.compile(r"^####\s*\{([^}]+)\}\s*$")


class ProgramError(ValueError):
    """A template that cannot be written as a program, or a program that does not give the answer."""


@dataclass(frozen=True)
class Step:
    """One solution line: its comment and the assignments of the results it computes first."""

    comment: tuple[tuple[str, str], ...]  # parts: ("text", words), ("input", variable) or ("name", step name)
    assignments: tuple[tuple[str, str], ...]  # (name, Python expression)


@dataclass(frozen=True)
class ProgramTemplate:
    """The program of one template, with the inputs' values left to fill per variant."""

    template_id: int
    inputs: tuple[str, ...]  # #init variables, in question order
    steps: tuple[Step, ...]

    def render(self, instance: Instance, comments: str = "worked") -> str:
        """The program of ``instance``; ``comments`` is a :data:`COMMENT_STYLES` name."""
        if comments not in COMMENT_STYLES:
            raise ValueError(f"unknown comment style {comments!r}: choose one of {', '.join(COMMENT_STYLES)}")
        lines = [f"{name} = {literal(instance.env[name])}" for name in self.inputs]
        for step in self.steps:
            text = COMMENT_STYLES[comments](step, instance)
            if text:
                lines.append("# " + text)
            lines += [f"{name} = {expr}" for name, expr in step.assignments]
        return "\n".join(lines)


def worked_comment(step: Step, instance: Instance) -> str:
    """The worked solution's line, its quantities written as values and its results as step names."""
    return "".join(display(instance.shown.get(v, instance.env[v])) if kind == "input" else v for kind, v in step.comment)


_ARITHMETIC = re.compile(r"[\d=*/+%$×÷^<>]|(?<!\w)-(?!\w)")  # a word holding a number, an operator or a result sign


def words_comment(step: Step, instance: Instance) -> str:
    """The worked solution's line in words only: no step name and no word with a digit or an
    operator (a quantity drawn as a word, e.g. a name, stays), so the code after it cannot copy a
    number or an operation from it: the words carry the reasoning, the code every computation."""
    text = "".join(v if kind == "text" else display(instance.shown.get(v, instance.env[v])) if kind == "input" else " "
                   for kind, v in step.comment)
    words = " ".join(w for w in text.split() if not _ARITHMETIC.search(w)).strip(" ,;:")
    return words if any(c.isalpha() for c in words) else ""


COMMENT_STYLES = {"worked": worked_comment, "words": words_comment}


def literal(value: Any) -> str:
    """An input's value as Python source: ``12``, ``2.5``, ``1 / 3``, or a word drawn by the template (``'week'``)."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ProgramError(f"{value!r} is neither a number nor a word")
    if isinstance(value, Fraction) and value.denominator != 1:  # a fraction drawn as "1/3"
        return f"{value.numerator} / {value.denominator}"
    if isinstance(value, float) and not value.is_integer():  # a decimal drawn as "2.5"
        return repr(value)
    return str(int(value))


class _Namer(ast.NodeTransformer):
    """Replaces sub-expressions already computed by a step with the step's name; maps helpers to builtins."""

    def __init__(self, known: dict[str, str]):
        self.known = known

    def visit(self, node):
        if isinstance(node, ast.expr) and ast.dump(node) in self.known:
            return ast.Name(self.known[ast.dump(node)], ast.Load())
        return super().visit(node)

    def visit_Call(self, node: ast.Call):
        node = self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _HELPER_REWRITES:
            node.func = ast.Name(_HELPER_REWRITES[node.func.id], ast.Load())
        return node


def _parse(source: str) -> ast.expr:
    return ast.parse(source.strip(), mode="eval").body


def _unwrap_display(node: ast.expr) -> ast.expr:
    """``Fraction(e)`` only changes how ``e`` is written (``1/3``): the program computes ``e``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Fraction" and len(node.args) == 1:
        return node.args[0]
    return node


def _names(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def convert_template(template: Template, sample: Instance) -> ProgramTemplate:
    """The program template of ``template``; ``sample`` (one of its draws) tells single values from lists."""
    where = f"template {template.id:04d}"
    scalars = {n for names, _, _ in template.init for n in names  # what a program can assign: numbers and words
               if isinstance(sample.env.get(n), (int, float, Fraction, str)) and not isinstance(sample.env.get(n), bool)}
    variables = {n for names, _, _ in template.init for n in names}
    if any(re.fullmatch(rf"{STEP_PREFIX}\d+|{ANSWER_NAME}", v) for v in variables):
        raise ProgramError(f"{where}: an #init variable is named like a step ({sorted(variables)})")
    known: dict[str, str] = {}  # ast.dump of a template expression -> the step name holding it
    used: set[str] = set()
    steps: list[Step] = []
    final_expr = None
    lines = [ln.strip() for ln in template.solution.splitlines() if ln.strip()]
    for line in lines:
        final = _FINAL_RE.match(line)
        if final:
            final_expr = final.group(1)
            break
        text = _CALCULATOR_RE.sub("", line)
        comment, assignments, at = [], [], 0
        for match in EXPR_RE.finditer(text):
            comment.append(("text", text[at:match.start()]))
            at = match.end()
            node = _unwrap_display(_parse(match.group(1)))
            if isinstance(node, ast.Name) and node.id in variables:
                comment.append(("input", node.id))
            elif isinstance(node, ast.Constant):
                comment.append(("text", str(node.value)))
            else:
                key = ast.dump(node)
                if key not in known:
                    bad = _names(node) - scalars - set(PROGRAM_FUNCTIONS) - set(_HELPER_REWRITES)
                    if bad:
                        raise ProgramError(f"{where}: {{{match.group(1)}}} computes with {sorted(bad)}, which are neither numbers nor words")
                    name = f"{STEP_PREFIX}{len(known) + 1}"
                    expr = ast.unparse(_Namer(known).visit(node))
                    used.update(_names(node) & scalars)
                    known[key] = name
                    assignments.append((name, expr))
                comment.append(("name", known[key]))
        comment.append(("text", text[at:]))
        comment = [(k, v) for k, v in comment if v]
        steps.append(Step(tuple(comment), tuple(assignments)))
    if final_expr is None:
        raise ProgramError(f"{where}: the worked solution has no '#### {{expr}}' line")
    steps = _answer_step(steps, final_expr, known, scalars, where)
    used.update(_names(_parse(final_expr)) & scalars)
    return ProgramTemplate(template.id, _question_order(template, used, where), tuple(steps))


def _answer_step(steps: list[Step], final_expr: str, known: dict[str, str], scalars: set[str], where: str) -> list[Step]:
    node = _unwrap_display(_parse(final_expr))
    last = next((s for s in reversed(steps) if s.assignments), None)
    name = known.get(ast.dump(node))
    if name is not None and last is not None and last.assignments[-1][0] == name:
        renamed = lambda s: replace(s, comment=tuple((k, ANSWER_NAME if k == "name" and v == name else v) for k, v in s.comment),  # noqa: E731
                                    assignments=tuple((ANSWER_NAME if n == name else n, e) for n, e in s.assignments))
        return [renamed(s) for s in steps[:steps.index(last) + 1]]  # later lines only restate the answer
    bad = _names(node) - scalars - set(PROGRAM_FUNCTIONS) - set(_HELPER_REWRITES)
    if bad:
        raise ProgramError(f"{where}: the '####' expression computes with {sorted(bad)}, which are neither numbers nor words")
    return steps + [Step((), ((ANSWER_NAME, ast.unparse(_Namer(known).visit(node))),))]


def _question_order(template: Template, used: set[str], where: str) -> tuple[str, ...]:
    """The used inputs ordered by where the question first shows them (or the word drawn with them)."""
    first = {}
    for m in SLOT_RE.finditer(template.question_slots):
        first.setdefault(m.group(1), m.start())
    position = {}
    for names, _, line in template.init:
        shown_at = [first[n] for n in names if n in first]
        for n in names:
            if n in used:
                if not shown_at:
                    raise ProgramError(f"{where}: the program needs {n} ({line!r}), which the question does not show")
                position[n] = first.get(n, min(shown_at))
    return tuple(sorted(used, key=lambda n: (position[n], n)))


def run_program(source: str) -> Any:
    """Execute a GENERATED program in-process (trusted: only the builtins it may use) and return ``answer``.

    Model-written programs run in the sandbox instead (:mod:`trtllm_autojudge.tasks.sandbox`).
    """
    namespace: dict[str, Any] = {"__builtins__": dict(PROGRAM_FUNCTIONS)}
    exec(compile(source, "<program>", "exec"), namespace)  # noqa: S102 - generated from a template, see above
    return namespace[ANSWER_NAME]


def program_for(instance: Instance, program: ProgramTemplate | None = None, comments: str = "worked") -> str:
    """The checked program of one variant (comments in the :data:`COMMENT_STYLES` style ``comments``);
    ProgramError when it does not give the variant's gold answer."""
    tid = instance.problem.template_id
    program = program or program_template(tid)
    source = program.render(instance, comments)
    try:
        value = canonical_number(run_program(source))
    except Exception as exc:
        raise ProgramError(f"template {tid:04d}: the generated program fails ({type(exc).__name__}: {exc})\n{source}") from None
    if value != instance.problem.gold:
        raise ProgramError(f"template {tid:04d}: the generated program gives {value}, the #answer is {instance.problem.gold}\n{source}")
    return source


@lru_cache(maxsize=None)
def program_template(template_id: int) -> ProgramTemplate:
    """The program template of one template id (ProgramError for the broken ones)."""
    if template_id in BROKEN_TEMPLATES or template_id in BROKEN_PROGRAM_TEMPLATES:
        raise ProgramError(f"template {template_id:04d} has no programs: "
                           f"{BROKEN_TEMPLATES.get(template_id) or BROKEN_PROGRAM_TEMPLATES[template_id]}")
    template = load_templates()[template_id]
    sample = template.instance(Random(template_id), load_replacements())  # tells the variables' kinds
    if sample is None:
        raise ProgramError(f"template {template_id:04d}: no draw satisfies its conditions")
    return convert_template(template, sample)


def program_problems(split: str, per_template: int, seed: int = 0, comments: str = "worked") -> list[Problem]:
    """The variants of :func:`.gsm8k.variant_problems` (same questions, same seed) answered by programs.

    ``answer`` is the checked program, commented in the style ``comments``; templates in
    :data:`BROKEN_PROGRAM_TEMPLATES` are skipped (logged).
    """
    problems = []
    for instance in variant_instances(split, per_template, seed, skip=BROKEN_PROGRAM_TEMPLATES):
        problems.append(replace(instance.problem, answer=program_for(instance, comments=comments)))
    return problems
