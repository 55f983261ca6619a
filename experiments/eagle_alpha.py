#!/usr/bin/env python3
"""How often is an EAGLE head's draft right at each depth? Alpha per depth on held-out questions, with
95% intervals. Backs notebook/eagle-head.md, "The shipped head" (and the alphas of "What bounds the
1.3x goal: the oracle, modelled").

    python experiments/eagle_alpha.py --task gsm8k-program --draft eagle --questions heldout.jsonl \
        --responses out/eval/runs.jsonl --out docs/results/eagle_alpha.json

Over each question's prompt and the target's greedy response (the lossless runs of an ``eval``
output folder, ``--responses``, else decoded here), a chain is drafted from every response
position as the drafter drafts it (``models/eagle_training.py``: :func:`chain_lengths`); alpha at
depth d is the share of chains right at depth d among those right up to d - 1, with its
Clopper-Pearson interval; the expected tokens a chain cycle of depth D emits (1 + the accepted
drafts) follow from them.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.data.sources import add_problem_args, load_problems  # noqa: E402
from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter  # noqa: E402
from trtllm_autojudge.decoding.speculative import greedy_generate  # noqa: E402
from trtllm_autojudge.evaluation.certificate import interval  # noqa: E402
from trtllm_autojudge.mining.cli import problem_id  # noqa: E402
from trtllm_autojudge.mining.store import read_records  # noqa: E402
from trtllm_autojudge.models.dtype import dtype_name  # noqa: E402
from trtllm_autojudge.models.eagle_training import alpha_counts, chain_lengths  # noqa: E402
from trtllm_autojudge.decoding.loading import load_pair  # noqa: E402
from trtllm_autojudge.models.loading import add_model_args  # noqa: E402
from trtllm_autojudge.tasks import add_task_args, task_from_args  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--responses", type=Path, help="an eval output folder's runs.jsonl: its lossless runs' tokens")
    p.add_argument("--depth", type=int, default=4, help="alpha for depths 1..DEPTH")
    p.add_argument("--max-new-tokens", type=int, default=320, help="response length when decoding here")
    p.add_argument("--out", type=Path, help="write the result as JSON")
    add_task_args(p)
    add_model_args(p)
    add_problem_args(p, split="eval", variants=0)
    args = p.parse_args(argv)
    if args.depth < 1:
        p.error(f"--depth must be >= 1, got {args.depth}")
    return args


def expected_tokens(alpha: list[float | None], depth: int) -> float:
    """1 + the expected accepted drafts of a chain of ``depth``: sum over d of alpha_1 ... alpha_d."""
    total, run = 1.0, 1.0
    for a in alpha[:depth]:
        run *= a or 0.0
        total += run
    return total


def main(argv=None) -> int:
    args = parse_args(argv)
    task = task_from_args(args)
    problems = load_problems(args, task, held_out=True)
    target, drafter, tokenizer = load_pair(args, task)
    if not isinstance(drafter, EagleDrafter):
        raise SystemExit(f"--draft {args.draft}: give an EAGLE head (eagle or eagle:HEAD)")
    lossless = {}
    if args.responses:
        runs, _ = read_records(args.responses, required=("spec", "qid"))
        lossless = {r["qid"]: r["tokens"] for r in runs if r["spec"] == "lossless"}
    counts = np.zeros((args.depth, 2), np.int64)
    decoded = 0
    for problem in tqdm(problems, desc="alpha", unit="question", file=sys.stderr):
        prompt = task.prompt_ids(tokenizer, problem.question)
        response = lossless.get(problem_id(problem.question))
        if response is None:
            response, decoded = greedy_generate(target, prompt, args.max_new_tokens), decoded + 1
        ids = prompt + list(response)
        with torch.inference_mode():
            hidden = target.model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]  # [L, H]
            positions, right = chain_lengths(drafter.head, target.model.lm_head, ids, len(prompt), hidden, args.depth)
        counts += alpha_counts(positions, right, len(ids), args.depth)
    alpha = [int(r) / int(t) if t else None for r, t in counts]
    rows = [{"depth": d + 1, "right": int(r), "tried": int(t), "alpha": None if not t else round(int(r) / int(t), 4),
             "interval": None if not t else [round(x, 4) for x in interval(int(r), int(t))]}
            for d, (r, t) in enumerate(counts)]
    result = {"task": task.name, "head": args.draft, "drafter": drafter.name, "head_fingerprint": drafter.fingerprint(),
              "dtype": dtype_name(target.dtype), "questions": len(problems), "responses_decoded_here": decoded,
              "depths": rows, "expected_tokens_per_chain_cycle": {d: round(expected_tokens(alpha, d), 3)
                                                                  for d in range(1, args.depth + 1)},
              "command": shlex.join(["python", "experiments/eagle_alpha.py", *(argv or sys.argv[1:])])}
    for row in rows:
        print(f"depth {row['depth']}: alpha {row['alpha']} {row['interval']} ({row['right']} of {row['tried']} chains)")
    print("expected tokens per chain cycle, by depth:", result["expected_tokens_per_chain_cycle"])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
