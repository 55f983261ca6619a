#!/usr/bin/env python3
"""What does a perfect judge gain under a minimum run? The live oracle (evaluation/live_oracle.py)
against lossless decoding, question by question, on the task's pair. Backs notebook/certification.md,
"The live oracle: what a perfect judge gains under each minimum run", and notebook/eagle-head.md,
"What bounds the 1.3x goal: the oracle, measured live".

    python experiments/live_oracle.py --task gsm8k-program --questions out/ceil5.jsonl --limit 60 \\
        --min-runs 4,8 --k 16 --max-new-tokens 320 --threads 2 --out out/live_oracle.jsonl \\
        --json docs/results/live_oracle_program.json --compare out/ceil5_mr4:judge@1 --compare out/ceil5_mr8:judge@1

Per question: lossless decoding (its answer is the reference), then for each minimum run the
oracle's decoding, which asks one continuation of the target per judgeable mismatch the walk reaches
(greedy, lossless speculative decoding with the same pair and chain, to the same token budget). Each
question's records are appended to ``--out`` as it finishes, so a stopped run goes on where it
stopped. The summary, printed and written to ``--json``: per minimum run, tokens per target forward
against lossless with a paired bootstrap interval over questions, the answers changed (bf16 near-ties
in the continuations can still change one) with their 95% interval, and the continuations asked.
Continuations are the oracle's cost, not decoding's: they are not counted as forwards. With an
EAGLE head (``--draft eagle``, chains of its trained depth by default) the continuations run on the
embedded pair (the same target, the 8-layer draft at K = 16: three times the head's tokens per
forward), which gives the same greedy tokens up to bf16 near-ties. Each
``--compare FOLDER:SPEC`` (an ``eval`` output folder and one of its operating points) adds that
point's ratio and answers changed against its own folder's lossless runs, on the same questions.
With ``--judge PATH`` each mismatch the oracle asks about is also scored by that judge (its logit,
from the same cycle's states), and the summary gives the judge's AUC for harm over them, with a
bootstrap interval over questions, for the nodes a K = 16 window reaches and for the deeper ones:
the labels of exactly the mismatches a judge of the rule decides at that window; and, at each of
the thresholds ``CUTS``, how many harmless and harmful ones the judge's cut would accept (on the
oracle's path, not the judge's own).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.data.sources import add_problem_args, load_problems  # noqa: E402
from trtllm_autojudge.decoding.loading import is_eagle_draft, load_pair  # noqa: E402
from trtllm_autojudge.decoding.speculative import speculative_generate  # noqa: E402
from trtllm_autojudge.decoding.tree import DraftTree  # noqa: E402
from trtllm_autojudge.decoding.modes import JudgeRule  # noqa: E402
from trtllm_autojudge.decoding.rules import threshold_logit  # noqa: E402
from trtllm_autojudge.evaluation.bootstrap import auc_interval, ratio_interval  # noqa: E402
from trtllm_autojudge.evaluation.certificate import interval  # noqa: E402
from trtllm_autojudge.evaluation.common import DEFAULT_K, load_judge_file, questions_from, settle_k  # noqa: E402
from trtllm_autojudge.evaluation.live_oracle import LiveOracleRule  # noqa: E402
from trtllm_autojudge.mining.store import append_record, read_records, repair_tail  # noqa: E402
from trtllm_autojudge.models.loading import add_model_args, load_pair as load_model_pair  # noqa: E402
from trtllm_autojudge.tasks import add_task_args, task_from_args  # noqa: E402

CONTINUATION_K = 16  # the embedded pair's chain for an EAGLE head's continuations (module docstring)
CUTS = (0.02, 0.04, 0.06, 0.08, 0.15, 0.3)  # thresholds whose cut judge_auc counts the verdicts below
SHALLOW = 16  # the window the task's judge was chosen and first certified at: its AUC is read up to it and past it
HARMFUL_MAX = 5  # cut_frontier reads each family's best cut for at most 0..HARMFUL_MAX harmful acceptances
RUN_EDGES = (4, 8, 16, 32)  # harm_by_run's bins: runs of 4-7, 8-15, 16-31 and 32 or more
LONG_RUNS = (8, 12, 16)  # cut_frontier's flat cut held to each of these runs too: longer minimum runs, read on a shorter one's verdicts


def point_summary(runs: list[dict], ref: list[dict], changed: int) -> dict:
    """Tokens per forward of ``runs`` against ``ref`` (the same questions, in order), with the paired
    bootstrap interval, and ``changed`` answers with their 95% interval."""
    tokens, forwards, ref_tokens, ref_forwards = (np.array([r[k] for r in rs]) for rs in (runs, ref)
                                                  for k in ("new_tokens", "target_forwards"))
    ratio = float((tokens.sum() / forwards.sum()) / (ref_tokens.sum() / ref_forwards.sum()))
    return {"tokens_per_forward": float(tokens.sum() / forwards.sum()), "vs_lossless": ratio,
            "vs_lossless_95": list(ratio_interval(tokens, forwards, ref_tokens, ref_forwards)),
            "changed": changed, "changed_95": list(interval(changed, len(runs))),
            "judged_accepts": int(sum(r["judged_accepts"] for r in runs))}


def judge_auc(runs: list[dict], shallow: int = SHALLOW) -> dict:
    """The judge's AUC for harm (a swap that changed the answer) over the scored verdicts of
    ``runs`` (one oracle run per question), for all of them, the nodes 1..``shallow`` and the deeper
    ones: the count asked, the harmful count, the AUC with its interval (None with one class), and
    per threshold of ``CUTS`` the [harmless, harmful] verdicts whose score is below its cut (a judge
    accepts a mismatch whose logit is below logit(threshold))."""
    groups = {"all": lambda n: True, f"nodes 1-{shallow}": lambda n: n <= shallow,
              f"nodes {shallow + 1} and deeper": lambda n: n > shallow}
    out = {}
    for name, keep in groups.items():
        per_q = [[v for v in r.get("verdicts", []) if keep(v["node"]) and v.get("score") is not None] for r in runs]
        labels = [np.array([not v["keeps"] for v in vs], bool) for vs in per_q]
        scores = [np.array([v["score"] for v in vs], float) for vs in per_q]
        asked, harmful = sum(map(len, labels)), int(sum(y.sum() for y in labels))
        auc = auc_interval(labels, scores) if 0 < harmful < asked else None
        y, x = (np.concatenate(a) if a else np.zeros(0) for a in (labels, scores))  # [M] pooled
        out[name] = {"asked": asked, "harmful": harmful, "auc": None if auc is None else auc[0],
                     "auc_95": None if auc is None else list(auc[1:]),
                     "accepted_at": {f"{t:g}": [int((~y[x < threshold_logit(t)]).sum()), int(y[x < threshold_logit(t)].sum())]
                                     for t in CUTS}}
    return out


def cut_frontier(runs: list[dict], harmful_max: int = HARMFUL_MAX, long_runs: tuple[int, ...] = LONG_RUNS) -> dict | None:
    """Which cut spends the judge's risk best? Over the scored verdicts of ``runs`` that carry their
    run (the tokens a harmless acceptance buys before the walk meets the next mismatch or the window's
    end), per family of cuts the most harmless tokens bought by any one of its cuts that accepts at
    most h harmful swaps, for h = 0..``harmful_max``:

    - ``flat``: the judge's logit below a constant (the shipped rule, under the verdicts' own minimum run);
    - ``flat, run >= m`` for each m of ``long_runs``: the same, only where the run reaches m (a longer
      minimum run);
    - ``per token``: the judge's probability of harm over the run below a constant (the expected harm
      per token bought), which spends the risk where an acceptance buys the most.

    A screen on the oracle's path, like ``accepted_at``: a judge's own walk stops at its first
    rejection in a cycle and never reaches the verdicts after it, yet each is credited here with its
    own run, which flatters the families that reject more (the longer runs). None when no verdict
    carries a run and a score."""
    vs = [v for r in runs for v in r.get("verdicts", []) if v.get("score") is not None and "run" in v]
    if not vs:
        return None
    score, run = np.array([v["score"] for v in vs]), np.array([v["run"] for v in vs], float)  # [M]
    harmful = np.array([not v["keeps"] for v in vs])  # [M] bool
    log_p_harm = -np.logaddexp(0.0, -score)  # [M] log sigmoid(score)
    keys = {"flat": score, **{f"flat, run >= {m}": np.where(run >= m, score, np.inf) for m in long_runs},
            "per token": log_p_harm - np.log(run)}
    out = {"verdicts": len(vs), "harmless_tokens": int(run[~harmful].sum()), "families": {}}
    for name, key in keys.items():
        order = np.argsort(key, kind="stable")
        bad = np.cumsum(harmful[order])  # [M]: harmful among the first i + 1 in the key's order
        bought = np.cumsum(np.where(harmful[order], 0.0, run[order]))  # [M]
        cut = np.isfinite(key[order]) & np.append(key[order][1:] != key[order][:-1], True)  # a cut can fall after i
        out["families"][name] = [int(max([0.0, *bought[cut & (bad <= h)]])) for h in range(harmful_max + 1)]
    return out


def harm_by_run(runs: list[dict], edges: tuple[int, ...] = RUN_EDGES) -> dict | None:
    """Per bin of the run an acceptance opens (``edges``: each bin's first run), over every verdict of
    ``runs`` that carries its run, scored or not: the count asked, the harmful count and the tokens the
    harmless ones buy. None when no verdict carries its run."""
    vs = [v for r in runs for v in r.get("verdicts", []) if "run" in v]
    if not vs:
        return None
    bins = [f"{lo}-{hi - 1}" for lo, hi in zip(edges, edges[1:])] + [f"{edges[-1]} and more"]
    which = np.searchsorted(edges, [v["run"] for v in vs], side="right") - 1  # [M]: -1 below the first edge
    return {name: {"asked": int((which == i).sum()),
                   "harmful": sum(not v["keeps"] for v, w in zip(vs, which) if w == i),
                   "harmless_tokens": sum(v["run"] for v, w in zip(vs, which) if w == i and v["keeps"])}
            for i, name in enumerate(bins)}


def summarize(records: list[dict], min_runs: list[int], compare: dict[str, list[dict]] | None = None,
              same=None) -> dict:
    """Per minimum run, over the questions with all their records: the ratio against lossless with
    its interval, the answers changed with theirs, and the oracle's continuations. ``compare`` maps
    a label to an eval folder's runs (``same(a, b)``: the checker's answer comparison): its lossless
    and labelled runs of the same questions give a row beside them."""
    by_q: dict[str, dict[str, dict]] = {}
    for r in records:
        by_q.setdefault(r["qid"], {})[r["spec"]] = r
    specs = ["lossless"] + [f"oracle-minrun{m}" for m in min_runs]
    done = [q for q in by_q.values() if all(s in q for s in specs)]
    if not done:
        raise SystemExit("no question has all its records yet: run more questions")
    ref = [q["lossless"] for q in done]
    out = {"questions": len(done), "points": {},
           "lossless_tokens_per_forward": sum(r["new_tokens"] for r in ref) / sum(r["target_forwards"] for r in ref)}
    for m in min_runs:
        runs = [q[f"oracle-minrun{m}"] for q in done]
        out["points"][f"oracle, minimum run {m}"] = {
            **point_summary(runs, ref, sum(r["changed"] for r in runs)),
            "continuations": int(sum(r["asked"] for r in runs)), "seconds": float(sum(r["seconds"] for r in runs))}
        if (by_run := harm_by_run(runs)) is not None:
            out["points"][f"oracle, minimum run {m}"]["harm_by_run"] = by_run
        if any(v.get("score") is not None for r in runs for v in r.get("verdicts", [])):
            out["points"][f"oracle, minimum run {m}"]["judge_auc"] = judge_auc(runs)
            out["points"][f"oracle, minimum run {m}"]["cut_frontier"] = cut_frontier(runs)
    for label, folder_runs in (compare or {}).items():
        spec = label.rpartition(":")[2]
        by = {(r["spec"], r["qid"]): r for r in folder_runs}
        missing = [r["qid"] for r in ref if ("lossless", r["qid"]) not in by or (spec, r["qid"]) not in by]
        if missing:
            raise SystemExit(f"--compare {label}: {len(missing)} of the questions have no lossless or {spec} run there "
                             f"(e.g. {missing[0]})")
        runs, lossless = [by[(spec, r["qid"])] for r in ref], [by[("lossless", r["qid"])] for r in ref]
        out["points"][label] = point_summary(runs, lossless, sum(not same(a["answer"], b["answer"])
                                                                 for a, b in zip(runs, lossless)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--min-runs", default="4,8", help="minimum runs to run the oracle under (1: none)")
    p.add_argument("--k", type=int, default=None,
                   help=f"chain draft: K draft tokens per cycle (default {DEFAULT_K}; an EAGLE head's trained depth)")
    p.add_argument("--max-new-tokens", type=int, default=320)
    p.add_argument("--out", type=Path, required=True, help="JSONL of run records (appended; resumes)")
    p.add_argument("--json", type=Path, default=None, help="also write the summary here")
    p.add_argument("--compare", action="append", default=[], metavar="FOLDER:SPEC",
                   help="an eval output folder and operating point to summarize on the same questions (repeatable)")
    p.add_argument("--judge", default=None,
                   help="score each mismatch the oracle asks about with this judge file, and report its AUC over them")
    add_task_args(p)
    add_model_args(p)
    add_problem_args(p, split="train", variants=5)
    args = p.parse_args(argv)
    min_runs = [int(m) for m in args.min_runs.split(",")]
    if any(m < 1 for m in min_runs):
        p.error(f"--min-runs are numbers of tokens an acceptance must open: give 1 (none) or more, got {args.min_runs}")
    compare = {}
    for item in args.compare:
        folder, sep, spec = item.rpartition(":")
        if not sep or not (Path(folder) / "runs.jsonl").is_file():
            p.error(f"--compare {item!r}: give FOLDER:SPEC of an eval output folder, e.g. out/eval:judge@0.1")
        compare[item] = read_records(Path(folder) / "runs.jsonl", required=("spec", "qid"))[0]
    task = task_from_args(args)
    target, draft, tokenizer = load_pair(args, task)
    settle_k(args, draft)
    tree = DraftTree.chain(args.k)
    cont_pair, cont_tree = (target, draft), tree
    if is_eagle_draft(args.draft):  # continuations on the embedded pair (module docstring)
        cont_pair, cont_tree = load_model_pair(argparse.Namespace(**{**vars(args), "draft": "embedded"}), task)[:2], \
            DraftTree.chain(CONTINUATION_K)
    if args.threads:
        torch.set_num_threads(args.threads)
    score = None
    if args.judge:
        judge = JudgeRule(load_judge_file(args.judge, target, draft))
        if judge.needs_draft_hidden:
            p.error(f"--judge {args.judge} reads the draft's hidden states, which the oracle's cycles do not compute: "
                    f"give a target-only judge (DT, DT1, DT2, LS blocks)")
        score = lambda ctx, n: judge.judge_logits(ctx, np.array([n]))[0, n]  # noqa: E731
    questions = questions_from(load_problems(args, task), tokenizer, task)
    checker = task.checker
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    eos = set(target.eos_token_ids)
    if args.out.exists():
        repair_tail(args.out)  # a run stopped mid-line
    records = read_records(args.out, required=("spec", "qid"))[0] if args.out.exists() else []
    setup = {"target": args.target, "draft": args.draft, "k": args.k, "max_new_tokens": args.max_new_tokens}
    if args.judge:
        setup["judge"] = judge.head.weights_fingerprint()
    other = next((r for r in records if r.get("setup") != setup), None)
    if other is not None:
        p.error(f"{args.out} holds runs of another setup ({other.get('setup')}; this run's is {setup}): give another --out")
    done = {(r["spec"], r["qid"]) for r in records}

    def generate(prompt: list[int], rule=None, budget: int = args.max_new_tokens):
        return speculative_generate(target, draft, prompt, tree=tree, rule=rule, max_new_tokens=budget)

    def continuation(prompt: list[int], budget: int) -> list[int]:  # the target's greedy tokens
        return speculative_generate(*cont_pair, prompt, tree=cont_tree, max_new_tokens=budget).tokens

    for q in tqdm(questions, desc="live oracle", unit="question"):
        specs = ["lossless"] + [f"oracle-minrun{m}" for m in min_runs]
        if all((s, q.qid) in done for s in specs):
            continue
        mine = {r["spec"]: r for r in records if r["qid"] == q.qid}
        if "lossless" not in mine:
            t0 = time.perf_counter()
            res = generate(q.prompt_ids)
            mine["lossless"] = {"spec": "lossless", "qid": q.qid, "setup": setup,
                                "answer": checker.answer(decode(res.tokens), q.example),
                                "tokens": res.tokens, "seconds": time.perf_counter() - t0, "asked": 0, **res.summary()}
            append_record(args.out, mine["lossless"])
            records.append(mine["lossless"])
        reference, n_prompt = mine["lossless"]["answer"], len(q.prompt_ids)

        def keeps_answer(prefix: list[int]) -> bool:
            out = prefix[n_prompt:]
            ended = next((i for i, t in enumerate(out) if t in eos), None)
            if ended is not None:  # the response ended before this node: nothing to continue
                out = out[:ended]
            elif len(out) < args.max_new_tokens:
                out = out + continuation(prefix, args.max_new_tokens - len(out))
            return checker.same(checker.answer(decode(out), q.example), reference)

        for m in min_runs:
            if f"oracle-minrun{m}" in mine:
                continue
            rule, t0 = LiveOracleRule(keeps_answer, m, score), time.perf_counter()
            res = generate(q.prompt_ids, rule)
            answer = checker.answer(decode(res.tokens), q.example)
            rec = {"spec": f"oracle-minrun{m}", "qid": q.qid, "setup": setup, "answer": answer,
                   "changed": not checker.same(answer, reference), "tokens": res.tokens,
                   "seconds": time.perf_counter() - t0, "asked": rule.asked, "verdicts": rule.verdicts,
                   **res.summary()}
            append_record(args.out, rec)
            records.append(rec)
    summary = {**setup, "questions_file": args.questions, **summarize(records, min_runs, compare, task.checker.same)}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
