#!/usr/bin/env python3
"""Why does the oracle gain what it gains? Replays, draft mismatches and label kinds of mined records.
Backs notebook/program-task-gates.md, "The gate: the oracle before mining at scale", and
notebook/program-lookahead-judge.md, "The lookahead judge in bfloat16, the rule on mismatches only, and
the window" (the oracle as the window grows).

    python experiments/gate_analysis.py --task gsm8k-program --labels out/gate_k8/oracle_labels.jsonl \\
        --kinds-also out/judge_program/labels.jsonl --seed 1000 --out docs/results/gsm8k-program_gate_analysis.json
    python experiments/gate_analysis.py --task gsm8k-program --labels labels/gsm8k-program_train-v24-seed7_draft30.jsonl.gz \\
        --records 200 --k 16,32,64 --seed 7 --variants-per-template 24 --out docs/results/gsm8k-program_oracle_vs_k_bf16.json

For the records of ``--labels`` (one mined record per prompt, e.g. ``eval --mine-oracle``'s):
- the exact chain replays (:func:`trtllm_autojudge.evaluation.trajectory.record_replays`) of lossless
  decoding on the target's response and of the oracle on the mined trajectory, for each ``--k``;
- ``comments_free``: an optimistic bound of what harmless comments could give with this draft: the
  lossless replay with EVERY comment-line mismatch accepted, as if accepting one changed nothing
  after it (the draft's later proposals stay those along the target's own response);
- the draft's teacher-forced mismatches along each trajectory: accepting a harmless mismatch helps
  only if the continuation it leads to does not bring as many new ones;
- ``oracle_flips``: labelled positions where the replay's draft pass rounds a near-tie otherwise than
  mining's did (the replay uses the mined draft token there);
- ``gold``: how many of the target's lossless answers are right, for the records whose question is
  among the problems the question arguments select (e.g. ``--seed 7`` for prompts mined with
  ``make_judge.py --seed 7``);
- the labels by where they fall (a comment line, a code line, the start of a line) and whether a
  number is swapped, with ``--kinds-also`` records added (labels only).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.data.comment_noise import is_comment  # noqa: E402
from trtllm_autojudge.data.sources import add_problem_args, load_problems  # noqa: E402
from trtllm_autojudge.evaluation.trajectory import record_replays, replay_chain  # noqa: E402
from trtllm_autojudge.mining.cached_lm import CachedLM  # noqa: E402
from trtllm_autojudge.mining.cli import problem_id  # noqa: E402
from trtllm_autojudge.mining.store import read_records  # noqa: E402
from trtllm_autojudge.models.loading import add_model_args, load_pair  # noqa: E402
from trtllm_autojudge.tasks import add_task_args, task_from_args  # noqa: E402


def label_kind(tokenizer, record: dict, position: int, target_token: int, draft_token: int) -> str:
    """``comment``/``code``/``line start`` of the line the label falls in, and ``number``/``other``.
    The mined trajectory agrees with the sequence the label was mined on up to its position."""
    n = len(record["prompt_ids"])
    where = line_kind(tokenizer, list(record["final_ids"]), n, position)
    number = any(tokenizer.decode([t]).strip().isdigit() for t in (target_token, draft_token))
    return f"{where}_{'number' if number else 'other'}"


def line_kind(tokenizer, seq: list[int], start: int, position: int) -> str:
    """``comment``, ``code`` or ``line_start``: the kind of the response line holding ``position``."""
    line = tokenizer.decode(seq[start:position]).rsplit("\n", 1)[-1]
    return "comment" if is_comment(line) else ("code" if line.strip() else "line_start")


def comments_free_replay(tokenizer, record: dict, draft_lm: CachedLM, k: int):
    """The lossless replay on the target's response with every comment-line mismatch accepted
    (the optimistic bound described in the module docstring)."""
    n = len(record["prompt_ids"])
    seq = list(record["prompt_ids"]) + list(record["response_ids"])
    proposals = [0] + draft_lm.predictions(seq[:-1])  # proposals[i]: the draft's token at position i
    swapped, harmless = list(seq), {}
    for i in range(n, len(seq)):
        if proposals[i] != seq[i] and line_kind(tokenizer, seq, n, i) == "comment":
            swapped[i], harmless[i] = proposals[i], {proposals[i]}
    return replay_chain(swapped, n, proposals, seq, harmless, k)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--labels", type=Path, required=True, help="mined records to replay")
    p.add_argument("--kinds-also", type=Path, nargs="*", default=[], help="more records, for the label kinds only")
    p.add_argument("--records", type=int, default=None, metavar="N", help="replay only the first N records of --labels")
    p.add_argument("--k", default="8,16", help="chain lengths to replay")
    p.add_argument("--out", type=Path, default=None)
    add_task_args(p)
    add_model_args(p)
    add_problem_args(p, split="train", variants=1)
    args = p.parse_args(argv)
    if args.records is not None and args.records < 1:
        p.error(f"--records takes a number of records >= 1, got {args.records}")
    task = task_from_args(args)
    _, draft, tokenizer = load_pair(args, task)
    records = read_records(args.labels)[0][: args.records]
    draft_lm = CachedLM(draft)
    result = {"labels": str(args.labels), "prompts": len(records), "replays": {}, "draft_mismatches": {}, "tokens": {},
              "oracle_flips": 0}
    ks = [int(x) for x in args.k.split(",")]
    for k in ks:
        totals = defaultdict(lambda: [0, 0])
        for r in records:
            replays = {**record_replays(r, draft, k, draft_lm), "comments_free": comments_free_replay(tokenizer, r, draft_lm, k)}
            for name, rep in replays.items():
                totals[name][0] += rep.new_tokens
                totals[name][1] += rep.cycles
            if k == ks[0]:  # labelled positions where this draft pass rounds otherwise than mining's (the same for every k)
                result["oracle_flips"] += replays["oracle"].flips
        result["replays"][f"k{k}"] = {name: round(t / max(c, 1), 3) for name, (t, c) in totals.items()}
    for name in ("lossless", "oracle"):
        mismatches = tokens = 0
        for r in records:
            n = len(r["prompt_ids"])
            seq = list(r["prompt_ids"]) + list(r["response_ids"]) if name == "lossless" else list(r["final_ids"])
            preds = draft_lm.predictions(seq[:-1])  # preds[i - 1]: the draft's token at position i
            mismatches += sum(preds[i - 1] != seq[i] for i in range(n, len(seq)))
            tokens += len(seq) - n
        result["draft_mismatches"][name], result["tokens"][name] = mismatches, tokens
    gold = {problem_id(q.question): q.gold for q in load_problems(args, task)}
    matched = [r for r in records if str(r["id"]) in gold]
    result["gold"] = {"right": sum(task.checker.same(r["target_answer"], gold[str(r["id"])]) for r in matched),
                      "of": len(matched), "records": len(records)}
    kinds = defaultdict(lambda: {"important": 0, "unimportant": 0})
    for path in [args.labels, *args.kinds_also]:
        for r in read_records(path)[0]:
            for position, important, target_token, draft_token in r["labels"]:
                kinds[label_kind(tokenizer, r, position, target_token, draft_token)]["important" if important else "unimportant"] += 1
    result["labels_by_kind"] = dict(sorted(kinds.items()))
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
