"""Programs with perturbed comments, for training a target whose code does not hang on its comments.

AutoJudge gains where a draft's mismatch is harmless. On the program task most mismatches fall on
comment lines, yet a target trained only on clean programs writes its code from its comments: a
reworded comment, or a number in it, changes the code that follows (``docs/results.md``, the gate).
Training on programs whose comment lines are perturbed, with no loss on those lines and the full
loss on the (unchanged, still right) code after them, teaches it to take the code from the question.

A perturbed line is one of:
- ``sibling``: the same line of another variant of the same template (other names and numbers);
- ``splice``: the line's first words, then the end of a comment line of another program (a
  continuation that wandered off);
- ``words``: one or two of its words replaced by words of other comment lines.
"""
from __future__ import annotations

from dataclasses import replace
from random import Random
from typing import Sequence

from .problem import Problem

KINDS = ("sibling", "splice", "words")


def is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def perturb_line(line: str, sibling_line: str | None, donors: Sequence[str], rng: Random) -> str:
    """One comment ``line`` perturbed (a kind drawn from :data:`KINDS`); ``donors``: comment lines of
    other programs, ``sibling_line``: the same line of another variant (None when there is none)."""
    words = line.split(" ")
    kind = rng.choice(KINDS if sibling_line not in (None, line) else KINDS[1:])
    if kind == "sibling":
        return sibling_line
    donor = rng.choice(donors).split(" ")
    if kind == "splice" and len(words) > 2 and len(donor) > 2:
        return " ".join(words[: rng.randrange(2, len(words))] + donor[rng.randrange(1, len(donor) - 1):])
    out = list(words)
    for _ in range(rng.randint(1, 2)):
        if len(out) > 1:
            out[rng.randrange(1, len(out))] = rng.choice(donor[1:] or donor)  # word 0 is the "#"
    return " ".join(out) if out != words else line + " " + donor[-1]


def perturb_program(program: str, sibling: str | None, donors: Sequence[str], rng: Random, p: float) -> tuple[str, frozenset[int]]:
    """``program`` with each comment line perturbed with probability ``p`` (at least one when it has
    comments), and the 0-based numbers of the perturbed lines."""
    lines = program.split("\n")
    sibling_lines = sibling.split("\n") if sibling is not None else []
    comments = [i for i, line in enumerate(lines) if is_comment(line)]
    chosen = [i for i in comments if rng.random() < p] or ([rng.choice(comments)] if comments else [])
    for i in chosen:
        same = sibling_lines[i] if i < len(sibling_lines) and is_comment(sibling_lines[i]) else None
        lines[i] = perturb_line(lines[i], same, donors, rng)
    return "\n".join(lines), frozenset(chosen)


def noisy_problems(problems: Sequence[Problem], share: float, p: float, seed: int) -> list[tuple[Problem, frozenset[int]]]:
    """Each problem once: with probability ``share`` its program's comments perturbed
    (:func:`perturb_program`), else as it is; with the perturbed line numbers (empty when clean).

    Problems of the same template are each other's siblings; every program's comment lines are donors.
    """
    if not 0.0 <= share <= 1.0 or not 0.0 < p <= 1.0:
        raise ValueError(f"comment noise needs 0 <= share <= 1 and 0 < p <= 1, got share={share}, p={p}")
    rng = Random(seed)
    donors = [line for q in problems for line in q.answer.split("\n") if is_comment(line)]
    by_template: dict[int | None, list[Problem]] = {}
    for q in problems:
        by_template.setdefault(q.template_id, []).append(q)
    out = []
    for q in problems:
        if not donors or rng.random() >= share:
            out.append((q, frozenset()))
            continue
        others = [s for s in by_template[q.template_id] if s is not q]
        sibling = rng.choice(others).answer if others and q.template_id is not None else None
        program, lines = perturb_program(q.answer, sibling, donors, rng, p)
        out.append((replace(q, answer=program), lines))
    return out
