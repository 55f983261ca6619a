"""Run operating points over questions, resumably, and aggregate them against the lossless run.

Per (operating point, question) one JSON line in ``runs.jsonl``; a rerun skips what is there. The
lossless point always runs: its answers are the reference for answer AGREEMENT (the main quality
measure: the lossless output IS the target's greedy output). Gold accuracy is reported beside it.
Every row carries 95% Clopper-Pearson intervals on both shares, and the one-sided bounds of
:mod:`.certificate` on the answers changed and on the gold losses.

Judge points decide each cycle with the Python rule (``accept_impl="python"``) or with the compiled
host core that the engines run (``"core"``: ``torch.ops.autojudge.accept``); a record says which, and
one output folder holds one of them.

A judge run at one threshold also answers every threshold inside its threshold margin
(:mod:`..decoding.modes`): such a point copies the run instead of decoding again (``reused_from``
names the point it came from; its seconds are that run's). Only runs of the same judge (by
fingerprint) are reused, under the same per-response limit or one the run never reached; the core
keeps no margin, so its runs are never reused. With ``score_lossless`` (``calibrate``), the lossless
point runs the judge at threshold 0: it accepts nothing, so its tokens are lossless, and its margin
lets every judge point whose cut lies below the response's smallest judged logit copy it; a
candidate threshold then decodes only the questions where it would accept something. (Its seconds
include scoring the judge, so ``eval`` keeps plain lossless runs for its tokens/s.)

One output folder holds one setup, recorded in ``setup.json`` by its first run and fingerprinted
on every row of ``runs.jsonl`` (``setup``): the pair's weights, the dtype, the tree (K), the token
budget, the batch, the judge (its weights and rule: veto, minimum run, gate), its default
threshold and per-response limit (what the point ``judge`` runs at), and who decides its cycles. A run under another setup refuses to resume there, naming the
field that differs, and leaves the folder untouched.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from ..decoding.modes import JudgeRule
from ..decoding.dynamic_tree import DynamicTree
from ..decoding.speculative import speculative_generate
from ..decoding.tree import DraftTree
from ..judge.head import JudgeHead
from ..mining.store import append_record, read_records, repair_tail
from ..models.dtype import dtype_name
from ..models.packed_sessions import ForwardPool, PackedLM
from ..models.protocol import LanguageModel
from ..models.transformers_backend import TransformersLM
from ..tasks.protocol import TaskChecker
from .bootstrap import ratio_interval
from .certificate import interval, pair_fingerprint, upper_bound
from .methods import OperatingPoint

# Columns of summary.csv / keys of summary.json rows (a stable schema: tests pin it).
SUMMARY_COLUMNS = (
    "spec", "method", "params", "questions", "tokens_per_cycle", "accepted_per_cycle", "agreement",
    "gold_accuracy", "tokens_per_s", "judged_fraction", "new_tokens", "cycles",
    "vs_lossless", "vs_lossless_lo", "vs_lossless_hi",  # tokens per cycle / lossless's, its 95% paired bootstrap
    "agreement_lo", "agreement_hi", "gold_accuracy_lo", "gold_accuracy_hi",  # 95% Clopper-Pearson intervals
    "answers_changed", "answer_change_bound", "gold_losses", "gold_drop_bound",  # counts, one-sided 95% bounds
    "changed_without_acceptance",  # of answers_changed: responses whose rule accepted no mismatch (rounding)
)


def changed_without_acceptance(run: dict, lossless: dict, checker) -> bool:
    """Whether ``run`` changed lossless's answer though its rule accepted no mismatch. Its decoding
    then differs from lossless's only by rounding: batched bf16 runs pack other rows around a
    question and round a near-tie the other way now and then. Such a change still counts in
    ``answers_changed``: along lossless's own tokens the rule might have accepted a mismatch, which
    the drifted run never met. A lossless run scored with the judge (``score_lossless``) settles the
    question where the rule accepts nothing along it: the judge point reuses the lossless run there,
    and no drift is left to count (docs/judge.md, "Rounding")."""
    return run["judged_accepts"] == 0 and not checker.same(run["answer"], lossless["answer"])


ACCEPT_IMPLS = ("python", "core")


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
    tree: DraftTree | DynamicTree,
    checker: TaskChecker,
    out_dir: str | Path,
    judge: JudgeHead | None = None,
    unimportant=None,
    max_new_tokens: int = 256,
    progress: bool = True,
    stop: Callable[[list[dict]], bool] | None = None,
    accept_impl: str = "python",
    score_lossless: bool = False,
    batch: int = 1,
) -> list[dict]:
    """Run every point on every question; returns all run records.

    Question by question, lossless first: the points of one question run next to each other, so
    their seconds share the machine's state, and a cut run holds whole questions. ``stop(runs)``,
    asked after each question (run now or earlier), ends the run early when it returns True.
    ``accept_impl`` decides the judge points' cycles; ``score_lossless`` scores the judge along the
    lossless runs (module docstring). ``batch`` > 1 decodes that many questions at once, their
    forwards packed (:mod:`..models.packed_sessions`); their runs record it and report no tokens/s.
    """
    if batch < 1:
        raise ValueError(f"batch is a number of questions decoded at once: give 1 or more, got {batch}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    judge_id = None if judge is None else judge.fingerprint()
    weights_id = None if judge is None else judge.weights_fingerprint()
    setup = {"pair": pair_fingerprint(target, draft), "dtype": dtype_name(target.dtype), "tree": tree_record(tree),
             "max_new_tokens": max_new_tokens, "batch": batch, "judge_weights": weights_id,
             "judge_threshold": None if judge is None else judge.threshold,  # what the point "judge" runs at
             "max_judged": None if judge is None else judge.meta.get("max_judged"),
             "accept_impl": None if judge is None else accept_impl}
    runs_path = out_dir / "runs.jsonl"
    check_folder_setup(out_dir, setup)
    setup_id = setup_fingerprint(setup)
    repair_tail(runs_path)
    runs, _ = read_records(runs_path, required=("spec", "qid"))
    stray = next((i for i, r in enumerate(runs) if r.get("setup") != setup_id), None)
    if stray is not None:
        raise ValueError(f"{runs_path} line {stray + 1} was written under setup {runs[stray].get('setup')}, not this "
                         f"folder's {setup_id} (setup.json): give another output folder")
    done = {(r["spec"], r["qid"]) for r in runs}
    points = [OperatingPoint("lossless")] + [p for p in points if p.method != "lossless"]
    rules = {p.spec: p.rule(judge, unimportant) for p in points}
    scored = score_lossless and judge is not None and accept_impl == "python"
    if scored:  # threshold 0 accepts nothing: lossless tokens, with the judge's margin (module docstring)
        rules["lossless"] = JudgeRule(judge, 0.0)
    fused = {spec: fused_for(rule, accept_impl) for spec, rule in rules.items()}
    margins = MarginIndex(judge_id, runs, None if judge is None else judge.meta.get("max_judged"))
    todo = [(q, [p for p in points if (p.spec, q.qid) not in done]) for q in questions]
    bar = tqdm(total=sum(len(ps) for _, ps in todo), desc="eval", unit="run", disable=not progress, file=sys.stderr)
    lock = threading.Lock()  # runs, margins, runs.jsonl and the bar, shared by the decoding threads
    pool = ForwardPool() if batch > 1 else None
    decoder = (target, draft) if pool is None else (packed(target, pool, deferred=True), packed(draft, pool))

    def run_question(q: Question, ps: list[OperatingPoint]) -> None:
        for p in ps:
            with lock:
                rec = None if fused[p.spec] else margins.reuse(p, rules[p.spec], q.qid)
            if rec is None:
                t0 = time.perf_counter()
                res = speculative_generate(*decoder, q.prompt_ids, tree=tree, rule=rules[p.spec],
                                           max_new_tokens=max_new_tokens, fused=fused[p.spec])
                seconds = time.perf_counter() - t0
                with lock:  # a task's checker need not be thread-safe
                    answer = checker.answer(decode(res.tokens), q.example)
                rec = {"spec": p.spec, "qid": q.qid, "setup": setup_id, "tokens": res.tokens, "answer": answer,
                       "gold_correct": q.gold is not None and checker.same(answer, q.gold), "seconds": seconds,
                       **res.summary(), **({"judge": judge_id, "judge_weights": weights_id, "accept_impl": accept_impl}
                          if p.method == "judge" or (scored and p.method == "lossless") else {}),
                       **({"batch": batch} if pool is not None else {})}
            with lock:
                append_record(runs_path, rec)
                runs.append(rec)
                margins.add(rec)
                bar.update()

    def stopped() -> bool:
        with lock:
            return stop is not None and stop(runs)

    if pool is None:
        for q, ps in todo:
            run_question(q, ps)
            if stopped():
                break
    else:
        def member(q: Question, ps: list[OperatingPoint]) -> None:
            with pool.member():
                run_question(q, ps)

        with ThreadPoolExecutor(max_workers=batch) as ex:
            waiting, running = iter(todo), set()
            for q, ps in itertools.islice(waiting, batch):
                running.add(ex.submit(member, q, ps))
            while running:
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for f in finished:
                    f.result()  # a decoding thread's error ends the run here
                if stopped():  # the questions in flight finish (whole questions); no new one starts
                    waiting = iter(())
                for q, ps in itertools.islice(waiting, len(finished)):
                    running.add(ex.submit(member, q, ps))
    bar.close()
    return runs


def packed(model, pool: ForwardPool, deferred: bool = False):
    """``model``'s forwards through ``pool``: a TransformersLM as a PackedLM (the target ``deferred``:
    :mod:`..models.packed_sessions`); a drafter without a language model of its own (an EAGLE head) as
    it is."""
    return PackedLM(model, pool, deferred) if isinstance(model, TransformersLM) else model


def tree_parents(tree: DraftTree | DynamicTree) -> list[int] | None:
    """What a result records of a static tree (its parents); None for a dynamic tree (chosen per cycle)."""
    return list(tree.parents) if isinstance(tree, DraftTree) else None


def tree_record(tree: DraftTree | DynamicTree) -> dict:
    """A draft tree as a folder's setup records it: a static tree's parents, a dynamic tree's rule."""
    parents = tree_parents(tree)
    return {"parents": parents} if parents is not None else {"dynamic": asdict(tree)}


def setup_fingerprint(setup: dict) -> str:
    """16 hex digits of SHA-256 over a folder's setup (module docstring), as each of its rows carries it."""
    return hashlib.sha256(json.dumps(setup, sort_keys=True).encode()).hexdigest()[:16]


def check_folder_setup(out_dir: Path, setup: dict) -> None:
    """One output folder holds the runs of one setup (module docstring), recorded in ``setup.json``
    by its first run: a rerun with another refuses, naming each field that differs, since it would
    resume from runs that are not its own."""
    path = out_dir / "setup.json"
    if not path.is_file():
        path.write_text(json.dumps(setup, indent=1))
        return
    recorded = json.loads(path.read_text())
    differs = [f"{k} {recorded.get(k)} (now {v})" for k, v in setup.items() if recorded.get(k) != v]
    if differs:
        raise ValueError(f"{out_dir} holds runs of another setup: " + "; ".join(differs)
                         + ". Give another output folder")


def fused_for(rule, accept_impl: str) -> bool:
    """``speculative_generate``'s ``fused`` for one point's rule: the core decides judge rules only."""
    if accept_impl not in ACCEPT_IMPLS:
        raise ValueError(f"accept_impl must be one of {ACCEPT_IMPLS}, got {accept_impl!r}")
    if accept_impl == "python" or not isinstance(rule, JudgeRule):
        return False
    if not rule.fusable:
        raise ValueError(f"the compiled core does not implement this judge's operating point (setup {rule.head.setup}, "
                         f"token veto {bool(rule.head.meta.get('veto'))}, target-confidence gate "
                         f"{rule.min_target_prob:g}, per-response limit {rule.max_judged}): "
                         f"use --accept-impl python")
    return True


def _same_under_limits(run: dict, run_limit: int | None, limit: int | None) -> bool:
    """Whether a run made under the per-response limit ``run_limit`` decodes as it did under ``limit``
    (None: no limit). The same limit, or a run whose judged acceptances stayed below both: a limit
    that is never reached only cuts paths the walk does not choose (its best path keeps every judged
    node, and a cut path only gets shorter), so it changes nothing."""
    below = lambda m: m is None or run["judged_accepts"] < m  # noqa: E731
    return run_limit == limit or (below(run_limit) and below(limit))


class MarginIndex:
    """The judge runs of one judge, by question, with their threshold margins: which run answers
    a judge point without decoding again (module docstring)."""

    def __init__(self, judge_id: str | None, runs: list[dict], default_limit: int | None = None):
        # default_limit: the judge file's own per-response limit, that of its default point "judge"
        self.judge_id, self.default_limit, self.by_question = judge_id, default_limit, {}
        for r in runs:
            self.add(r)

    def add(self, run: dict) -> None:
        if self.judge_id is not None and run.get("judge") == self.judge_id and run.get("judge_margin") is not None:
            self.by_question.setdefault(run["qid"], []).append(run)

    def _limit(self, spec: str) -> int | None:
        """The per-response limit a run of ``spec`` decoded under: the judge file's own for its default point."""
        point = OperatingPoint.parse(spec)
        return self.default_limit if point.method == "judge" and not point.params else point.max_judged

    def reuse(self, point: OperatingPoint, rule, qid: str) -> dict | None:
        """A copy of a run that decodes ``point`` (its ``rule``) on question ``qid`` token for token, or None."""
        if point.method != "judge" or not isinstance(rule, JudgeRule):
            return None
        cut, limit = rule.cut, rule.max_judged
        for run in self.by_question.get(qid, ()):
            lo, hi = (-math.inf if run["judge_margin"][0] is None else run["judge_margin"][0],
                      math.inf if run["judge_margin"][1] is None else run["judge_margin"][1])
            if _same_under_limits(run, self._limit(run["spec"]), limit) and lo < cut <= hi:
                return {**run, "spec": point.spec, "reused_from": run.get("reused_from", run["spec"])}
        return None


def summarize(runs: list[dict], points: list[OperatingPoint], checker: TaskChecker, qids: list[str]) -> list[dict]:
    """One row per operating point (SUMMARY_COLUMNS), over the questions in ``qids``."""
    by = {(r["spec"], r["qid"]): r for r in runs}
    reference = {q: by[("lossless", q)] for q in qids if ("lossless", q) in by}
    rows = []
    for p in [OperatingPoint("lossless")] + [p for p in points if p.method != "lossless"]:
        rs = [by[(p.spec, q)] for q in qids if (p.spec, q) in by]
        if not rs:
            continue
        cycles = sum(r["cycles"] for r in rs)
        accepted = sum(r["accepted_per_cycle"] * r["cycles"] for r in rs)
        paired = [(r, reference[r["qid"]]) for r in rs if r["qid"] in reference]  # unpaired runs: not kept
        kept = sum(checker.same(r["answer"], ref["answer"]) for r, ref in paired)
        drift = 0 if p.method == "lossless" else sum(changed_without_acceptance(r, ref, checker) for r, ref in paired)
        gold = sum(bool(r["gold_correct"]) for r in rs)
        losses = sum(bool(ref["gold_correct"]) and not r["gold_correct"] for r, ref in paired)
        rows.append({
            "spec": p.spec,
            "method": p.method,
            "params": ",".join(f"{x:g}" for x in p.params),
            "questions": len(rs),
            "tokens_per_cycle": (accepted + cycles) / max(cycles, 1),  # correction/bonus token counted
            "accepted_per_cycle": accepted / max(cycles, 1),  # draft tokens only
            "agreement": kept / len(rs),
            "gold_accuracy": gold / len(rs),
            "tokens_per_s": float("nan") if any(r.get("batch", 1) > 1 for r in rs)  # shared seconds: no rate
                            else sum(r["new_tokens"] for r in rs) / max(sum(r["seconds"] for r in rs), 1e-9),
            "judged_fraction": sum(r["judged_accepts"] for r in rs) / max(accepted, 1),
            "new_tokens": sum(r["new_tokens"] for r in rs),
            "cycles": cycles,
            **_vs_lossless(by, p.spec, [q for q in qids if (p.spec, q) in by and q in reference]),
            **_shares(kept, gold, losses, len(rs)),
            "changed_without_acceptance": drift,
        })
    return rows


def _shares(kept: int, gold: int, losses: int, n: int) -> dict:
    """The answer and gold columns' intervals and bounds (:mod:`.certificate`), from counts over ``n`` questions."""
    (a_lo, a_hi), (g_lo, g_hi) = interval(kept, n), interval(gold, n)
    return {"agreement_lo": a_lo, "agreement_hi": a_hi, "gold_accuracy_lo": g_lo, "gold_accuracy_hi": g_hi,
            "answers_changed": n - kept, "answer_change_bound": upper_bound(n - kept, n),
            "gold_losses": losses, "gold_drop_bound": upper_bound(losses, n)}


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
    """The summary rows as a table: shares with their 95% intervals, and the answers changed with
    their one-sided 95% bound (the certificate's number)."""
    head = (f"{'operating point':<20}{'tok/cycle':>10}{'vs lossless [95%]':>23}{'answers kept [95%]':>24}"
            f"{'changed':>9}{'bound':>7}{'gold [95%]':>24}{'tok/s':>7}{'judged':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = f"{r['vs_lossless']:.3f}x [{r['vs_lossless_lo']:.3f}, {r['vs_lossless_hi']:.3f}]"
        kept = f"{r['agreement']:.1%} [{r['agreement_lo']:.1%}, {r['agreement_hi']:.1%}]"
        gold = f"{r['gold_accuracy']:.1%} [{r['gold_accuracy_lo']:.1%}, {r['gold_accuracy_hi']:.1%}]"
        lines.append(f"{r['spec']:<20}{r['tokens_per_cycle']:>10.2f}{ratio:>23}{kept:>24}"
                     f"{r['answers_changed']:>5}/{r['questions']:<3}{r['answer_change_bound']:>7.1%}{gold:>24}"
                     f"{r['tokens_per_s']:>7.1f}{r['judged_fraction']:>8.1%}")
    drifted = {r["spec"]: r["changed_without_acceptance"] for r in rows if r.get("changed_without_acceptance")}
    if drifted:
        lines.append("of the answers changed, in responses with no judged acceptance (rounding; counted): "
                     + ", ".join(f"{spec} {n}" for spec, n in drifted.items()))
    return "\n".join(lines)
