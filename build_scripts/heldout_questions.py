#!/usr/bin/env python3
"""Write held-out instances of a task's TRAINING templates as a JSONL for ``--questions``, spread
over the templates: round r holds the r-th fresh variant of every template (seed ``--seed``), so a
``--limit`` takes every template once before any twice.

    python build_scripts/heldout_questions.py --task gsm8k-program --per-template 20 --seed 57721 \\
        --out out/calib3.jsonl      # the 1,389 questions the task's judge is certified on

Questions the task's shipped adapter, draft or judge were trained on or mined from are left out,
by question text (:meth:`trtllm_autojudge.tasks.Task.trained_questions`), and so are those of
every ``--exclude-draw SEED:PER_TEMPLATE`` (what this script draws with that seed and count,
before any exclusion) and every ``--exclude`` file. A calibration set disjoint from a report set:

    python build_scripts/heldout_questions.py --task gsm8k-program --per-template 5 --seed 2000 \\
        --exclude-draw 1000:2 --out out/calibration_program.jsonl

Beside the JSONL it writes ``NAME.set.json`` (:mod:`trtllm_autojudge.data.question_set`): the
command that writes the same questions again, their count and a digest of their ids. ``calibrate``,
``eval`` and ``bench`` record it, so a certificate names its questions by how to regenerate them.
Sets excluded with ``--exclude-draw`` keep that command complete; ``--exclude`` files are named
by their own manifests.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.data.question_set import file_record, set_record, write_manifest  # noqa: E402
from trtllm_autojudge.data.sources import by_round  # noqa: E402
from trtllm_autojudge.mining.cli import problem_id  # noqa: E402
from trtllm_autojudge.tasks import load_task  # noqa: E402


def draw(task, per_template: int, seed: int, excluded: set[str] = frozenset()) -> list:
    """The held-out draw of ``seed``: ``per_template`` fresh variants of each training template, less
    the questions the shipped models were trained or mined on and the ``excluded`` texts, in round order."""
    seen = set(task.trained_questions()) | excluded
    return by_round([q for q in task.problems("train", False, per_template, seed) if q.question not in seen])


def parse_draw(text: str) -> tuple[int, int]:
    try:
        seed, per_template = (int(w) for w in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--exclude-draw takes SEED:PER_TEMPLATE (e.g. 57721:20), got {text!r}") from None
    return seed, per_template


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="gsm8k-program")
    p.add_argument("--per-template", type=int, default=2)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--exclude-draw", type=parse_draw, action="append", default=[], metavar="SEED:PER_TEMPLATE",
                   help="leave out the questions this script draws with that seed and count (repeatable)")
    p.add_argument("--exclude", type=Path, action="append", default=[], metavar="JSONL",
                   help="leave out the questions of this --questions file too (repeatable)")
    args = p.parse_args(argv)
    task = load_task(args.task)
    seen: set[str] = set()
    for seed, per_template in args.exclude_draw:
        seen |= {q.question for q in draw(task, per_template, seed)}
    excluded_files = []
    for path in args.exclude:
        questions = [q.question for q in task.load_jsonl(path)]
        seen |= set(questions)
        excluded_files.append(file_record(path, [problem_id(q) for q in questions]))
    rows = draw(task, args.per_template, args.seed, seen)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for q in rows:
            f.write(json.dumps(q.to_json()) + "\n")
    recipe = shlex.join(["python", "build_scripts/heldout_questions.py", "--task", args.task, "--per-template",
                         str(args.per_template), "--seed", str(args.seed),
                         *[w for s, n in args.exclude_draw for w in ("--exclude-draw", f"{s}:{n}")],
                         *[w for path in args.exclude for w in ("--exclude", path.name)]])
    record = set_record([problem_id(q.question) for q in rows], recipe, args.seed, file=args.out)
    if excluded_files:
        record["excluded_files"] = excluded_files
    manifest = write_manifest(args.out, record)
    print(f"wrote {len(rows)} held-out questions ({len({q.template_id for q in rows})} templates) to {args.out}, "
          f"their recipe and digest to {manifest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
