"""Wall clock on one machine, in one run, interleaved: target-only greedy, lossless speculative
decoding, and AutoJudge with one judge or several (``--compare-judge``: DT beside DD-DT, say);
optionally a second drafter's lossless and AutoJudge modes (an EAGLE head, ``--eagle``) and
transformers' assisted generation with the draft model (``--assisted``). Each mode is a
:class:`BenchMode`: a name, how it answers a question, and the modes its speed is divided by.
Each repeat runs every question in every mode, in an order shuffled afresh for each question
(:func:`mode_order`, seeded by the run's index, so a bench is reproducible): each mode runs early and
late and after each other mode, so neither drift in the machine's speed nor the state a previous
mode leaves (a fixed order, even rotated, keeps each mode right behind the same one) favours one
mode. Medians over repeats are reported.

Beside wall clock, each mode's process CPU time is summed: on a shared machine, a process that waits
for a core loses wall time but not CPU time, so with one thread (``--threads 1``) tokens per
CPU-second are the steadier comparison. (With more threads CPU time also counts threads that spin.)
Before the modes run, :func:`..kernels.roofline.measure_roofline` times one target step against
its memory-bandwidth bound. On a chain drafted by a model, a :class:`.speed_model.StepCostSampler`
times the question's prefill, a draft step, a target step and a verify of K + 1 tokens after each
question, so the speed model (``speed-model``) is checked against tokens/s measured in the same
minutes.

Each tokens/s ratio carries a paired bootstrap 95% interval over the questions (:mod:`.bootstrap`:
each question's tokens and seconds, summed over the repeats, resampled together for both modes):
a ratio measured on a dozen questions can move by a tenth on another dozen.
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from ..decoding.dynamic_tree import DynamicTree
from ..decoding.modes import JudgeRule
from ..decoding.speculative import greedy_generate, speculative_generate
from ..decoding.tree import DraftTree
from ..kernels.roofline import measure_roofline
from .bootstrap import ratio_interval
from .runner import Question, fused_for
from .speed_model import PREFIX_TOKENS, StepCostSampler

PHASES = ("t_draft", "t_verify", "t_accept", "t_rule")


@dataclass(frozen=True)
class BenchMode:
    """One way of answering a question: ``generate(question) -> (tokens emitted, summary)`` (the
    summary's ``cycles`` are target forwards, absent where they are not observable; its phase
    times where measured), the modes its tokens/s is divided by (``versus``), and the judge rule
    it runs, if any."""

    name: str
    generate: Callable[[Question], tuple[int, dict]]
    versus: tuple[str, ...] = ()
    rule: JudgeRule | None = None


def target_only_mode(target, max_new_tokens: int) -> BenchMode:
    def generate(q: Question) -> tuple[int, dict]:
        n = len(greedy_generate(target, q.prompt_ids, max_new_tokens))
        return n, {"cycles": n}

    return BenchMode("target-only", generate)


def speculative_modes(target, draft, tree: DraftTree | DynamicTree, rules: list[JudgeRule], max_new_tokens: int,
                      accept_impl: str = "python", prefix: str = "") -> list[BenchMode]:
    """``{prefix}lossless`` and one AutoJudge mode per rule (``{prefix}autojudge``, ``-2``, ...) with
    ``draft`` (a draft model or any :class:`..decoding.drafter.Drafter`) over ``tree``; lossless is
    compared with target-only (and, for a second drafter, with the first one's lossless), each
    AutoJudge mode with target-only and its drafter's lossless."""
    def mode(name: str, rule: JudgeRule | None, versus: tuple[str, ...]) -> BenchMode:
        fused = rule is not None and fused_for(rule, accept_impl)

        def generate(q: Question) -> tuple[int, dict]:
            out = speculative_generate(target, draft, q.prompt_ids, tree=tree, rule=rule, max_new_tokens=max_new_tokens,
                                       fused=fused)
            return len(out.tokens), out.summary()

        return BenchMode(name, generate, versus, rule)

    lossless = f"{prefix}lossless"
    modes = [mode(lossless, None, ("target-only",) + (("lossless",) if prefix else ()))]
    modes += [mode(name, rule, ("target-only", lossless)) for name, rule in zip(judge_mode_names(len(rules), prefix), rules)]
    return modes


def assisted_mode(target, draft, max_new_tokens: int) -> BenchMode:
    """transformers' assisted generation (``generate(assistant_model=draft)``, greedy, its own draft
    length heuristic) with the draft model: the library baseline, compared with target-only and
    lossless. Its target forwards are not observable."""
    def generate(q: Question) -> tuple[int, dict]:
        with torch.inference_mode():
            ids = torch.tensor([q.prompt_ids], device=target.device)
            out = target.model.generate(ids, attention_mask=torch.ones_like(ids), assistant_model=draft.model,
                                        do_sample=False, max_new_tokens=max_new_tokens,
                                        eos_token_id=list(target.eos_token_ids), pad_token_id=target.eos_token_ids[0])
        new = out[0, len(q.prompt_ids):].tolist()
        stops = [i for i, t in enumerate(new) if t in target.eos_token_ids]
        return (stops[0] + 1 if stops else len(new)), {}

    return BenchMode("assisted", generate, ("target-only", "lossless"))


def judge_mode_names(count: int, prefix: str = "") -> list[str]:
    """Mode names of the judges, in order: ``autojudge`` for the first, ``autojudge-2``, ... after it."""
    return [f"{prefix}autojudge" if i == 0 else f"{prefix}autojudge-{i + 1}" for i in range(count)]


def mode_order(modes: list[BenchMode], run: int) -> list[BenchMode]:
    """The modes in the order of the ``run``-th question run (over the repeats, counted from 0): a
    permutation drawn with seed ``run``."""
    return [modes[i] for i in np.random.default_rng(run).permutation(len(modes))]


def run_bench(target, questions: list[Question], modes: list[BenchMode], repeats: int,
              step_costs: StepCostSampler | None = None) -> dict:
    """Every mode on every question, ``repeats`` times; the modes are target-only, lossless and at
    least one AutoJudge mode (:func:`target_only_mode`, :func:`speculative_modes`), then any others.
    ``step_costs`` samples the speed model's step costs after each question run."""
    names = [m.name for m in modes]
    if names[:2] != ["target-only", "lossless"] or "autojudge" not in names:
        raise ValueError("bench needs the target-only and lossless modes and at least one judge rule (autojudge)")
    roofline = measure_roofline(target, questions[0].prompt_ids)
    per_mode = {m.name: [] for m in modes}  # one dict per repeat: tokens, seconds, phase times
    per_question = {m.name: [[0, 0.0] for _ in questions] for m in modes}  # [Q] of (tokens, seconds), over the repeats
    bar = tqdm(total=repeats * len(questions) * len(modes), desc="bench", unit="run", file=sys.stderr)
    for r in range(repeats):
        acc = {m.name: {"tokens": 0, "seconds": 0.0, "cpu_seconds": 0.0, "cycles": 0, **dict.fromkeys(PHASES, 0.0)}
               for m in modes}
        for i, q in enumerate(questions):
            for m in mode_order(modes, r * len(questions) + i):
                t0, c0 = time.perf_counter(), time.process_time()
                n, summary = m.generate(q)
                seconds = time.perf_counter() - t0
                a = acc[m.name]
                a["seconds"] += seconds
                a["cpu_seconds"] += time.process_time() - c0
                a["tokens"] += n
                per_question[m.name][i][0] += n
                per_question[m.name][i][1] += seconds
                for k in (*PHASES, "cycles"):
                    a[k] += summary.get(k, 0.0)
                bar.update()
            if step_costs is not None:
                step_costs.sample(q.prompt_ids)
        for name in names:
            per_mode[name].append(acc[name])
    bar.close()
    med = {name: {"tokens_per_s": statistics.median(a["tokens"] / a["seconds"] for a in runs),
                  "tokens_per_question": statistics.median(a["tokens"] / len(questions) for a in runs),
                  "tokens_per_cpu_s": statistics.median(a["tokens"] / a["cpu_seconds"] for a in runs),
                  "tokens_per_forward": (statistics.median(a["tokens"] / a["cycles"] for a in runs)
                                         if all(a["cycles"] for a in runs) else None),
                  **{k: statistics.median(a[k] for a in runs) for k in PHASES}}
           for name, runs in per_mode.items()}
    pairs = [(m.name, b) for m in modes for b in m.versus]
    ratios, cpu_ratios = ({f"{a} / {b}": med[a][key] / med[b][key] for a, b in pairs}
                          for key in ("tokens_per_s", "tokens_per_cpu_s"))
    intervals = {f"{a} / {b}": ratio_interval(*zip(*per_question[a]), *zip(*per_question[b])) for a, b in pairs}
    judged = {m.name: m.rule for m in modes if m.rule is not None}
    judge_overhead = {name: med[name]["t_rule"] / max(med[name]["t_verify"], 1e-9) for name in judged}
    lines = [roofline.table(), "",
             f"{'mode':<18}{'tok/s':>8}{'tok/cpu-s':>10}{'tok/fwd':>9}{'draft s':>9}{'verify s':>10}{'accept s':>10}"
             f"{'judge s':>9}"]
    for name in names:
        d = med[name]
        per_forward = "-" if d["tokens_per_forward"] is None else f"{d['tokens_per_forward']:.2f}"
        lines.append(f"{name:<18}{d['tokens_per_s']:>8.2f}{d['tokens_per_cpu_s']:>10.2f}{per_forward:>9}"
                     f"{d['t_draft']:>9.2f}{d['t_verify']:>10.2f}{d['t_accept']:>10.2f}{d['t_rule']:>9.3f}")
    lines += ["", f"{'ratio':<36}{'wall':>7}{'[95% over questions]':>22}{'cpu':>7}"]
    lines += [f"{k:<36}{v:>6.2f}x{f'[{intervals[k][0]:.2f}, {intervals[k][1]:.2f}]':>22}{cpu_ratios[k]:>6.2f}x"
              for k, v in ratios.items()]
    lines += [f"{'judge / verify time, ' + name:<36}{v:>6.1%}" for name, v in judge_overhead.items()]
    lines += [f"{name}: {rule.head.setup} judge, threshold {rule.threshold:g}" for name, rule in judged.items()]
    lines.append(f"(medians over {repeats} repeats of {len(questions)} questions)")
    return {"target_only_tokens_per_s": med["target-only"]["tokens_per_s"],
            "lossless_tokens_per_s": med["lossless"]["tokens_per_s"],
            "autojudge_tokens_per_s": med["autojudge"]["tokens_per_s"],
            "bound_ms_per_step": roofline.bound_s * 1e3, "step_ms": roofline.step_s * 1e3,
            "step_over_bound": roofline.step_over_bound, "step_cpu_ms": roofline.step_cpu_s * 1e3, "roofline": roofline.as_dict(),
            "medians": med, "ratios": ratios, "ratio_intervals": intervals, "cpu_time_ratios": cpu_ratios,
            "judge_over_verify": judge_overhead["autojudge"], "judge_over_verify_by_mode": judge_overhead,
            "judges": {name: {"setup": rule.head.setup, "threshold": rule.threshold} for name, rule in judged.items()},
            "step_costs": None if step_costs is None else {
                **step_costs.costs().as_dict(), "source": f"measured between this bench's questions, after {PREFIX_TOKENS} tokens"},
            "modes": names, "repeats": repeats, "questions": len(questions), "threshold": judged["autojudge"].threshold,
            "table": "\n".join(lines)}
