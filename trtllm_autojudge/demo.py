"""`trtllm-autojudge demo`: lossless vs AutoJudge vs top-K on the embedded pair.

By default the program task (``gsm8k-program``: GSM8K answered by a commented Python program that
is executed) with its shipped tuned SmolLM2-135M target, draft and judge, on held-out instances
only (the task's :meth:`~trtllm_autojudge.tasks.Task.demo_problems`). Prints a short table, what
the numbers mean, and writes the frontier plot. ``--task gsm8k-cot`` runs the worded task.
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from .decoding.tree import DraftTree
from .evaluation.certificate import upper_bound
from .evaluation.common import certificate_lines, judge_certificate, judge_thresholds, load_judge, questions_from
from .evaluation.methods import OperatingPoint, judge_points
from .evaluation.plot import plot_frontier
from .evaluation.runner import ACCEPT_IMPLS, format_table, run_points, summarize, write_summary
from .judge.head import JudgeHead
from .models.dtype import dtype_name
from .models.loading import add_model_args, load_pair
from .tasks import add_task_args, task_from_args


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="trtllm-autojudge demo", description=__doc__)
    p.add_argument("--questions", type=int, default=8,
                   help="held-out questions (default 8: about 2 minutes on 2 cores with native bf16; docs/usage.md)")
    p.add_argument("--k", type=int, default=16,
                   help="draft tokens per cycle (default 16: the program draft agrees so often that K = 8 caps it; "
                        "the worded task's draft does best at 4)")
    p.add_argument("--thresholds", default=None,
                   help="AutoJudge thresholds, comma-separated (default: the judge's own, and the one whose "
                        "validation important-accept rate is at most 5%%)")
    p.add_argument("--judge", default=None, help="judge file (default: the task's shipped judge for the embedded pair)")
    p.add_argument("--max-new-tokens", type=int, default=320, help="token budget (programs need about 320; worded answers 160)")
    p.add_argument("--out-dir", default="out/demo")
    p.add_argument("--resume", action="store_true", help="keep earlier runs in OUT_DIR instead of starting fresh")
    p.add_argument("--accept-impl", choices=ACCEPT_IMPLS, default="python",
                   help="who decides AutoJudge's acceptance: the Python rule (default) or the compiled host core the "
                        "engines run ('core')")
    add_task_args(p, default="gsm8k-program")
    add_model_args(p)
    args = p.parse_args(argv)
    if args.questions < 1:
        raise SystemExit("--questions must be >= 1")
    task = task_from_args(args)
    out_dir = Path(args.out_dir)
    if out_dir.exists() and not args.resume:
        shutil.rmtree(out_dir)
    t0 = time.perf_counter()
    print("loading the pair (the first run converts SmolLM2-135M from its GGUF, ~20 s) ...", flush=True)
    target, draft, tokenizer = load_pair(args, task)
    judge = load_judge(args, target, draft, required=False, task=task)  # None when the task ships none
    if judge is None:
        print(f"no judge for task {task.name} (none shipped, no --judge): showing lossless and top-K only; "
              f"make one with `python build_scripts/make_judge.py --task {task.name}`", flush=True)
    problems, which = task.demo_problems(args.questions)
    questions = questions_from(problems, tokenizer, task)
    certificate, mismatches = judge_certificate(judge, target, draft, task, args.k, None, args.max_new_tokens)
    points = judge_points(demo_thresholds(args.thresholds, judge), None if judge is None else judge.meta.get("max_judged"))
    points += [OperatingPoint("topk", (2,)), OperatingPoint("topk", (4,))]
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    auc = judge.meta.get("metrics", {}).get("val_roc_auc", float("nan")) if judge else float("nan")
    print(f"{target.name} <- {draft.name} ({dtype_name(target.dtype)}); task {task.name}; judge validation ROC-AUC {auc:.3f}; K = {args.k}; "
          f"{len(questions)} {which}", flush=True)
    try:
        runs = run_points(target, draft, decode, questions, points, DraftTree.chain(args.k), task.checker, out_dir,
                          judge, max_new_tokens=args.max_new_tokens, accept_impl=args.accept_impl)
    except ValueError as e:
        raise SystemExit(f"demo: {e}") from None
    rows = summarize(runs, points, task.checker, [q.qid for q in questions])
    write_summary(rows, out_dir, {"task": task.name, "target": target.name, "draft": draft.name, "k": args.k,
                                  "questions": len(questions), "dtype": dtype_name(target.dtype)})
    png = plot_frontier(rows, out_dir / "frontier.png", f"demo ({task.name}): {len(questions)} held-out questions, K = {args.k}")
    print()
    print(format_table(rows))
    print()
    print(closing_lines(rows))
    if judge is not None:
        print(certificate_lines(certificate, mismatches))
        print(f"These {len(questions)} questions show the mechanism, not the guarantee: a share of answers changed on "
              f"{len(questions)} questions bounds nothing (none changed in {len(questions)} still allows "
              f"{upper_bound(0, len(questions)):.0%} at 95%). The certificate above is the guarantee; docs/results.md "
              "gives the certified operating point on 300+ fresh questions.")
    print(f"frontier plot: {png}   ({time.perf_counter() - t0:.0f} s)")
    return 0


def demo_thresholds(text: str | None, judge: JudgeHead | None) -> list[float]:
    """``--thresholds`` as given; by default the judge file's own threshold (set by `train` from its
    validation labels, or by `calibrate` from answers) and its validation frontier's 5% point."""
    if text or judge is None:
        return judge_thresholds(text or "", judge)
    return sorted({judge.threshold, *judge_thresholds("auto", judge, harm_caps=(0.05,))})


def closing_lines(rows: list[dict]) -> str:
    """What the table means, in words: each lossy method against lossless (the first row)."""
    lossless = rows[0]
    lines = [f"lossless = the target's own greedy answer: {lossless['tokens_per_cycle']:.2f} tokens per target forward "
             f"(accepted draft tokens + the target's own), gold accuracy {lossless['gold_accuracy']:.0%}."]
    for r in rows[1:]:
        name = f"AutoJudge @ {float(r['params']):.3g}" if r["method"] == "judge" else r["spec"]
        interval = (f" (95% interval over these questions: {r['vs_lossless_lo']:.2f}-{r['vs_lossless_hi']:.2f}x)"
                    if "vs_lossless_lo" in r else "")
        lines.append(f"{name}: {r['tokens_per_cycle'] / max(lossless['tokens_per_cycle'], 1e-9):.2f}x the tokens per "
                     f"target forward of lossless{interval}; final answers equal to lossless on {r['agreement']:.0%} of the questions, "
                     f"gold accuracy {r['gold_accuracy']:.0%}.")
    lines.append("AutoJudge keeps a mismatching draft token only where its judge predicts the final answer will not "
                 "change; top-K keeps any draft token among the target's K most likely, whatever it does to the answer. "
                 "Tokens per target forward is what a GPU turns into speed; on this CPU, where the draft's steps cost "
                 "time too, `trtllm-autojudge bench` measures the wall clock. What bounds any lossy rule is the "
                 "oracle (`trtllm-autojudge eval --mine-oracle`); its measured gain per task is in docs/results.md.")
    return "\n".join(lines)
