#!/usr/bin/env python3
"""Choose the draft's vocabulary subset and K by measured tokens/s of lossless and AutoJudge decoding.

    nice -n 10 python build_scripts/scan_draft.py --threads 1 --limit 2 --max-new-tokens 96 \\
        --sizes 0,1024,2048,4096 --ks 2,3,4 --out out/scan_draft.json

For each question, in one process: target-only greedy decoding, then lossless and AutoJudge (the
shipped judge at its default threshold) for every candidate (subset size x K; size 0 is the full
head), the candidates rotated per question so drift hits them alike. Subsets are counted as
``build_scripts/make_draft_vocab.py`` counts them (training-template responses, then questions,
then low ids). Reports tokens per wall-second and per CPU-second, each as a ratio to target-only.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from make_draft_vocab import token_counts  # noqa: E402

from trtllm_autojudge.data.sources import add_problem_args, load_problems  # noqa: E402
from trtllm_autojudge.decoding.modes import JudgeRule  # noqa: E402
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate  # noqa: E402
from trtllm_autojudge.decoding.tree import DraftTree  # noqa: E402
from trtllm_autojudge.evaluation.common import load_judge, questions_from  # noqa: E402
from trtllm_autojudge.kernels.cpu_linear import pack_linears  # noqa: E402
from trtllm_autojudge.models.loading import add_model_args, load_pair  # noqa: E402
from trtllm_autojudge.models.vocab_subset import SubsetHead, most_frequent, tokenizer_fingerprint  # noqa: E402

log = logging.getLogger("scan_draft")


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    n = fn()
    return n, time.perf_counter() - t0, time.process_time() - c0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="0,1024,2048,4096", help="subset sizes (0: the full head)")
    p.add_argument("--ks", default="2,3,4", help="chain lengths K")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--judge", default=None)
    p.add_argument("--out", type=Path, default=None)
    add_model_args(p)
    add_problem_args(p, split="eval", variants=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.limit is None:
        args.limit = 2
    target, draft, tokenizer = load_pair(args)
    judge = load_judge(args, target, draft, required=True)
    questions = questions_from(load_problems(args), tokenizer)
    counts, question_counts = token_counts(tokenizer, "gsm8k-cot", "train", 40, 0)
    heads = {0: None}
    for size in (int(s) for s in args.sizes.split(",") if int(s)):
        subset = most_frequent([counts, question_counts], size, draft.vocab_size, tokenizer_fingerprint(tokenizer),
                               always=[tokenizer.eos_token_id])
        heads[size] = SubsetHead(draft.model.lm_head, subset)
        pack_linears(heads[size])
    candidates = [(size, int(k), mode) for size in heads for k in args.ks.split(",") for mode in ("lossless", "autojudge")]
    rule = JudgeRule(judge, None)
    totals = {c: [0, 0.0, 0.0, 0] for c in [("target-only",)] + candidates}  # tokens, wall s, cpu s, cycles
    for qi, q in enumerate(questions):
        n, wall, cpu = timed(lambda: len(greedy_generate(target, q.prompt_ids, args.max_new_tokens)))
        totals[("target-only",)][:3] = [a + b for a, b in zip(totals[("target-only",)][:3], (n, wall, cpu))]
        shift = qi * len(candidates) // max(len(questions), 1)
        for size, k, mode in candidates[shift:] + candidates[:shift]:
            draft.use_head(heads[size])
            runs = []

            def speculate():
                runs.append(speculative_generate(target, draft, q.prompt_ids, tree=DraftTree.chain(k),
                                                 rule=None if mode == "lossless" else rule,
                                                 max_new_tokens=args.max_new_tokens))
                return len(runs[0].tokens)

            n, wall, cpu = timed(speculate)
            t = totals[(size, k, mode)]
            t[0], t[1], t[2], t[3] = t[0] + n, t[1] + wall, t[2] + cpu, t[3] + len(runs[0].cycles)
        log.info("question %d of %d done", qi + 1, len(questions))
    base = totals[("target-only",)]
    rows = []
    for (size, k, mode) in candidates:
        n, wall, cpu, cycles = totals[(size, k, mode)]
        rows.append({"subset": size or "full", "k": k, "mode": mode, "tokens_per_cycle": n / max(cycles, 1),
                     "tokens_per_s": n / wall, "tokens_per_cpu_s": n / cpu,
                     "vs_target_wall": (n / wall) / (base[0] / base[1]), "vs_target_cpu": (n / cpu) / (base[0] / base[2])})
    print(f"target-only: {base[0] / base[1]:.2f} tok/s, {base[0] / base[2]:.2f} tok/cpu-s "
          f"({len(questions)} questions, {args.max_new_tokens} new tokens, dtype {target.dtype})")
    print(f"{'subset':>7}{'K':>3} {'mode':<10}{'tok/cycle':>10}{'tok/s':>8}{'tok/cpu-s':>10}{'x target':>9}{'x (cpu)':>9}")
    for r in rows:
        print(f"{r['subset']!s:>7}{r['k']:>3} {r['mode']:<10}{r['tokens_per_cycle']:>10.2f}{r['tokens_per_s']:>8.2f}"
              f"{r['tokens_per_cpu_s']:>10.2f}{r['vs_target_wall']:>8.2f}x{r['vs_target_cpu']:>8.2f}x")
    if args.out:
        args.out.write_text(json.dumps({"command": " ".join(sys.argv), "target_only": base, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
