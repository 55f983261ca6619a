"""Problems from command-line arguments: a user JSONL file or the task's embedded template split."""
from __future__ import annotations

import argparse
import logging

from .problem import Problem

log = logging.getLogger(__name__)


def add_problem_args(parser: argparse.ArgumentParser, split: str, variants: int) -> None:
    g = parser.add_argument_group("questions")
    g.add_argument("--questions", default=None, help="a JSONL file of {\"question\", \"answer\"} records (your own data)")
    g.add_argument("--split", default=split, choices=("train", "eval"), help=f"embedded GSM-Symbolic template split (default {split})")
    g.add_argument("--originals", action=argparse.BooleanOptionalAction, default=split == "eval",
                   help="include the split's original GSM8K test questions")
    g.add_argument("--variants-per-template", type=int, default=variants,
                   help=f"fresh instances per template of the split (default {variants})")
    g.add_argument("--seed", type=int, default=0, help="seed of the variants")
    g.add_argument("--limit", type=int, default=None, help="use only the first N questions")


def by_round(problems: list[Problem]) -> list[Problem]:
    """Template-major problems reordered round by round: the first of every template (in order of
    first appearance), then the second of each, ... Problems without a template (user data) form
    one group, so a file of them keeps its order."""
    groups: dict[int | None, list[Problem]] = {}
    for p in problems:
        groups.setdefault(p.template_id, []).append(p)
    rounds = max((len(g) for g in groups.values()), default=0)
    return [g[r] for r in range(rounds) for g in groups.values() if r < len(g)]


def load_problems(args: argparse.Namespace, task, held_out: bool = False, rounds: bool = False) -> list[Problem]:
    """The problems the arguments of :func:`add_problem_args` select, from ``task`` (a :class:`~trtllm_autojudge.tasks.Task`).

    ``held_out`` (the evaluation verbs): training-template questions that the task's shipped
    adapter, draft or judge were trained or mined on are left out, by question text. Mining may use
    them (a judge can be mined on the target's own training questions). ``rounds`` (mining): the
    template variants in :func:`by_round` order, before ``--limit``, so a run stopped early covers
    every template."""
    if args.questions:
        try:
            problems = task.load_jsonl(args.questions)
        except ValueError as e:
            raise SystemExit(str(e)) from None
        trained = task.trained_questions() if held_out else set()
        overlap = sum(p.question in trained for p in problems)
        if overlap:  # a held-out set must be disjoint from training, as the template draws below are
            raise SystemExit(f"{overlap} of the {len(problems)} questions of {args.questions} are training-template "
                             f"questions the shipped adapter, draft or judge of {task.name} were trained or mined on: "
                             f"give held-out questions (build_scripts/heldout_questions.py leaves those out)")
    else:
        problems = task.problems(args.split, args.originals, args.variants_per_template, args.seed)
        if held_out and args.split == "train":  # held out = never trained on, checked by question text
            seen = task.trained_questions()
            kept = [p for p in problems if p.question not in seen]
            if len(kept) < len(problems):
                log.info("dropped %d of %d training-template questions that the shipped adapter or draft of "
                         "%s was trained on (held-out instances only)", len(problems) - len(kept), len(problems), task.name)
            problems = kept
        if rounds:
            problems = by_round(problems)
    if args.limit is not None:
        problems = problems[: args.limit]
    if not problems:
        raise SystemExit("no questions selected: check --questions / --originals / --variants-per-template / --limit")
    return problems
