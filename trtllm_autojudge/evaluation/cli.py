"""`trtllm-autojudge eval` (the frontier against baselines) and `bench` (wall clock, side by side)."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import torch

from ..data.sources import add_problem_args, load_problems
from ..decoding.loading import is_eagle_draft, load_eagle_drafter, load_pair
from ..decoding.modes import JudgeRule
from ..decoding.tree import DraftTree
from ..judge.head import JudgeHead
from ..mining.cli import problem_id
from ..mining.miner import MiningConfig
from ..mining.run import LOCAL_REGENERATORS, local_regenerator, make_miner, mine_prompts
from ..mining.store import read_records, unimportant_map
from ..models.dtype import dtype_name
from ..models.loading import add_model_args
from ..tasks import add_task_args, task_from_args
from .bench import assisted_mode, run_bench, speculative_modes, target_only_mode
from .certificate import Certificate
from .common import (add_batch_arg, add_budget_arg, add_decoding_args, apply_rule_options, budget_judge,
                     certificate_lines, check_batch, draft_tree,
                     judge_certificate, judge_path, judge_record, judge_thresholds, load_judge_file, question_set,
                     questions_from, refuse_calibration_questions, settle_k)
from .methods import OperatingPoint, judge_points
from .plot import plot_frontier
from .runner import format_table, run_points, summarize, tree_parents, write_summary
from .speed_model import StepCostSampler
from .trajectory import live_divergence, trajectory_row

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


def oracle_rows(rows: list[dict], runs: list[dict], records: list[dict], questions, draft, tree) -> dict:
    """Add the exact ``oracle-trajectory`` row (chains) to ``rows``; meta on where live oracle runs
    left the mined sequence (a live run keyed by exact prefixes accepts nothing after that)."""
    if not records:
        return {}
    by_id = {str(r["id"]): r for r in records}
    mined = [by_id[q.qid] for q in questions if q.qid in by_id]
    live = {r["qid"]: r["tokens"] for r in runs if r["spec"] == "oracle"}
    points = [live_divergence(live[str(r["id"])], r) for r in mined if str(r["id"]) in live]
    meta = {"oracle_labels": sum(len(r["labels"]) for r in mined),
            "oracle_unimportant": sum(1 - lab[1] for r in mined for lab in r["labels"]),
            "live_oracle_left_mined_sequence": sum(p is not None for p in points),
            "live_oracle_divergence_positions": [p for p in points if p is not None]}
    if isinstance(tree, DraftTree) and tree.is_chain:  # the replay is defined
        lossless = next((r for r in rows if r["spec"] == "lossless"), None)
        rows.append(trajectory_row(mined, draft, tree.num_nodes, lossless))
    return meta


def main_eval(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="trtllm-autojudge eval", description=__doc__)
    p.add_argument("--out-dir", default="out/eval", help="runs.jsonl (resumable), summary.json/.csv, frontier.png")
    p.add_argument("--thresholds", default=None,
                   help="judge thresholds to sweep: numbers, or 'auto' (from the judge file's validation frontier: "
                        "important-accept rates of at most 1, 2, 5, 10, 20%%); '' for none (default: auto, or none "
                        "with --answer-budget)")
    p.add_argument("--max-judged", type=int, default=None,
                   help="judge points allow at most this many judged acceptances per response (the rest lossless; "
                        "default: the judge file's own limit, set by calibrate --max-judged, else none)")
    p.add_argument("--baselines", default=DEFAULT_BASELINES,
                   help="baseline operating points ('' for none); judge@T,M points may be added here too")
    p.add_argument("--score-lossless", action="store_true",
                   help="the lossless runs score the judge (accepting nothing), so a judge point copies them on every "
                        "question where it would accept nothing (as calibrate does); their tokens/s then include the "
                        "scoring")
    p.add_argument("--oracle-labels", default=None, help="labels mined on THESE questions (oracle upper bound)")
    p.add_argument("--mine-oracle", action="store_true", help="mine the oracle labels now (into OUT_DIR/oracle_labels.jsonl)")
    p.add_argument("--mine-batch-size", type=int, default=1,
                   help="prompts mined together for --mine-oracle (faster; labels keyed by prefix, so the same oracle)")
    p.add_argument("--mine-regenerator", choices=LOCAL_REGENERATORS, default="transformers",
                   help="regeneration backend of --mine-oracle (see `mine --regenerator`; lookup-draft "
                        "needs --mine-batch-size 1)")
    add_task_args(p)
    add_model_args(p)
    add_problem_args(p, split="eval", variants=0)
    add_decoding_args(p)
    add_budget_arg(p)
    add_batch_arg(p)
    args = p.parse_args(argv)
    check_batch(p, args)
    if args.thresholds is None:
        args.thresholds = "" if args.answer_budget is not None else "auto"
    task = task_from_args(args)
    problems = load_problems(args, task, held_out=True)
    judge_file = judge_path(args, required=bool(args.thresholds) or args.answer_budget is not None, task=task)
    if judge_file is not None and Path(judge_file).is_file():  # before loading the models: a refusal costs nothing
        refuse_calibration_questions(Certificate.from_meta(JudgeHead.load(judge_file).meta.get("certificate")),
                                     [problem_id(p.question) for p in problems], "eval")
    target, draft, tokenizer = load_pair(args, task)
    settle_k(args, draft)
    judge = None if judge_file is None else load_judge_file(judge_file, target, draft)
    judge = apply_rule_options(judge, args, tokenizer)
    if args.answer_budget is not None:
        judge = budget_judge(judge, args.answer_budget, target, draft, task, args.k if args.tree is None else None,
                             args.tree, args.max_new_tokens)
    checker = task.checker
    questions = questions_from(problems, tokenizer, task)
    certificate, mismatches = judge_certificate(judge, target, draft, task, args.k if args.tree is None else None,
                                                args.tree, args.max_new_tokens)
    if judge is not None:
        print(certificate_lines(certificate, mismatches), flush=True)
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    limit = args.max_judged if args.max_judged is not None else None if judge is None else judge.meta.get("max_judged")
    points = judge_points(judge_thresholds(args.thresholds, judge), limit)
    points += parse_points(args.baselines)
    if args.answer_budget is not None:  # the budget's rung, by its threshold: one folder may hold several rungs
        points += [p for p in judge_points([judge.threshold], limit) if p.spec not in {q.spec for q in points}]
    unimportant = None
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.mine_oracle:
        args.oracle_labels = str(out_dir / "oracle_labels.jsonl")
        try:
            regenerator = local_regenerator(args.mine_regenerator, target, draft, args.mine_batch_size)
            miner = make_miner(target, draft, checker, decode, MiningConfig(args.max_new_tokens), args.mine_batch_size, regenerator)
        except ValueError as e:
            raise SystemExit(f"eval: {e}") from None
        mine_prompts(miner, [(q.qid, q.prompt_ids, q.example) for q in questions], args.oracle_labels)
    oracle_records = []
    if args.oracle_labels:
        oracle_records = read_records(args.oracle_labels)[0]
        unimportant = unimportant_map(oracle_records)
        points.append(OperatingPoint("oracle"))
    tree = draft_tree(args)
    try:
        runs = run_points(target, draft, decode, questions, points, tree, checker, out_dir, judge, unimportant,
                          args.max_new_tokens, accept_impl=args.accept_impl, score_lossless=args.score_lossless,
                          batch=args.batch)
    except ValueError as e:
        raise SystemExit(f"eval: {e}") from None
    rows = summarize(runs, points, checker, [q.qid for q in questions])
    oracle_meta = oracle_rows(rows, runs, oracle_records, questions, draft, tree)
    meta = {"task": task.name, "target": target.name, "draft": draft.name, "tree_parents": tree_parents(tree),
            "questions": len(questions),
            "judge": judge_record(judge_file, judge) if judge else None,
            "max_new_tokens": args.max_new_tokens, "dtype": dtype_name(target.dtype),
            "k": args.k if args.tree is None else None, "tree": args.tree, "accept_impl": args.accept_impl,
            "draft_vocab": None if getattr(draft.head, "subset", None) is None else draft.head.subset.size,
            "question_set": question_set(args, [q.qid for q in questions]), "command": shlex.join(["trtllm-autojudge", "eval", *argv]),
            "certificate": None if certificate is None else {"summary": certificate.summary(), "applies": not mismatches,
                                                             "mismatches": mismatches},
            **oracle_meta}
    paths = write_summary(rows, out_dir, meta)
    png = plot_frontier(rows, out_dir / "frontier.png", f"{target.name} <- {draft.name}, {len(questions)} questions")
    print(format_table(rows))
    print(f"\nwrote {paths['json']}, {paths['csv']}, {png}")
    return 0


def main_bench(argv: list[str]) -> int:
    import torch

    p = argparse.ArgumentParser(prog="trtllm-autojudge bench", description=__doc__)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threshold", type=float, default=None,
                   help="AutoJudge threshold (default: the judge file's, or its --answer-budget rung)")
    p.add_argument("--compare-judge", action="append", default=[], metavar="PATH",
                   help="another judge file, run as one more mode (autojudge-2, ...) at its own default threshold; "
                        "repeatable")
    p.add_argument("--out", default=None, help="also write the result as JSON here (e.g. docs/results/bench_cpu.json)")
    p.add_argument("--eagle", default=None, metavar="eagle|eagle:HEAD",
                   help="also an EAGLE head's modes (eagle-lossless, eagle-autojudge): the task's shipped head or HEAD")
    p.add_argument("--eagle-tree", default=None,
                   help="the EAGLE modes' tree, as --tree: branching per depth (1,1,1: a chain of 3) or dynamic:D,K,N "
                        "(default: a chain as deep as the head was trained to draft)")
    p.add_argument("--eagle-judge", default=None,
                   help="the eagle-autojudge mode's judge, target-only (default: the task's judge for its EAGLE head)")
    p.add_argument("--eagle-threshold", type=float, default=None, help="its threshold (default: the judge file's)")
    p.add_argument("--assisted", action="store_true",
                   help="also transformers' assisted generation with the draft model (mode 'assisted')")
    add_task_args(p)
    add_model_args(p)
    add_problem_args(p, split="eval", variants=0)
    add_decoding_args(p)
    add_budget_arg(p)
    args = p.parse_args(argv)
    if args.limit is None:
        args.limit = 5
    if args.threshold is not None and args.answer_budget is not None:
        p.error("--threshold and --answer-budget both set the AutoJudge threshold: give one")
    if args.eagle is not None and not is_eagle_draft(args.eagle):
        p.error(f"--eagle takes 'eagle' (the task's shipped head) or 'eagle:HEAD', got {args.eagle!r}")
    if args.assisted and is_eagle_draft(args.draft):
        p.error("--assisted runs transformers' assisted generation with a draft model; --draft is an EAGLE head")
    task = task_from_args(args)
    problems = load_problems(args, task, held_out=True)
    target, draft, tokenizer = load_pair(args, task)
    settle_k(args, draft)
    files = [judge_path(args, required=True, task=task), *args.compare_judge]
    judges = [apply_rule_options(load_judge_file(path, target, draft), args, tokenizer) for path in files]
    if args.answer_budget is not None:
        judges[0] = budget_judge(judges[0], args.answer_budget, target, draft, task,
                                 args.k if args.tree is None else None, args.tree, args.max_new_tokens)
    questions = questions_from(problems, tokenizer, task)
    tree = draft_tree(args)
    rules = [JudgeRule.at_default(judges[0], args.threshold)] + [JudgeRule.at_default(judge) for judge in judges[1:]]
    modes = [target_only_mode(target, args.max_new_tokens),
             *speculative_modes(target, draft, tree, rules, args.max_new_tokens, args.accept_impl)]
    if args.eagle is not None:
        eagle = load_eagle_drafter(args.eagle, target, tokenizer, task)
        eagle_args = argparse.Namespace(**{**vars(args), "draft": args.eagle, "judge": args.eagle_judge,
                                           "tree": args.eagle_tree, "k": None})
        settle_k(eagle_args, eagle)
        files.append(judge_path(eagle_args, required=True, task=task))
        judges.append(apply_rule_options(load_judge_file(files[-1], target, eagle), args, tokenizer))
        modes += speculative_modes(target, eagle, draft_tree(eagle_args), [JudgeRule.at_default(judges[-1],
                                   args.eagle_threshold)], args.max_new_tokens, args.accept_impl, prefix="eagle-")
    if args.assisted:
        modes.append(assisted_mode(target, draft, args.max_new_tokens))
    try:
        sampler = None if args.tree or is_eagle_draft(args.draft) else StepCostSampler(target, draft, [args.k])
        result = run_bench(target, questions, modes, args.repeats, sampler)
    except ValueError as e:
        raise SystemExit(f"bench: {e}") from None
    for info, file, judge in zip(result["judges"].values(), files, judges):
        info |= judge_record(file, judge)
    subset = getattr(draft.head, "subset", None)
    result.update(task=task.name, dtype=dtype_name(target.dtype), accept_impl=args.accept_impl, command=shlex.join(["trtllm-autojudge", "bench", *argv]),
                  target=target.name, draft=draft.name, draft_vocab=None if subset is None else subset.size,
                  tree_parents=tree_parents(tree), threads=torch.get_num_threads(),
                  eagle=None if args.eagle is None else {"head": args.eagle, "name": eagle.name,
                                                         "tree": eagle_args.tree, "k": eagle_args.k})
    print(result["table"])
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
