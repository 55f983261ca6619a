#!/usr/bin/env python3
"""Which lever buys the most gain per certified bound? The frontier of certified bound against gain:
one curve per judge (a lever tried), from the summary rows of `eval` (summary.json) or `calibrate`
(calibration.json) output folders, or from a calibration.json kept under docs/results/. Backs
notebook/certification.md, "Levers: on-policy labels with a template split" and "The gain a minimum
run leaves to any judge".

    python experiments/certified_frontier.py --series "shipped judge=out/cal_shipped" \\
        --series "at most 4 judged per response=out/cal_shipped_m4" --budget 0.01 \\
        --out docs/img/certified_frontier_program.png --json docs/results/certified_frontier_program.json

Each row's x is its one-sided 95% upper bound on the share of answers changed (``--x share``: the
share itself), y its tokens per target forward against lossless. Rows that stopped early
(calibrate's early stop) are drawn hollow and unjoined, and kept in the JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.evaluation.plot import plot_certified_frontier  # noqa: E402

KEPT = ("spec", "questions", "answers_changed", "changed_without_acceptance", "answer_change_bound", "gold_losses",
        "gold_drop_bound", "vs_lossless", "vs_lossless_lo", "vs_lossless_hi", "tokens_per_cycle")


def judge_rows(folder: Path) -> list[dict]:
    """The judge rows of an eval or calibrate output folder, or of a calibrate result file."""
    if folder.is_file():
        rows = json.loads(folder.read_text()).get("candidates")
        if rows is None:
            raise SystemExit(f"{folder} has no 'candidates': give a calibrate result (calibration.json)")
        return rows
    if (folder / "calibration.json").is_file():
        return json.loads((folder / "calibration.json").read_text())["candidates"]
    if (folder / "summary.json").is_file():
        return [r for r in json.loads((folder / "summary.json").read_text())["rows"] if r["method"] == "judge"]
    raise SystemExit(f"{folder} is no calibrate result file, and holds neither calibration.json (calibrate) "
                     "nor summary.json (eval)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--series", action="append", required=True, metavar="NAME=PATH",
                   help="a curve: its name and the eval/calibrate output folder holding its rows, or a calibrate "
                        "result file (repeatable)")
    p.add_argument("--budget", type=float, default=None,
                   help="draw the answer budget (e.g. 0.01); with --x share, the observed share a certificate "
                        "allows (e.g. 0.005: 7 of 1,389 within a 1%% bound)")
    p.add_argument("--x", choices=("bound", "share"), default="bound",
                   help="x axis: each row's 95%% upper bound on the share of answers changed (default), or the "
                        "share itself (sweeps too small to certify anything)")
    p.add_argument("--goal", type=float, default=None, help="draw a gain aimed for (e.g. 1.1)")
    p.add_argument("--title", default="")
    p.add_argument("--out", type=Path, required=True, help="the PNG")
    p.add_argument("--json", type=Path, default=None, help="also write the rows per curve here")
    args = p.parse_args(argv)
    series = {}
    for item in args.series:
        name, sep, folder = item.rpartition("=")
        if not sep or not name:
            raise SystemExit(f"--series {item!r}: give NAME=PATH")
        series[name] = judge_rows(Path(folder))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plot_certified_frontier(series, args.out, args.budget, args.title, x=args.x, goal=args.goal)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({name: [{k: r.get(k) for k in KEPT} for r in rows]
                                         for name, rows in series.items()}, indent=1))
    print(f"wrote {args.out}" + (f" and {args.json}" if args.json else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
