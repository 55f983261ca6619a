"""`trtllm-autojudge calibrate`: certify a judge's default threshold by the final answers it changes.

``train`` sets the default threshold from the validation LABELS: the largest threshold that accepts
at most 1% of the important mismatches. That is a proxy for what a user cares about, the share of
final answers that change, and a loose one: how many accepted mismatches a response meets, and how
often accepted ones together flip its answer, both depend on the task and the draft.

This verb measures the answers themselves and CERTIFIES them (:mod:`.certificate`). On calibration
questions (disjoint from those you will report on: ``build_scripts/heldout_questions.py --exclude``)
it runs lossless decoding, then the judge at candidate thresholds from the smallest up, and keeps
the largest candidate whose one-sided 95% Clopper-Pearson upper bound on the share of answers
changed is within ``--max-answer-change``, and on the share of gold losses within
``--max-gold-drop``. It stops at the first candidate that fails (fixed-sequence testing: the chosen
threshold is certified at 95% however many candidates ran, since a bad candidate is only chosen when
the first bad one in the sequence passes), and a candidate stops as soon as its count of changes
can no longer stay within its budget, so a failing candidate costs a few questions.

A budget needs enough questions: 0 changes in 299 bound the share at 1%; with fewer the verb
refuses before loading anything and says how many it needs. More questions let a few changes
through (2 in 690, 4 in 1,038 at 1%), which certifies larger thresholds for a judge whose changes
are rare; calibrate once on the set you mean to use (growing it after a look tests the first
questions twice). A judge run at one threshold answers every threshold inside its threshold margin
without decoding again (:mod:`.runner`), so a dense
ladder costs little more than a sparse one; the lossless runs score the judge too (at threshold 0,
accepting nothing), so a candidate decodes only the questions where it accepts a mismatch. Runs go
to ``OUT_DIR/runs.jsonl`` and resume like ``eval``'s.

The judge is written to ``--out`` with the chosen threshold as its default and the certificate in
its metadata (questions and their ids, changes, bounds, budgets, K, dtype, token budget and the
pair's fingerprint); ``eval`` and ``demo`` print it, and ``eval`` refuses to report on questions it
was calibrated on.
"""
from __future__ import annotations

import argparse
import json
import math
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..data.sources import add_problem_args, load_problems
from ..judge.head import JudgeHead
from ..models.dtype import dtype_name
from ..decoding.loading import load_pair
from ..models.loading import add_model_args
from ..tasks import add_task_args, task_from_args
from .certificate import CONFIDENCE, Certificate, most_allowed, pair_fingerprint, questions_needed, rule_fields
from .common import (add_batch_arg, add_decoding_args, apply_rule_options, check_batch, draft_tree, judge_path,
                     judge_record, judge_thresholds, load_judge_file, question_set, questions_from, settle_k)
from .methods import OperatingPoint
from .plot import plot_frontier
from .runner import format_table, run_points, summarize

# validation important-accept rates whose frontier thresholds form the default ladder
CALIBRATION_HARM_CAPS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1)
CALIBRATION_SEED = 31337  # default --seed of the training-template variants; the shipped certificate's (docs/results.md)
CALIBRATION_VARIANTS = 5  # default --variants-per-template: about 350 held-out questions, enough for a 1% budget


def certified(row: dict, questions: int, max_answer_change: float, max_gold_drop: float) -> bool:
    """Whether a summary row ran every question and both its bounds are within their budgets."""
    return (row["questions"] == questions and row["answer_change_bound"] <= max_answer_change
            and row["gold_drop_bound"] <= max_gold_drop)


def calibrate_threshold(measure: Callable[[float], dict], candidates: list[float], questions: int,
                        max_answer_change: float, max_gold_drop: float) -> tuple[float | None, list[dict]]:
    """(the largest certified candidate before the first failure, or None; the rows of every candidate run).

    ``measure(t)`` returns the judge's summary row at threshold t, over every question or, when it
    stopped early, over fewer. Candidates run from the smallest up and the walk stops at the first
    that is not certified (module docstring).
    """
    ladder = sorted(set(candidates))
    if not ladder:
        raise ValueError("calibrate needs at least one candidate threshold")
    chosen, rows = None, []
    for t in ladder:
        row = measure(t)
        ok = certified(row, questions, max_answer_change, max_gold_drop)
        rows.append({"threshold": t, "certified": ok, **row})
        if not ok:
            break
        chosen = t
    return chosen, rows


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="trtllm-autojudge calibrate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="write the certified judge file here")
    p.add_argument("--out-dir", default="out/calibrate",
                   help="runs.jsonl (resumable, shared with eval), calibration.json, frontier.png")
    p.add_argument("--max-answer-change", type=float, default=0.01,
                   help="largest 95%% upper bound allowed on the share of final answers that differ from lossless "
                        "(default 0.01: at least 299 questions)")
    p.add_argument("--max-gold-drop", type=float, default=0.01,
                   help="largest 95%% upper bound allowed on the share of questions lossless answers right and the "
                        "judge wrong (default 0.01)")
    p.add_argument("--max-judged", type=int, default=None,
                   help="at most this many judged acceptances per response (the rest lossless); certified with it")
    p.add_argument("--thresholds", default="auto",
                   help="candidate thresholds: numbers, or 'auto' (the judge file's validation frontier at "
                        "important-accept rates of 0.1%% to 10%%, and its own threshold)")
    add_task_args(p)
    add_model_args(p)
    add_problem_args(p, split="train", variants=CALIBRATION_VARIANTS)
    p.set_defaults(seed=CALIBRATION_SEED)  # the embedded files were trained on low seeds' variants
    add_decoding_args(p)
    add_batch_arg(p)
    args = p.parse_args(argv)
    check_batch(p, args)
    for name in ("max_answer_change", "max_gold_drop"):
        if not 0.0 < getattr(args, name) < 1.0:
            p.error(f"--{name.replace('_', '-')} is a share of the questions: give a number in (0, 1), "
                    f"got {getattr(args, name)}")
    if args.max_judged is not None and args.max_judged < 0:
        p.error(f"--max-judged is a number of judged acceptances per response: give 0 or more, got {args.max_judged}")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    task = task_from_args(args)
    problems = load_problems(args, task, held_out=True)
    n = len(problems)
    needed = max(questions_needed(args.max_answer_change), questions_needed(args.max_gold_drop))
    if n < needed:
        raise SystemExit(f"calibrate: budgets of {args.max_answer_change:g} answers changed and {args.max_gold_drop:g} "
                         f"gold drop need at least {needed} calibration questions (with none changed, the "
                         f"{CONFIDENCE:.0%} upper bound is then within the budget); got {n}. Give more questions "
                         f"(python build_scripts/heldout_questions.py --per-template "
                         f"{math.ceil(needed / 70) + 1} ..., or --variants-per-template), or raise the budgets")
    target, draft, tokenizer = load_pair(args, task)
    settle_k(args, draft)
    judge_file = judge_path(args, required=True, task=task)
    judge = apply_rule_options(load_judge_file(judge_file, target, draft), args, tokenizer)
    candidates = judge_thresholds(args.thresholds, judge, CALIBRATION_HARM_CAPS)
    if args.thresholds.strip() == "auto":
        candidates.append(judge.threshold)
    if not candidates:
        raise SystemExit("calibrate: --thresholds gave no candidates: give numbers or 'auto'")
    questions = questions_from(problems, tokenizer, task)
    qids = [q.qid for q in questions]
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    tree, out_dir = draft_tree(args), Path(args.out_dir)
    allowed = (most_allowed(n, args.max_answer_change), most_allowed(n, args.max_gold_drop))
    run = lambda points, stop=None: run_points(target, draft, decode, questions, points, tree, task.checker,  # noqa: E731
                                               out_dir, judge, max_new_tokens=args.max_new_tokens, stop=stop,
                                               accept_impl=args.accept_impl, score_lossless=True, batch=args.batch)
    ladder = ", ".join(f"{t:g}" for t in sorted(set(candidates)))
    print(f"calibrate: {n} questions; within the budgets at {CONFIDENCE:.0%}, at most {allowed[0]} answers changed "
          f"and {allowed[1]} gold losses; candidates {ladder}, from the smallest up to the first that fails", flush=True)
    lossless = summarize(run([]), [], task.checker, qids)[0]

    def measure(threshold: float) -> dict:
        point = OperatingPoint("judge", (threshold,) if args.max_judged is None else (threshold, args.max_judged))
        beyond = lambda runs: _beyond_budget(runs, point.spec, task.checker, allowed)  # noqa: E731
        row = summarize(run([point], beyond), [point], task.checker, qids)[1]
        stopped = "" if row["questions"] == n else f" (stopped after {row['questions']} of {n}: beyond the budget)"
        print(f"{point.spec}: {row['answers_changed']} answers changed, bound {row['answer_change_bound']:.2%}; "
              f"{row['gold_losses']} gold losses, bound {row['gold_drop_bound']:.2%}; {row['vs_lossless']:.3f}x the "
              f"tokens per target forward of lossless [{row['vs_lossless_lo']:.3f}, {row['vs_lossless_hi']:.3f}]"
              f"{stopped}", flush=True)
        return row

    chosen, rows = calibrate_threshold(measure, candidates, n, args.max_answer_change, args.max_gold_drop)
    label_threshold = judge.meta.get("calibration", {}).get("label_threshold", judge.threshold)  # calibrated again?
    record = {"questions": n, "question_set": question_set(args, qids), "max_answer_change": args.max_answer_change,
              "max_gold_drop": args.max_gold_drop, "max_judged": args.max_judged, "dtype": dtype_name(target.dtype),
              "k": args.k if args.tree is None else None, "tree": args.tree, "max_new_tokens": args.max_new_tokens,
              "label_threshold": label_threshold, "chosen": chosen, "lossless": lossless, "candidates": rows,
              "command": shlex.join(["trtllm-autojudge", "calibrate", *argv])}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "calibration.json").write_text(json.dumps({"judge": judge_record(judge_file, judge), **record}, indent=1))
    table = [lossless, *rows]
    plot_frontier(table, out_dir / "frontier.png", f"calibration: {target.name} <- {draft.name}, {n} questions",
                  min_agreement=1.0 - args.max_answer_change)
    print(format_table(table))
    if chosen is None:
        raise SystemExit(f"calibrate: even the smallest candidate threshold ({rows[0]['threshold']:g}) is not certified "
                         f"(answers changed <= {args.max_answer_change:g}, gold drop <= {args.max_gold_drop:g} at "
                         f"{CONFIDENCE:.0%}); add smaller --thresholds, more questions, or raise the budgets. "
                         f"No judge file written; runs in {out_dir}")
    best = next(r for r in rows if r["threshold"] == chosen)
    certificate = Certificate(
        threshold=chosen, max_judged=args.max_judged, questions=n, question_set=question_set(args, qids), question_ids=qids,
        answers_changed=best["answers_changed"], answer_change_bound=best["answer_change_bound"],
        max_answer_change=args.max_answer_change, gold_losses=best["gold_losses"],
        gold_drop_bound=best["gold_drop_bound"], max_gold_drop=args.max_gold_drop, confidence=CONFIDENCE,
        task=task.name, dtype=dtype_name(target.dtype), k=args.k if args.tree is None else None, tree=args.tree,
        max_new_tokens=args.max_new_tokens, pair=pair_fingerprint(target, draft), **rule_fields(judge.meta))
    compact = {"label_threshold": label_threshold, "command": record["command"],
               "candidates": [{k: r[k] for k in ("threshold", "certified", "questions", "answers_changed", "gold_losses",
                                                 "vs_lossless")} for r in rows]}
    meta = {**judge.meta, "certificate": certificate.as_meta(), "calibration": compact}
    if args.max_judged is not None:  # the limit is part of the certified default operating point
        meta["max_judged"] = args.max_judged
    else:
        meta.pop("max_judged", None)
    calibrated: JudgeHead = replace(judge, threshold=chosen, meta=meta)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    calibrated.save(args.out)
    print(f"\ncertified: {certificate.summary()}\ndefault threshold {judge.threshold:g} -> {chosen:g}; "
          f"wrote {args.out} and {out_dir / 'calibration.json'}")
    return 0


def _beyond_budget(runs: list[dict], spec: str, checker, allowed: tuple[int, int]) -> bool:
    """Whether the ``spec`` runs so far already hold more answers changed, or gold losses, than a
    certified row may (``allowed``: the most of each, :func:`.certificate.most_allowed`)."""
    lossless = {r["qid"]: r for r in runs if r["spec"] == "lossless"}
    mine = [r for r in runs if r["spec"] == spec and r["qid"] in lossless]
    changed = sum(not checker.same(r["answer"], lossless[r["qid"]]["answer"]) for r in mine)
    losses = sum(bool(lossless[r["qid"]]["gold_correct"]) and not r["gold_correct"] for r in mine)
    return changed > allowed[0] or losses > allowed[1]
