#!/usr/bin/env python3
"""Do two `eval` runs emit the same tokens? Question by question, for each operating point they share.
Backs notebook/certification.md, "Certification time: questions decoded at once", and docs/plugin.md
(the host core decides real decoding as the Python rule does).

    python experiments/compare_runs.py --a out/heldout_shipped_python --b out/heldout_shipped_core \\
        --out docs/results/accept_impl_core_vs_python_heldout100.json

Reads the ``runs.jsonl`` of two ``eval`` (or ``calibrate``) output folders, for example the same
questions decided by ``--accept-impl python`` and ``--accept-impl core``, and for each operating
point (``spec``) run in both counts the questions whose tokens are identical, and those whose tokens,
answers, accepted tokens or target forwards differ; the first differing token of each is printed.
Exit status 1 when any run differs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.mining.store import read_records  # noqa: E402


def by_spec(folder: Path) -> dict[str, dict[str, dict]]:
    """spec -> qid -> run of ``folder/runs.jsonl``."""
    runs, _ = read_records(folder / "runs.jsonl", required=("spec", "qid", "tokens"))
    out: dict[str, dict[str, dict]] = {}
    for r in runs:
        out.setdefault(r["spec"], {})[r["qid"]] = r
    return out


def first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def compare(a: dict[str, dict[str, dict]], b: dict[str, dict[str, dict]]) -> list[dict]:
    rows = []
    for spec in sorted(set(a) & set(b)):
        qids = sorted(set(a[spec]) & set(b[spec]))
        differ = [q for q in qids if a[spec][q]["tokens"] != b[spec][q]["tokens"]]
        rows.append({"spec": spec, "questions": len(qids), "identical": len(qids) - len(differ),
                     "differ": [{"qid": q, "first_difference": first_difference(a[spec][q]["tokens"], b[spec][q]["tokens"]),
                                 "answers": [a[spec][q].get("answer"), b[spec][q].get("answer")]} for q in differ]})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", type=Path, required=True, help="one eval output folder")
    p.add_argument("--b", type=Path, required=True, help="the other")
    p.add_argument("--specs", default=None, help="compare only these operating points (comma-separated, e.g. "
                   "judge: runs copied into both folders, such as seeded lossless runs, are equal by construction)")
    p.add_argument("--out", type=Path, default=None, help="also write the comparison as JSON here")
    args = p.parse_args(argv)
    rows = compare(by_spec(args.a), by_spec(args.b))
    if args.specs is not None:
        rows = [r for r in rows if r["spec"] in args.specs.split(",")]
    if not rows:
        raise SystemExit(f"{args.a} and {args.b} share no operating point{'' if args.specs is None else ' of ' + args.specs}: "
                         f"run the same points on both")
    for r in rows:
        print(f"{r['spec']}: {r['identical']} of {r['questions']} questions identical")
        for d in r["differ"]:
            print(f"   {d['qid']}: first differing token at {d['first_difference']}, answers {d['answers']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"a": args.a.name, "b": args.b.name, "points": rows}, indent=1))
    return int(any(r["differ"] for r in rows))


if __name__ == "__main__":
    sys.exit(main())
