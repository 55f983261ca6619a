#!/usr/bin/env python3
"""Which judged acceptances come before a changed answer? The swaps of an `eval` run, by token class.
Backs notebook/certification.md, "Why accepted swaps harm (development set)" and "Rounding: changes
without a judged acceptance".

    python experiments/judged_swaps.py --runs out/dev_shipped/runs.jsonl --spec judge@0.0235593 \\
        --out docs/results/judged_swaps_program_dev.json

Reads the judge runs of one operating point (``--spec``) and the lossless runs of an ``eval`` /
``calibrate`` output folder. Every judged acceptance (``judged_tokens`` of the run: the draft token
kept where the target wanted another) gets a class from its line of the emitted program: ``comment``
or ``code`` (the line starts with ``#`` before the swap), and ``digit`` when either token holds a
digit. For each class it prints how many acceptances fell in responses whose final answer stayed the
lossless one and in responses whose answer changed, and how many responses of each kind hold at
least one; then how many responses changed their answer by their number of judged acceptances
(does harm grow faster than the acceptances, as swaps that compound would make it?); then every
changed response's swaps in context (target token -> draft token). Classes whose share among the
changed responses' swaps is far above their share among the kept ones are where the judge's harm
concentrates.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.mining.store import read_records  # noqa: E402
from trtllm_autojudge.judge.token_class import line_before, swap_class  # noqa: E402
from trtllm_autojudge.tasks import load_task  # noqa: E402

CONTEXT = 40  # characters of the line shown before a swap


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=Path, required=True, help="runs.jsonl of an eval or calibrate output folder")
    p.add_argument("--spec", required=True, help="the judge operating point to read, e.g. judge@0.0235593")
    p.add_argument("--task", default="gsm8k-program", help="task whose checker compares the answers")
    p.add_argument("--out", type=Path, default=None, help="also write the counts as JSON here")
    p.add_argument("--quiet", action="store_true", help="counts only, no swaps in context")
    args = p.parse_args(argv)
    from trtllm_autojudge.models.embedded import load_tokenizer

    runs = read_records(args.runs, required=("spec", "qid"))[0]
    lossless = {r["qid"]: r for r in runs if r["spec"] == "lossless"}
    mine = [r for r in runs if r["spec"] == args.spec and r["qid"] in lossless]
    if not mine:
        raise SystemExit(f"{args.runs} holds no {args.spec} runs with a lossless run beside them "
                         f"(specs there: {sorted({r['spec'] for r in runs})})")
    if any("judged_tokens" not in r for r in mine):
        raise SystemExit(f"{args.runs}: runs without judged_tokens (made before runs recorded them): run eval again")
    checker, tokenizer = load_task(args.task).checker, load_tokenizer()
    swaps = collections.Counter()  # (class, kept|changed) -> acceptances
    responses = collections.Counter()  # (class, kept|changed) -> responses holding one
    totals = collections.Counter()  # kept|changed -> responses
    by_count = collections.Counter()  # (judged acceptances, kept|changed) -> responses
    shown = []
    for r in mine:
        fate = "kept" if checker.same(r["answer"], lossless[r["qid"]]["answer"]) else "changed"
        totals[fate] += 1
        classes = [swap_class(tokenizer, r["tokens"], i, d, t) for i, d, t in r["judged_tokens"]]
        by_count[(len(classes), fate)] += 1
        for c in classes:
            swaps[(c, fate)] += 1
        for c in set(classes):
            responses[(c, fate)] += 1
        if fate == "changed" and not args.quiet:
            shown.append(f"-- {r['qid']}: answer {lossless[r['qid']]['answer']!r} -> {r['answer']!r}, "
                         f"{len(classes)} judged acceptances")
            for (i, d, t), (where, kind) in zip(r["judged_tokens"], classes):
                line = line_before(tokenizer, r["tokens"], i)[-CONTEXT:]
                shown.append(f"   {where:<7} {kind:<5} {line!r} + {tokenizer.decode([t])!r} -> {tokenizer.decode([d])!r}")
    names = sorted({c for c, _ in swaps})
    table = [{"class": "-".join(c), **{f"{k}_{fate}": n[(c, fate)] for k, n in (("swaps", swaps), ("responses", responses))
                                       for fate in ("kept", "changed")}} for c in names]
    print(f"{args.spec}: {totals['kept']} responses kept their answer, {totals['changed']} changed")
    print(f"{'class':<16}{'swaps kept':>12}{'swaps changed':>15}{'responses kept':>16}{'responses changed':>19}")
    for row in table:
        print(f"{row['class']:<16}{row['swaps_kept']:>12}{row['swaps_changed']:>15}{row['responses_kept']:>16}"
              f"{row['responses_changed']:>19}")
    counts = sorted({n for n, _ in by_count})
    print(f"\n{'judged acceptances':<20}{'responses':>10}{'changed':>9}")
    for n in counts:
        print(f"{n:<20}{by_count[(n, 'kept')] + by_count[(n, 'changed')]:>10}{by_count[(n, 'changed')]:>9}")
    print("\n".join(shown))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"runs": args.runs.name, "spec": args.spec, "responses": dict(totals),
                                        "classes": table,
                                        "by_judged_acceptances": [{"judged": n, "kept": by_count[(n, "kept")],
                                                                   "changed": by_count[(n, "changed")]} for n in counts]},
                                       indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
