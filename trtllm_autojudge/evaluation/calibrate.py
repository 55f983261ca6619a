"""`trtllm-autojudge calibrate`: certify a judge's default threshold by the final answers it changes.

``train`` sets the default threshold from the validation LABELS: the largest threshold that accepts
at most 1% of the important mismatches. That is a proxy for what a user cares about, the share of
final answers that change, and a loose one: how many accepted mismatches a response meets, and how
often accepted ones together flip its answer, both depend on the task and the draft.

This verb measures the answers themselves and CERTIFIES them (:mod:`.certificate`). On calibration
questions (disjoint from those you will report on: ``build_scripts/heldout_questions.py
--exclude-draw``) it runs lossless decoding, then the judge at candidate thresholds from the smallest
up, and keeps the largest candidate whose one-sided 95% Clopper-Pearson upper bound on the share of
answers changed is within ``--max-answer-change``, and on the share of gold losses within
``--max-gold-drop``: the judge file's default threshold. Each budget of ``--answer-budgets`` (0.5%,
1%, 2%, 5% by default) gets its own threshold the same way, the certified LADDER that ``generate``,
``eval`` and ``bench --answer-budget B`` read. Each budget's walk stops at the first candidate that
fails it (fixed-sequence testing: its threshold is certified at 95% however many candidates ran,
since a bad candidate is only chosen when the first bad one in the sequence passes), the
calibration stops when every budget has failed, and a candidate stops as soon as its count of
changes is beyond every budget still open, so a failing candidate costs a few questions.

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
from dataclasses import dataclass, replace
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


ANSWER_BUDGETS = (0.005, 0.01, 0.02, 0.05)  # default --answer-budgets: the certified ladder a judge file carries


@dataclass(frozen=True)
class Budget:
    """One fixed-sequence test of the walk: budgets on the shares of answers changed and of gold losses."""
    answers: float
    gold: float


def certified(row: dict, questions: int, budget: Budget) -> bool:
    """Whether a summary row ran every question and both its bounds are within ``budget``."""
    return (row["questions"] == questions and row["answer_change_bound"] <= budget.answers
            and row["gold_drop_bound"] <= budget.gold)


def calibrate_ladder(measure: Callable[[float, list[Budget]], dict], candidates: list[float], questions: int,
                     budgets: list[Budget]) -> tuple[dict[Budget, float | None], list[dict]]:
    """({budget: the largest candidate certified within it before the first that fails it, or None};
    the rows of every candidate run).

    ``measure(t, open_budgets)`` returns the judge's summary row at threshold t, over every question
    or, when it stopped early (beyond every budget still open), over fewer. Candidates run from the
    smallest up; each budget's walk stops at the first candidate it does not certify (fixed-sequence
    testing, so each budget's threshold is certified at 95% on its own), and the calibration stops
    when no budget is left open.
    """
    ladder = sorted(set(candidates))
    if not ladder:
        raise ValueError("calibrate needs at least one candidate threshold")
    chosen: dict[Budget, float | None] = {b: None for b in budgets}
    still_open, rows = list(dict.fromkeys(budgets)), []
    for t in ladder:
        if not still_open:
            break
        row = measure(t, still_open)
        still_open = [b for b in still_open if certified(row, questions, b)]
        for b in still_open:
            chosen[b] = t
        rows.append({"threshold": t, "within": sorted({b.answers for b in still_open}), **row})
    return chosen, rows


def ladder_record(chosen: dict[Budget, float | None], rows: list[dict], answer_budgets: list[float]) -> list[dict]:
    """The certified ladder a certificate carries: per answer budget b (gold drop within b too: a gold
    loss changes the answer), the largest threshold certified within it, and that row's counts."""
    by_threshold = {r["threshold"]: r for r in rows}
    ladder = []
    for b in sorted(answer_budgets):
        t = chosen[Budget(b, b)]
        row = by_threshold.get(t, {})
        ladder.append({"budget": b, "threshold": t, **{k: row.get(k) for k in (
            "answers_changed", "answer_change_bound", "gold_losses", "gold_drop_bound", "vs_lossless")}})
    return ladder


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
    p.add_argument("--answer-budgets", default=",".join(f"{b:g}" for b in ANSWER_BUDGETS), metavar="B,B,...",
                   help="the certified ladder the judge file carries: for each budget on the share of answers "
                        "changed, the largest threshold certified within it (gold drop within it too), which "
                        "generate, eval and bench pick with --answer-budget (default %(default)s; the walk goes on "
                        "until every budget has failed, so a large budget costs candidates)")
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
    try:
        args.answer_budgets = sorted({float(b) for b in args.answer_budgets.split(",") if b.strip()})
    except ValueError:
        p.error(f"--answer-budgets takes comma-separated shares, e.g. 0.005,0.01,0.02,0.05; got {args.answer_budgets!r}")
    for name, value in [("max_answer_change", args.max_answer_change), ("max_gold_drop", args.max_gold_drop),
                        *[("answer_budgets", b) for b in args.answer_budgets]]:
        if not 0.0 < value < 1.0:
            p.error(f"--{name.replace('_', '-')} is a share of the questions: give a number in (0, 1), got {value:g}")
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
    default = Budget(args.max_answer_change, args.max_gold_drop)
    budgets = [default, *(Budget(b, b) for b in args.answer_budgets)]
    allowed = lambda b: (most_allowed(n, b.answers), most_allowed(n, b.gold))  # noqa: E731
    run = lambda points, stop=None: run_points(target, draft, decode, questions, points, tree, task.checker,  # noqa: E731
                                               out_dir, judge, max_new_tokens=args.max_new_tokens, stop=stop,
                                               accept_impl=args.accept_impl, score_lossless=True, batch=args.batch)
    ladder = ", ".join(f"{t:g}" for t in sorted(set(candidates)))
    print(f"calibrate: {n} questions; within the budgets at {CONFIDENCE:.0%}, at most {allowed(default)[0]} answers "
          f"changed and {allowed(default)[1]} gold losses (the default threshold); the ladder's budgets "
          f"{', '.join(_rung_allowance(b, n) for b in args.answer_budgets)}; candidates "
          f"{ladder}, from the smallest up until every budget has failed", flush=True)
    try:
        lossless = summarize(run([]), [], task.checker, qids)[0]
    except ValueError as e:
        raise SystemExit(f"calibrate: {e}") from None

    def measure(threshold: float, still_open: list[Budget]) -> dict:
        point = OperatingPoint("judge", (threshold,) if args.max_judged is None else (threshold, args.max_judged))
        beyond = lambda runs: _beyond_budgets(runs, point.spec, task.checker, [allowed(b) for b in still_open])  # noqa: E731
        row = summarize(run([point], beyond), [point], task.checker, qids)[1]
        stopped = "" if row["questions"] == n else f" (stopped after {row['questions']} of {n}: beyond every budget)"
        print(f"{point.spec}: {row['answers_changed']} answers changed, bound {row['answer_change_bound']:.2%}; "
              f"{row['gold_losses']} gold losses, bound {row['gold_drop_bound']:.2%}; {row['vs_lossless']:.3f}x the "
              f"tokens per target forward of lossless [{row['vs_lossless_lo']:.3f}, {row['vs_lossless_hi']:.3f}]"
              f"{stopped}", flush=True)
        return row

    certified_at, rows = calibrate_ladder(measure, candidates, n, budgets)
    chosen = certified_at[default]
    for r in rows:
        r["certified"] = chosen is not None and r["threshold"] <= chosen
    ladder_rungs = ladder_record(certified_at, rows, args.answer_budgets)
    label_threshold = judge.meta.get("calibration", {}).get("label_threshold", judge.threshold)  # calibrated again?
    record = {"questions": n, "question_set": question_set(args, qids), "max_answer_change": args.max_answer_change,
              "max_gold_drop": args.max_gold_drop, "max_judged": args.max_judged, "dtype": dtype_name(target.dtype),
              "k": args.k if args.tree is None else None, "tree": args.tree, "max_new_tokens": args.max_new_tokens,
              "label_threshold": label_threshold, "chosen": chosen, "ladder": ladder_rungs, "lossless": lossless,
              "candidates": rows,
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
        max_new_tokens=args.max_new_tokens, pair=pair_fingerprint(target, draft), ladder=ladder_rungs,
        **rule_fields(judge.meta))
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


def _rung_allowance(budget: float, n: int) -> str:
    """A ladder budget as the opening line reads it: the changes it allows in ``n`` questions."""
    most = most_allowed(n, budget)
    return f"{budget:g} ({most} changed)" if most >= 0 else f"{budget:g} (needs {questions_needed(budget)} questions)"


def _beyond_budgets(runs: list[dict], spec: str, checker, allowed: list[tuple[int, int]]) -> bool:
    """Whether the ``spec`` runs so far already hold more answers changed, or gold losses, than a
    row certified within any budget still open may (``allowed``: the most of each per budget,
    :func:`.certificate.most_allowed`)."""
    lossless = {r["qid"]: r for r in runs if r["spec"] == "lossless"}
    mine = [r for r in runs if r["spec"] == spec and r["qid"] in lossless]
    changed = sum(not checker.same(r["answer"], lossless[r["qid"]]["answer"]) for r in mine)
    losses = sum(bool(lossless[r["qid"]]["gold_correct"]) and not r["gold_correct"] for r in mine)
    return all(changed > a or losses > g for a, g in allowed)
