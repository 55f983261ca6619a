"""Wall clock on one machine, in one run, interleaved: target-only greedy, lossless speculative
decoding, and AutoJudge with one judge or several (``--compare-judge``: DT beside DD-DT, say).
Each repeat runs every question in every mode, rotating the order of the modes, so drift in the
machine's speed hits all modes alike; medians over repeats are reported.

Beside wall clock, each mode's process CPU time is summed: on a shared machine, a process that waits
for a core loses wall time but not CPU time, so with one thread (``--threads 1``) tokens per
CPU-second are the steadier comparison. (With more threads CPU time also counts threads that spin.)
Before the modes run, :func:`..kernels.roofline.measure_roofline` times one target step against
its memory-bandwidth bound.

Each tokens/s ratio carries a paired bootstrap 95% interval over the questions (:mod:`.bootstrap`:
each question's tokens and seconds, summed over the repeats, resampled together for both modes):
a ratio measured on a dozen questions can move by a tenth on another dozen.
"""
from __future__ import annotations

import statistics
import sys
import time

from tqdm import tqdm

from ..decoding.modes import JudgeRule
from ..decoding.speculative import greedy_generate, speculative_generate
from ..decoding.tree import DraftTree
from ..kernels.roofline import measure_roofline
from .bootstrap import ratio_interval
from .runner import fused_for

BASE_MODES = ("target-only", "lossless")


def judge_mode_names(count: int) -> list[str]:
    """Mode names of the judges, in order: ``autojudge`` for the first, ``autojudge-2``, ... after it."""
    return ["autojudge" if i == 0 else f"autojudge-{i + 1}" for i in range(count)]


def run_bench(target, draft, questions, tree: DraftTree, rules: list[JudgeRule], repeats: int,
              max_new_tokens: int, accept_impl: str = "python") -> dict:
    """Every mode on every question, ``repeats`` times; one AutoJudge mode per rule (at least one),
    decided by ``accept_impl`` (:data:`.runner.ACCEPT_IMPLS`)."""
    if not rules:
        raise ValueError("bench needs at least one judge rule")
    fused = [fused_for(rule, accept_impl) for rule in rules]
    judged = dict(zip(judge_mode_names(len(rules)), rules))
    fused = dict(zip(judged, fused))
    modes = (*BASE_MODES, *judged)
    roofline = measure_roofline(target, questions[0].prompt_ids)
    per_mode = {m: [] for m in modes}  # one dict per repeat: tokens, seconds, phase times
    per_question = {m: [[0, 0.0] for _ in questions] for m in modes}  # [Q] of (tokens, seconds), over the repeats
    total = repeats * len(questions) * len(modes)
    bar = tqdm(total=total, desc="bench", unit="run", file=sys.stderr)
    for r in range(repeats):
        acc = {m: {"tokens": 0, "seconds": 0.0, "cpu_seconds": 0.0, "t_draft": 0.0, "t_verify": 0.0, "t_accept": 0.0,
                   "t_rule": 0.0, "cycles": 0} for m in modes}
        for i, q in enumerate(questions):
            for m in modes[r % len(modes):] + modes[: r % len(modes)]:
                t0, c0 = time.perf_counter(), time.process_time()
                if m == "target-only":
                    n = len(greedy_generate(target, q.prompt_ids, max_new_tokens))
                    summary = {"cycles": n}
                else:
                    out = speculative_generate(target, draft, q.prompt_ids, tree=tree, rule=judged.get(m),
                                               max_new_tokens=max_new_tokens, fused=fused.get(m, False))
                    n, summary = len(out.tokens), out.summary()
                seconds = time.perf_counter() - t0
                acc[m]["seconds"] += seconds
                acc[m]["cpu_seconds"] += time.process_time() - c0
                acc[m]["tokens"] += n
                per_question[m][i][0] += n
                per_question[m][i][1] += seconds
                for k in ("t_draft", "t_verify", "t_accept", "t_rule", "cycles"):
                    acc[m][k] += summary.get(k, 0.0)
                bar.update()
        for m in modes:
            per_mode[m].append(acc[m])
    bar.close()
    med = {m: {"tokens_per_s": statistics.median(a["tokens"] / a["seconds"] for a in per_mode[m]),
               "tokens_per_cpu_s": statistics.median(a["tokens"] / a["cpu_seconds"] for a in per_mode[m]),
               "tokens_per_forward": statistics.median(a["tokens"] / max(a["cycles"], 1) for a in per_mode[m]),
               **{k: statistics.median(a[k] for a in per_mode[m]) for k in ("t_draft", "t_verify", "t_accept", "t_rule")}}
           for m in modes}
    pairs = [("lossless", "target-only")] + [(j, b) for j in judged for b in ("target-only", "lossless")]
    ratios, cpu_ratios = ({f"{a} / {b}": med[a][key] / med[b][key] for a, b in pairs}
                          for key in ("tokens_per_s", "tokens_per_cpu_s"))
    intervals = {f"{a} / {b}": ratio_interval(*zip(*per_question[a]), *zip(*per_question[b])) for a, b in pairs}
    judge_overhead = {m: med[m]["t_rule"] / max(med[m]["t_verify"], 1e-9) for m in judged}
    lines = [roofline.table(), "",
             f"{'mode':<13}{'tok/s':>8}{'tok/cpu-s':>10}{'tok/fwd':>9}{'draft s':>9}{'verify s':>10}{'accept s':>10}"
             f"{'judge s':>9}"]
    for m in modes:
        d = med[m]
        lines.append(f"{m:<13}{d['tokens_per_s']:>8.2f}{d['tokens_per_cpu_s']:>10.2f}{d['tokens_per_forward']:>9.2f}"
                     f"{d['t_draft']:>9.2f}{d['t_verify']:>10.2f}{d['t_accept']:>10.2f}{d['t_rule']:>9.3f}")
    lines += ["", f"{'ratio':<26}{'wall':>7}{'[95% over questions]':>22}{'cpu':>7}"]
    lines += [f"{k:<26}{v:>6.2f}x{f'[{intervals[k][0]:.2f}, {intervals[k][1]:.2f}]':>22}{cpu_ratios[k]:>6.2f}x"
              for k, v in ratios.items()]
    lines += [f"{'judge / verify time, ' + m:<26}{v:>6.1%}" for m, v in judge_overhead.items()]
    lines += [f"{m}: {rule.head.setup} judge, threshold {rule.threshold:g}" for m, rule in judged.items()]
    lines.append(f"(medians over {repeats} repeats of {len(questions)} questions, tree of {tree.num_nodes} nodes)")
    return {"target_only_tokens_per_s": med["target-only"]["tokens_per_s"],
            "lossless_tokens_per_s": med["lossless"]["tokens_per_s"],
            "autojudge_tokens_per_s": med["autojudge"]["tokens_per_s"],
            "bound_ms_per_step": roofline.bound_s * 1e3, "step_ms": roofline.step_s * 1e3,
            "step_over_bound": roofline.step_over_bound, "step_cpu_ms": roofline.step_cpu_s * 1e3, "roofline": roofline.as_dict(),
            "medians": med, "ratios": ratios, "ratio_intervals": intervals, "cpu_time_ratios": cpu_ratios,
            "judge_over_verify": judge_overhead["autojudge"], "judge_over_verify_by_mode": judge_overhead,
            "judges": {m: {"setup": rule.head.setup, "threshold": rule.threshold} for m, rule in judged.items()},
            "repeats": repeats, "questions": len(questions), "threshold": judged["autojudge"].threshold,
            "table": "\n".join(lines)}
