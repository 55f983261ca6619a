"""Write GSM8K requests for the engine runner, and score its output.

    python examples/gsm8k_prompts.py write --tokenizer_dir HF_TARGET --out prompts.jsonl [--limit 100] [--threshold 0.3]
    python examples/gsm8k_prompts.py score results.jsonl

Requests use the project's one prompt format (trtllm_autojudge.data.prompt) on the original GSM8K
test questions shipped with the project; scoring uses its answer checker.
"""
import argparse
import json
import sys

from trtllm_autojudge.data.answers import is_correct
from trtllm_autojudge.data.gsm8k import original_problems
from trtllm_autojudge.data.prompt import prompt_ids


def write(args) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_dir)
    with open(args.out, "w") as f:
        for problem in original_problems(args.split)[: args.limit]:
            row = {"prompt_ids": prompt_ids(tokenizer, problem.question), "answer": problem.gold}
            if args.threshold is not None:
                row["threshold"] = args.threshold
            f.write(json.dumps(row) + "\n")
    return 0


def score(args) -> int:
    rows = [json.loads(line) for line in open(args.results) if line.strip()]
    correct = sum(is_correct(r["text"], r["answer"]) for r in rows)
    cycles = sum(r["cycles"] for r in rows)
    accepted = sum(r["accepted_per_cycle"] * r["cycles"] for r in rows)
    print(json.dumps({"requests": len(rows), "accuracy": correct / max(len(rows), 1),
                      "accepted_per_cycle": accepted / max(cycles, 1),
                      "judged_accepts": sum(r["judged_accepts"] for r in rows), "cycles": cycles}))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--tokenizer_dir", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--split", default="eval", choices=["train", "eval"])
    w.add_argument("--limit", type=int, default=100)
    w.add_argument("--threshold", type=float)
    s = sub.add_parser("score")
    s.add_argument("results")
    args = ap.parse_args(argv)
    return write(args) if args.cmd == "write" else score(args)


if __name__ == "__main__":
    sys.exit(main())
