"""Run operating points over questions, resumably, and aggregate them against the lossless run.

Per (operating point, question) one JSON line in ``runs.jsonl``; a rerun skips what is there. The
lossless point always runs: its answers are the reference for answer AGREEMENT (the main quality
measure: the lossless output IS the target's greedy output). Gold accuracy is reported beside it.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..backends.protocol import LanguageModel
from ..decoding.speculative import speculative_generate
from ..decoding.tree import DraftTree
from ..judge.head import JudgeHead
from ..mining.checkers import TaskChecker
from ..mining.store import append_record, read_records, repair_tail
from .bootstrap import ratio_interval
from .methods import OperatingPoint

# Columns of summary.csv / keys of summary.json rows (a stable schema: tests pin it).
SUMMARY_COLUMNS = (
    "spec", "method", "params", "questions", "tokens_per_cycle", "accepted_per_cycle", "agreement",
    "gold_accuracy", "tokens_per_s", "judged_fraction", "new_tokens", "cycles",
    "vs_lossless", "vs_lossless_lo", "vs_lossless_hi",  # tokens per cycle / lossless's, its 95% paired bootstrap
)


@dataclass
class Question:
    qid: str
    prompt_ids: list[int]
    gold: str | None
    example: dict | None = None


def run_points(
    target: LanguageModel,
    draft: LanguageModel,
    decode,
    questions: list[Question],
    points: list[OperatingPoint],
    tree: DraftTree,
    checker: TaskChecker,
    out_dir: str | Path,
    judge: JudgeHead | None = None,
    unimportant=None,
    max_new_tokens: int = 256,
    progress: bool = True,
) -> list[dict]:
    """Run every point on every question; returns all run records.

    Question by question, lossless first: the points of one question run next to each other, so
    their seconds share the machine's state, and a cut run holds whole questions.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs_path = out_dir / "runs.jsonl"
    repair_tail(runs_path)
    runs, _ = read_records(runs_path, required=("spec", "qid"))
    done = {(r["spec"], r["qid"]) for r in runs}
    points = [OperatingPoint("lossless")] + [p for p in points if p.method != "lossless"]
    rules = {p.spec: p.rule(judge, unimportant) for p in points}
    todo = [(p, q) for q in questions for p in points if (p.spec, q.qid) not in done]
    for p, q in tqdm(todo, desc="eval", unit="run", disable=not progress, file=sys.stderr):
        t0 = time.perf_counter()
        res = speculative_generate(target, draft, q.prompt_ids, tree=tree, rule=rules[p.spec],
                                   max_new_tokens=max_new_tokens)
        seconds = time.perf_counter() - t0
        text = decode(res.tokens)
        answer = checker.answer(text, q.example)
        rec = {"spec": p.spec, "qid": q.qid, "tokens": res.tokens, "answer": answer,
               "gold_correct": q.gold is not None and checker.same(answer, q.gold), "seconds": seconds,
               **res.summary()}
        append_record(runs_path, rec)
        runs.append(rec)
    return runs


def summarize(runs: list[dict], points: list[OperatingPoint], checker: TaskChecker, qids: list[str]) -> list[dict]:
    """One row per operating point (SUMMARY_COLUMNS), over the questions in ``qids``."""
    by = {(r["spec"], r["qid"]): r for r in runs}
    reference = {q: by[("lossless", q)]["answer"] for q in qids if ("lossless", q) in by}
    rows = []
    for p in [OperatingPoint("lossless")] + [p for p in points if p.method != "lossless"]:
        rs = [by[(p.spec, q)] for q in qids if (p.spec, q) in by]
        if not rs:
            continue
        cycles = sum(r["cycles"] for r in rs)
        accepted = sum(r["accepted_per_cycle"] * r["cycles"] for r in rs)
        rows.append({
            "spec": p.spec,
            "method": p.method,
            "params": ",".join(f"{x:g}" for x in p.params),
            "questions": len(rs),
            "tokens_per_cycle": (accepted + cycles) / max(cycles, 1),  # correction/bonus token counted
            "accepted_per_cycle": accepted / max(cycles, 1),  # draft tokens only
            "agreement": sum(checker.same(r["answer"], reference.get(r["qid"])) for r in rs) / len(rs),
            "gold_accuracy": sum(bool(r["gold_correct"]) for r in rs) / len(rs),
            "tokens_per_s": sum(r["new_tokens"] for r in rs) / max(sum(r["seconds"] for r in rs), 1e-9),
            "judged_fraction": sum(r["judged_accepts"] for r in rs) / max(accepted, 1),
            "new_tokens": sum(r["new_tokens"] for r in rs),
            "cycles": cycles,
            **_vs_lossless(by, p.spec, [q for q in qids if (p.spec, q) in by and q in reference]),
        })
    return rows


def _vs_lossless(by: dict, spec: str, paired: list[str]) -> dict:
    """Tokens per cycle against lossless on the questions both ran, with its paired bootstrap interval."""
    if not paired:
        return {"vs_lossless": float("nan"), "vs_lossless_lo": float("nan"), "vs_lossless_hi": float("nan")}
    mine, ref = [by[(spec, q)] for q in paired], [by[("lossless", q)] for q in paired]
    t, rt = [_tokens(r) for r in mine], [_tokens(r) for r in ref]  # [Q] each
    c, rc = [r["cycles"] for r in mine], [r["cycles"] for r in ref]  # [Q] each
    lo, hi = ratio_interval(t, c, rt, rc)
    return {"vs_lossless": (sum(t) / sum(c)) / (sum(rt) / sum(rc)), "vs_lossless_lo": lo, "vs_lossless_hi": hi}


def _tokens(run: dict) -> float:
    """Tokens a run emitted as tokens_per_cycle counts them: accepted draft tokens + one per cycle."""
    return run["accepted_per_cycle"] * run["cycles"] + run["cycles"]


def write_summary(rows: list[dict], out_dir: str | Path, meta: dict) -> dict[str, Path]:
    out_dir = Path(out_dir)
    paths = {"json": out_dir / "summary.json", "csv": out_dir / "summary.csv"}
    paths["json"].write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    with open(paths["csv"], "w") as f:
        f.write(",".join(SUMMARY_COLUMNS) + "\n")
        for r in rows:
            f.write(",".join(f"{r[c]:.4f}" if isinstance(r[c], float) else f'"{r[c]}"' if c == "params" else str(r[c])
                             for c in SUMMARY_COLUMNS) + "\n")
    return paths


def format_table(rows: list[dict]) -> str:
    head = (f"{'operating point':<18}{'tok/cycle':>10}{'vs lossless [95%]':>22}{'agree':>8}{'gold':>7}{'tok/s':>8}"
            f"{'judged':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = f"{r['vs_lossless']:.3f}x [{r['vs_lossless_lo']:.3f}, {r['vs_lossless_hi']:.3f}]"
        lines.append(f"{r['spec']:<18}{r['tokens_per_cycle']:>10.2f}{ratio:>22}{r['agreement']:>8.1%}"
                     f"{r['gold_accuracy']:>7.1%}{r['tokens_per_s']:>8.1f}{r['judged_fraction']:>8.1%}")
    return "\n".join(lines)
