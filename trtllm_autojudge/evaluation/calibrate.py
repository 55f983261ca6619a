"""`trtllm-autojudge calibrate`: set a judge file's default threshold by the final answers.

``train`` sets the default threshold from the validation LABELS: the largest threshold that accepts
at most 1% of the important mismatches. That is a proxy for what a user cares about, the share of
final answers that change, and a loose one: how many accepted mismatches a response meets, and how
often an accepted important one really flips its answer, both depend on the task and the draft.

This verb measures the answers themselves. On calibration questions (disjoint from those you will
report on: ``build_scripts/heldout_questions.py --exclude``) it runs lossless decoding and the judge
at candidate thresholds, and keeps the largest candidate within both budgets against lossless:
answers changed at most ``--max-answer-change``, gold accuracy down at most ``--max-gold-drop``.

The walk starts at the judge file's own threshold: up the ladder while candidates pass, or, when the
file's threshold already fails, down until one passes. It assumes that a higher threshold changes
at least as many answers (true on average, not per question), so it stops at the first candidate
that breaks a budget; every candidate it ran is reported. Each candidate costs one decoding pass
over the questions. Runs go to ``OUT_DIR/runs.jsonl`` and resume like ``eval``'s (the same
``--out-dir`` serves both verbs).

The judge is written to ``--out`` with the chosen threshold as its default and a ``calibration``
record in its metadata: the questions, the budgets, and every candidate's row.
"""
from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..backends.dtype import dtype_name
from ..backends.loading import add_model_args, load_pair
from ..data.sources import add_problem_args, load_problems
from ..judge.head import JudgeHead
from ..tasks import add_task_args, task_from_args
from .common import (add_decoding_args, draft_tree, judge_path, judge_record, judge_thresholds, load_judge_file,
                     question_set, questions_from)
from .methods import OperatingPoint
from .plot import plot_frontier
from .runner import format_table, run_points, summarize

# validation important-accept rates whose frontier thresholds form the default ladder
CALIBRATION_HARM_CAPS = (0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1)
CALIBRATION_SEED = 2000  # default --seed of the training-template variants; the held-out eval set's is 1000
_EPS = 1e-9  # agreement and gold are ratios of counts: compare them without float noise


def within_budget(row: dict, lossless: dict, max_answer_change: float, max_gold_drop: float) -> bool:
    """Whether a summary row keeps the answers and gold accuracy of the lossless row within budget."""
    return (1.0 - row["agreement"] <= max_answer_change + _EPS
            and lossless["gold_accuracy"] - row["gold_accuracy"] <= max_gold_drop + _EPS)


def calibrate_threshold(measure: Callable[[float], tuple[dict, dict]], candidates: list[float], start: float,
                        max_answer_change: float, max_gold_drop: float) -> tuple[float | None, list[dict]]:
    """(chosen threshold or None, the rows of every candidate run, in run order).

    ``measure(t)`` returns (the judge's summary row at threshold t, the lossless row). The walk
    starts at the candidate nearest ``start``: up while candidates pass, else down until one passes.
    None when no candidate passes: the judge changes too many answers even at the smallest.
    """
    ladder = sorted(set(candidates))
    if not ladder:
        raise ValueError("calibrate needs at least one candidate threshold")
    i = min(range(len(ladder)), key=lambda j: abs(ladder[j] - start))
    rows, step, chosen = [], 0, None
    while 0 <= i < len(ladder):
        row, lossless = measure(ladder[i])
        ok = within_budget(row, lossless, max_answer_change, max_gold_drop)
        rows.append({"threshold": ladder[i], "within_budget": ok, **row})
        if not step:
            step = 1 if ok else -1
        if ok:
            chosen = ladder[i]
        if ok != (step == 1):  # going up and failed, or going down and passed: done
            break
        i += step
    return chosen, rows


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="trtllm-autojudge calibrate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="write the calibrated judge file here")
    p.add_argument("--out-dir", default="out/calibrate",
                   help="runs.jsonl (resumable, shared with eval), calibration.json, frontier.png")
    p.add_argument("--max-answer-change", type=float, default=0.01,
                   help="largest share of final answers allowed to differ from lossless (default 0.01)")
    p.add_argument("--max-gold-drop", type=float, default=0.01,
                   help="largest drop in gold accuracy allowed against lossless (default 0.01)")
    p.add_argument("--thresholds", default="auto",
                   help="candidate thresholds: numbers, or 'auto' (the judge file's validation frontier at "
                        "important-accept rates of 0.25%% to 10%%, and its own threshold)")
    add_task_args(p)
    add_model_args(p)
    add_problem_args(p, split="train", variants=2)
    p.set_defaults(seed=CALIBRATION_SEED)  # the embedded files were trained on low seeds' variants
    add_decoding_args(p)
    args = p.parse_args(argv)
    for name in ("max_answer_change", "max_gold_drop"):
        if not 0.0 <= getattr(args, name) < 1.0:
            p.error(f"--{name.replace('_', '-')} is a share of the questions: give a number in [0, 1), "
                    f"got {getattr(args, name)}")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    task = task_from_args(args)
    problems = load_problems(args, task, held_out=True)
    target, draft, tokenizer = load_pair(args, task)
    judge_file = judge_path(args, required=True, task=task)
    judge = load_judge_file(judge_file, target, draft)
    candidates = judge_thresholds(args.thresholds, judge, CALIBRATION_HARM_CAPS)
    if args.thresholds.strip() == "auto":
        candidates.append(judge.threshold)
    if not candidates:
        raise SystemExit("calibrate: --thresholds gave no candidates: give numbers or 'auto'")
    questions = questions_from(problems, tokenizer, task)
    qids = [q.qid for q in questions]
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    tree, out_dir = draft_tree(args), Path(args.out_dir)
    reference = {}  # the lossless row, once measured

    def measure(threshold: float) -> tuple[dict, dict]:
        point = OperatingPoint("judge", (threshold,))
        runs = run_points(target, draft, decode, questions, [point], tree, task.checker, out_dir, judge,
                          max_new_tokens=args.max_new_tokens)
        lossless, row = summarize(runs, [point], task.checker, qids)
        reference["lossless"] = lossless
        print(f"{point.spec}: answers kept {row['agreement']:.1%}, gold {row['gold_accuracy']:.1%} "
              f"(lossless {lossless['gold_accuracy']:.1%}), {row['vs_lossless']:.3f}x the tokens per target forward "
              f"of lossless (95% interval {row['vs_lossless_lo']:.3f}-{row['vs_lossless_hi']:.3f})", flush=True)
        return row, lossless

    chosen, rows = calibrate_threshold(measure, candidates, judge.threshold, args.max_answer_change, args.max_gold_drop)
    lossless = reference["lossless"]
    label_threshold = judge.meta.get("calibration", {}).get("label_threshold", judge.threshold)  # calibrated again?
    record = {"questions": len(questions), "question_set": question_set(args),
              "max_answer_change": args.max_answer_change, "max_gold_drop": args.max_gold_drop,
              "dtype": dtype_name(target.dtype), "k": args.k if args.tree is None else None, "tree": args.tree,
              "max_new_tokens": args.max_new_tokens, "label_threshold": label_threshold, "chosen": chosen,
              "lossless": lossless, "candidates": rows,
              "command": shlex.join(["trtllm-autojudge", "calibrate", *argv])}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "calibration.json").write_text(json.dumps({"judge": judge_record(judge_file, judge), **record}, indent=1))
    table = [lossless, *sorted(rows, key=lambda r: r["threshold"])]
    plot_frontier(table, out_dir / "frontier.png", f"calibration: {target.name} <- {draft.name}, {len(questions)} questions",
                  min_agreement=1.0 - args.max_answer_change)
    print(format_table(table))
    if chosen is None:
        raise SystemExit(f"calibrate: even the smallest candidate threshold tried ({rows[-1]['threshold']:g}) breaks "
                         f"the budgets (answers changed <= {args.max_answer_change:g}, gold drop <= "
                         f"{args.max_gold_drop:g}); add smaller --thresholds, or raise the budgets. "
                         f"No judge file written; runs in {out_dir}")
    calibrated: JudgeHead = replace(judge, threshold=chosen, meta={**judge.meta, "calibration": record})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    calibrated.save(args.out)
    print(f"\ndefault threshold {judge.threshold:g} -> {chosen:g} (the largest candidate within the budgets on "
          f"{len(questions)} questions); wrote {args.out} and {out_dir / 'calibration.json'}")
    return 0
