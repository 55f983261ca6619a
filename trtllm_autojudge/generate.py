"""`trtllm-autojudge generate`: answer one question with speculative decoding and show each cycle."""
from __future__ import annotations

import argparse

from .decoding.loading import load_pair
from .decoding.speculative import speculative_generate
from .evaluation.common import (add_budget_arg, add_decoding_args, apply_rule_options, budget_judge, draft_tree,
                                load_judge, settle_k)
from .evaluation.runner import fused_for
from .evaluation.methods import OperatingPoint
from .models.loading import add_model_args
from .tasks import add_task_args, task_from_args


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="trtllm-autojudge generate", description=__doc__)
    p.add_argument("question", help="the question (GSM8K style for the embedded pair)")
    add_task_args(p)
    p.add_argument("--mode", default="judge", help="lossless, judge[@T], topk@K, typical@E,A or mtp@K,D")
    p.add_argument("--cycles", action="store_true", help="print a line per verification cycle")
    add_model_args(p)
    add_decoding_args(p)
    add_budget_arg(p)
    args = p.parse_args(argv)
    point = OperatingPoint.parse(args.mode)
    if args.answer_budget is not None and point.spec != "judge":
        p.error(f"--answer-budget sets the judge's threshold: use it with --mode judge, not {args.mode!r}")
    task = task_from_args(args)
    target, draft, tokenizer = load_pair(args, task)
    settle_k(args, draft)
    judge = load_judge(args, target, draft, required=point.method == "judge", task=task)
    judge = apply_rule_options(judge, args, tokenizer)
    if args.answer_budget is not None:
        judge = budget_judge(judge, args.answer_budget, target, draft, task, args.k if args.tree is None else None,
                             args.tree, args.max_new_tokens)
    rule = point.rule(judge)
    try:
        fused = fused_for(rule, args.accept_impl)
    except ValueError as e:
        raise SystemExit(f"generate: {e}") from None
    out = speculative_generate(target, draft, task.prompt_ids(tokenizer, args.question), tree=draft_tree(args),
                               rule=rule, max_new_tokens=args.max_new_tokens, tokenizer=tokenizer, fused=fused)
    print(out.text)
    try:
        print(f"\n[{task.name}] answer: {task.checker.answer(out.text, {'question': args.question})}")
    except ValueError as e:  # e.g. the code task needs unit tests
        print(f"\n[{task.name}] answer not checked: {e}")
    if args.cycles:
        for i, c in enumerate(out.cycles):
            print(f"cycle {i:3d}: accepted {c.accepted:2d} (judged {c.judged}) of {c.draft_nodes}")
    s = out.summary()
    print(f"\n[{point.spec}] {s['new_tokens']} tokens in {s['cycles']} target forwards: {s['tokens_per_cycle']:.2f} per "
          f"forward, {s['judged_accepts']} judged accepts; draft {s['t_draft']:.2f} s, verify {s['t_verify']:.2f} s, "
          f"accept {s['t_accept']:.2f} s")
    return 0
