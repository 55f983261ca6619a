"""`trtllm-autojudge eval` (the frontier against baselines) and `bench` (wall clock, side by side)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..backends.dtype import dtype_name
from ..backends.loading import add_model_args, load_pair
from ..data.sources import add_problem_args, load_problems
from ..mining.checkers import load_checker
from ..mining.miner import MiningConfig
from ..mining.run import make_miner, mine_prompts
from ..mining.store import read_records, unimportant_map
from .bench import run_bench
from .common import add_decoding_args, draft_tree, judge_thresholds, load_judge, questions_from
from .methods import OperatingPoint
from .plot import plot_frontier
from .runner import format_table, run_points, summarize, write_summary

DEFAULT_BASELINES = "topk@2,topk@4,topk@8,typical@0.09,0.3,typical@0.3,0.6,mtp@4,0.1,mtp@8,0.3"


def parse_points(text: str) -> list[OperatingPoint]:
    """Comma-separated specs; a bare number continues the previous spec's parameter list."""
    specs: list[str] = []
    for part in (s.strip() for s in text.split(",") if s.strip()):
        if specs and (part[0].isdigit() or part[0] == "."):
            specs[-1] += "," + part
        else:
            specs.append(part)
    return [OperatingPoint.parse(s) for s in specs]


def main_eval(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="trtllm-autojudge eval", description=__doc__)
    p.add_argument("--out-dir", default="out/eval", help="runs.jsonl (resumable), summary.json/.csv, frontier.png")
    p.add_argument("--thresholds", default="auto",
                   help="judge thresholds to sweep: numbers, or 'auto' (from the judge file's validation frontier: "
                        "important-accept rates of at most 1, 2, 5, 10, 20%%); '' for none")
    p.add_argument("--baselines", default=DEFAULT_BASELINES, help="baseline operating points ('' for none)")
    p.add_argument("--oracle-labels", default=None, help="labels mined on THESE questions (oracle upper bound)")
    p.add_argument("--mine-oracle", action="store_true", help="mine the oracle labels now (into OUT_DIR/oracle_labels.jsonl)")
    p.add_argument("--mine-batch-size", type=int, default=1,
                   help="prompts mined together for --mine-oracle (faster; labels keyed by prefix, so the same oracle)")
    p.add_argument("--checker", default="gsm8k")
    add_model_args(p)
    add_problem_args(p, split="eval", variants=0)
    add_decoding_args(p)
    args = p.parse_args(argv)
    target, draft, tokenizer = load_pair(args)
    judge = load_judge(args, target, draft, required=bool(args.thresholds))
    checker = load_checker(args.checker)
    questions = questions_from(load_problems(args), tokenizer)
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    points = [OperatingPoint("judge", (t,)) for t in judge_thresholds(args.thresholds, judge)]
    points += parse_points(args.baselines)
    unimportant = None
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.mine_oracle:
        args.oracle_labels = str(out_dir / "oracle_labels.jsonl")
        miner = make_miner(target, draft, checker, decode, MiningConfig(args.max_new_tokens), args.mine_batch_size)
        mine_prompts(miner, [(q.qid, q.prompt_ids, q.example) for q in questions], args.oracle_labels)
    if args.oracle_labels:
        unimportant = unimportant_map(read_records(args.oracle_labels)[0])
        points.append(OperatingPoint("oracle"))
    tree = draft_tree(args)
    runs = run_points(target, draft, decode, questions, points, tree, checker, out_dir, judge, unimportant,
                      args.max_new_tokens)
    rows = summarize(runs, points, checker, [q.qid for q in questions])
    meta = {"target": target.name, "draft": draft.name, "tree_parents": list(tree.parents), "questions": len(questions),
            "judge": judge.meta.get("metrics", {}).get("val_roc_auc") if judge else None,
            "max_new_tokens": args.max_new_tokens, "dtype": dtype_name(target.dtype)}
    paths = write_summary(rows, out_dir, meta)
    png = plot_frontier(rows, out_dir / "frontier.png", f"{target.name} <- {draft.name}, {len(questions)} questions")
    print(format_table(rows))
    print(f"\nwrote {paths['json']}, {paths['csv']}, {png}")
    return 0


def main_bench(argv: list[str]) -> int:
    import shlex

    import torch

    p = argparse.ArgumentParser(prog="trtllm-autojudge bench", description=__doc__)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threshold", type=float, default=None, help="AutoJudge threshold (default: the judge file's)")
    p.add_argument("--out", default=None, help="also write the result as JSON here (e.g. docs/results/bench_cpu.json)")
    add_model_args(p)
    add_problem_args(p, split="eval", variants=0)
    add_decoding_args(p)
    args = p.parse_args(argv)
    if args.limit is None:
        args.limit = 5
    target, draft, tokenizer = load_pair(args)
    judge = load_judge(args, target, draft, required=True)
    questions = questions_from(load_problems(args), tokenizer)
    tree = draft_tree(args)
    result = run_bench(target, draft, questions, tree, judge, args.threshold, args.repeats, args.max_new_tokens)
    subset = getattr(draft.head, "subset", None)
    result.update(dtype=dtype_name(target.dtype), command=shlex.join(["trtllm-autojudge", "bench", *argv]),
                  target=target.name, draft=draft.name, draft_vocab=None if subset is None else subset.size,
                  tree_parents=list(tree.parents), threads=torch.get_num_threads())
    print(result["table"])
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
