#!/usr/bin/env python3
"""Write held-out instances of a task's TRAINING templates as a JSONL for ``--questions``, spread
over the templates: round r holds the r-th fresh variant of every template (seed ``--seed``), so a
``--limit`` takes every template once before any twice.

    python build_scripts/heldout_questions.py --task gsm8k-program --per-template 2 --seed 1000 \\
        --out out/heldout_program.jsonl      # the questions of docs/results/gsm8k-program_train-templates_summary.json

Questions the task's shipped adapter, draft or judge were trained on or mined from are left out,
by question text (:meth:`trtllm_autojudge.tasks.Task.trained_questions`), and so are the questions
of every ``--exclude`` file: a calibration set disjoint from the evaluation set is

    python build_scripts/heldout_questions.py --task gsm8k-program --per-template 2 --seed 2000 \\
        --exclude out/heldout_program.jsonl --out out/calibration_program.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.data.sources import by_round  # noqa: E402
from trtllm_autojudge.tasks import load_task  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="gsm8k-program")
    p.add_argument("--per-template", type=int, default=2)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--exclude", type=Path, action="append", default=[], metavar="JSONL",
                   help="leave out the questions of this --questions file too (repeatable)")
    args = p.parse_args(argv)
    task = load_task(args.task)
    seen = set(task.trained_questions())
    for path in args.exclude:
        seen |= {q.question for q in task.load_jsonl(path)}
    problems = [q for q in task.problems("train", False, args.per_template, args.seed) if q.question not in seen]
    rows = by_round(problems)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for q in rows:
            f.write(json.dumps(q.to_json()) + "\n")
    print(f"wrote {len(rows)} held-out questions ({len({q.template_id for q in rows})} templates) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
