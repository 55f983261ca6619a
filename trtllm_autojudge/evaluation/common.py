"""Arguments shared by eval, bench, demo and generate: the draft tree, the judge, the questions."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..backends.loading import EMBEDDED_TARGETS
from ..data.answers import final_answer
from ..data.problem import Problem
from ..data.prompt import prompt_ids
from ..decoding.tree import DraftTree
from ..judge.head import JudgeHead
from ..mining.cli import problem_id
from .runner import Question

SHIPPED_JUDGE = Path(__file__).resolve().parents[1] / "assets" / "judge_gsm8k.safetensors"


def add_decoding_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("decoding")
    g.add_argument("--k", type=int, default=8, help="chain draft: K draft tokens per cycle (default 8)")
    g.add_argument("--tree", default=None, help="static tree instead of a chain: branching per depth, e.g. 3,2,1")
    g.add_argument("--judge", default=None,
                   help="judge file (default: the shipped GSM8K judge when the embedded pair is used)")
    g.add_argument("--max-new-tokens", type=int, default=256)


def draft_tree(args: argparse.Namespace) -> DraftTree:
    if args.tree:
        try:
            return DraftTree.static([int(w) for w in args.tree.split(",")])
        except ValueError as e:
            raise SystemExit(f"--tree {args.tree!r}: {e}") from None
    return DraftTree.chain(args.k)


def load_judge(args: argparse.Namespace, target, draft, required: bool) -> JudgeHead | None:
    path = args.judge or (SHIPPED_JUDGE if args.target in EMBEDDED_TARGETS and args.draft == "embedded" else None)
    if path is None:
        if required:
            raise SystemExit("this command needs a judge file for your models: --judge PATH (trtllm-autojudge train)")
        return None
    if not Path(path).is_file():
        raise SystemExit(f"judge file {path} not found")
    try:
        return JudgeHead.load(path, draft_hidden=draft.hidden_size, target_hidden=target.hidden_size,
                              draft_model=draft.name, target_model=target.name)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def questions_from(problems: list[Problem], tokenizer) -> list[Question]:
    return [Question(problem_id(p.question), prompt_ids(tokenizer, p.question), p.gold or final_answer(p.answer),
                     p.to_json()) for p in problems]
