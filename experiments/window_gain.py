#!/usr/bin/env python3
"""How do tokens per target forward grow with the draft window, for lossless, the certified judge and
the oracle? Backs notebook/long-windows.md, "Tokens per forward against K", and the plot in
docs/results.md.

    python experiments/window_gain.py --oracle docs/results/gsm8k-program_oracle_vs_k_bf16.json \\
        --point "16:certified, report set (bf16):docs/results/gsm8k-program_report3_stock-minrun8-calib3-certified_k16_bf16_summary.json:judge" \\
        --point "32:certified, calibration set:out/cal32/calibration.json:judge@0.04" \\
        --out docs/img/window_gain_program.png --json docs/results/window_gain_program.json

Each ``--point K:LABEL:FILE:SPEC`` reads lossless's and the row SPEC's tokens per target forward
from an ``eval`` summary (``summary.json``: its ``rows``) or a ``calibrate`` result
(``calibration.json``: ``lossless`` and ``candidates``), with the ratio's 95% interval. The oracle
is the exact replay's (``experiments/gate_analysis.py --k 16,32,64``: its ``replays``), relative to
the lossless of its own replay, since its questions are other ones.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def rows_of(path: Path) -> dict[str, dict]:
    """{spec: row} of an eval summary or a calibrate result."""
    data = json.loads(path.read_text())
    rows = data["rows"] if "rows" in data else [data["lossless"], *data["candidates"]]
    return {r["spec"]: r for r in rows}


def parse_point(text: str) -> dict:
    try:
        k, label, file, spec = text.split(":", 3)
        rows = rows_of(Path(file))
        lossless, judged = rows["lossless"], rows[spec]
    except (ValueError, KeyError, FileNotFoundError) as e:
        raise SystemExit(f"--point {text!r}: give K:LABEL:FILE:SPEC with a lossless row and the row SPEC ({e})")
    return {"k": int(k), "label": label, "spec": spec, "questions": judged["questions"],
            "lossless": lossless["tokens_per_cycle"], "autojudge": judged["tokens_per_cycle"],
            "vs_lossless": judged["vs_lossless"], "vs_lossless_lo": judged["vs_lossless_lo"],
            "vs_lossless_hi": judged["vs_lossless_hi"], "answers_changed": judged["answers_changed"],
            "answer_change_bound": judged["answer_change_bound"]}


def plot(points: list[dict], oracle: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ks = sorted(oracle)
    ax.plot(ks, [oracle[k]["oracle"] / oracle[k]["lossless"] for k in ks], "o--", color="grey",
            label="oracle (exact replay, 200 mined prompts)")
    for label in dict.fromkeys(p["label"] for p in points):
        mine = sorted((p for p in points if p["label"] == label), key=lambda p: p["k"])
        ax.errorbar([p["k"] for p in mine], [p["vs_lossless"] for p in mine],
                    yerr=[[p["vs_lossless"] - p["vs_lossless_lo"] for p in mine],
                          [p["vs_lossless_hi"] - p["vs_lossless"] for p in mine]], fmt="o-", capsize=3,
                    label=f"AutoJudge, {label}")
    ax.axhline(1.0, color="black", lw=0.8, label="lossless at the same K")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel("draft window K")
    ax.set_ylabel("tokens per target forward / lossless's")
    ax.set_title("what the window buys: AutoJudge and the oracle against lossless")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--oracle", type=Path, required=True, help="gate_analysis.py's JSON with replays at each K")
    p.add_argument("--point", action="append", default=[], help="K:LABEL:FILE:SPEC (repeatable)")
    p.add_argument("--out", type=Path, required=True, help="the plot (PNG)")
    p.add_argument("--json", type=Path, default=None, help="the numbers plotted")
    args = p.parse_args(argv)
    replays = json.loads(args.oracle.read_text())["replays"]
    oracle = {int(k.removeprefix("k")): v for k, v in replays.items()}
    points = [parse_point(t) for t in args.point]
    plot(points, oracle, args.out)
    result = {"oracle": {str(k): {**v, "vs_lossless": v["oracle"] / v["lossless"]} for k, v in sorted(oracle.items())},
              "points": points, "command": "python experiments/window_gain.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    for pt in points:
        print(f"K = {pt['k']:>2} {pt['label']}: {pt['autojudge']:.2f} tokens per forward, {pt['vs_lossless']:.3f}x "
              f"[{pt['vs_lossless_lo']:.3f}, {pt['vs_lossless_hi']:.3f}] lossless ({pt['lossless']:.2f}); "
              f"{pt['answers_changed']} of {pt['questions']} answers changed")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
