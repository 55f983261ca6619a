#!/usr/bin/env python3
"""How far could an oracle take a chain draft, and what harmless share would a gain goal need? The
model of ``evaluation/oracle_model.py``. Backs notebook/eagle-head.md, "What bounds the 1.3x goal:
the oracle, modelled".

    python experiments/oracle_model.py --replays docs/results/gsm8k-program_oracle_vs_k_bf16.json \\
        --alphas docs/results/eagle_alpha_program_heldout100_stage3.json --depth 5 \\
        --lossless docs/results/gsm8k-program_certify_eagle5-dt_chain5_bf16.json \\
        --labels labels/gsm8k-program_train-v24-seed7_eagle.jsonl.gz --goal 1.3 \\
        --out docs/results/oracle_model_eagle_program.json

- ``--replays`` (``gate_analysis.py``'s output) checks the model where the oracle was replayed
  exactly: for each K, the model's oracle from the replayed lossless tokens per cycle (one alpha at
  every depth) and the harmless share of those records' labels, beside the replayed oracle.
- For the draft under study, two sets of alphas: per depth (``eagle_alpha.py``'s output, the first
  ``--depth``), and one alpha fitted to the lossless tokens per cycle that decoding measured
  (``--lossless``: a ``calibrate`` or ``eval`` JSON, which records K). Each gives the oracle's gain
  at the harmless share of ``--labels`` (and at the top of its 95% interval), the ceiling (every
  draft accepted) and the share ``--goal`` would need.
- ``--longer``: the oracle's gain on longer chains, if the draft drafted them with the fitted alpha
  at every depth (a head trained deeper): where the goal would fall inside the oracle's reach.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.evaluation.certificate import interval  # noqa: E402
from trtllm_autojudge.evaluation.oracle_model import (chain_tokens, constant_alphas, oracle_ratio,  # noqa: E402
                                                      share_needed)
from trtllm_autojudge.judge.probe import write_result  # noqa: E402
from trtllm_autojudge.mining.store import read_records  # noqa: E402


def harmless_share(labels: Path) -> dict:
    """The unimportant labels of a label file, their share and its 95% interval."""
    records = read_records(labels)[0]
    if not records:
        raise SystemExit(f"{labels} holds no mined records: give a label file of `mine`")
    flags = [important for r in records for _, important, _, _ in r["labels"]]
    harmless = len(flags) - sum(flags)
    return {"labels": len(flags), "harmless": harmless, "share": harmless / len(flags),
            "interval": interval(harmless, len(flags))}


def replay_check(path: Path) -> list[dict]:
    """Model against exact replays, per K of a ``gate_analysis.py`` result."""
    result = json.loads(path.read_text())
    kinds = result["labels_by_kind"].values()
    harmless = sum(k["unimportant"] for k in kinds)
    share = harmless / (harmless + sum(k["important"] for k in kinds))
    rows = []
    for name, replay in result["replays"].items():
        k = int(name.lstrip("k"))
        alphas = constant_alphas(replay["lossless"], k)
        rows.append({"k": k, "harmless_share": share, "lossless": replay["lossless"],
                     "replayed_oracle_ratio": replay["oracle"] / replay["lossless"],
                     "model_oracle_ratio": oracle_ratio(alphas, share)})
    return rows


def draft_row(alphas: np.ndarray, share: dict, goal: float) -> dict:
    """The oracle's gain under ``alphas`` ([D]) at the labels' harmless share, and what ``goal`` needs."""
    ceiling = oracle_ratio(alphas, 1.0)
    return {"alphas": [round(float(a), 4) for a in alphas], "lossless_tokens_per_cycle": chain_tokens(alphas),
            "oracle_ratio": oracle_ratio(alphas, share["share"]),
            "oracle_ratio_at_share_interval_top": oracle_ratio(alphas, share["interval"][1]),
            "ceiling_ratio": ceiling, "goal": goal,
            "share_needed_for_goal": share_needed(alphas, goal) if goal <= ceiling else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replays", type=Path, required=True, help="gate_analysis.py's JSON: exact oracle replays")
    p.add_argument("--alphas", type=Path, required=True, help="eagle_alpha.py's JSON: alpha per depth")
    p.add_argument("--depth", type=int, required=True, help="chain length: the first DEPTH alphas")
    p.add_argument("--lossless", type=Path, required=True,
                   help="a calibrate or eval JSON of the same chain: its measured lossless tokens per cycle")
    p.add_argument("--labels", type=Path, required=True, help="labels mined along the draft's mismatches")
    p.add_argument("--goal", type=float, default=1.3, help="the gain over lossless asked of a judge")
    p.add_argument("--longer", default="8,12,16", help="longer chains to model with the fitted alpha ('' for none)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    depths = json.loads(args.alphas.read_text())["depths"]
    if args.depth > len(depths):
        raise SystemExit(f"{args.alphas} has alphas for {len(depths)} depths: give --depth {len(depths)} or less")
    measured = json.loads(args.lossless.read_text())
    if measured.get("k") != args.depth:
        raise SystemExit(f"{args.lossless} decoded chains of {measured.get('k')} (its 'k'), not --depth {args.depth}")
    share = harmless_share(args.labels)
    alphas = {"per depth (alpha measured)": np.array([d["alpha"] for d in depths[: args.depth]]),
              "one alpha (fitted to decoding's lossless)": constant_alphas(measured["lossless"]["tokens_per_cycle"],
                                                                            args.depth)}
    fitted = float(alphas["one alpha (fitted to decoding's lossless)"][0])
    longer = {int(k): oracle_ratio(np.full(int(k), fitted), share["share"]) for k in args.longer.split(",") if k.strip()}
    out = {"harmless": share, "replay_check": replay_check(args.replays),
           "draft": {name: draft_row(a, share, args.goal) for name, a in alphas.items()},
           "longer_chains_fitted_alpha": longer,
           "command": shlex.join(["python", "experiments/oracle_model.py", *(argv or sys.argv[1:])])}
    print(f"harmless share of {share['labels']} labels: {share['share']:.3f} "
          f"[{share['interval'][0]:.3f}, {share['interval'][1]:.3f}]")
    for r in out["replay_check"]:
        print(f"check K = {r['k']:>3}: replayed oracle {r['replayed_oracle_ratio']:.3f}x, "
              f"model {r['model_oracle_ratio']:.3f}x (harmless share {r['harmless_share']:.3f})")
    for name, r in out["draft"].items():
        needed = "beyond the ceiling" if r["share_needed_for_goal"] is None else f"{r['share_needed_for_goal']:.3f}"
        print(f"{name}: lossless {r['lossless_tokens_per_cycle']:.2f} tokens/cycle, oracle {r['oracle_ratio']:.3f}x "
              f"({r['oracle_ratio_at_share_interval_top']:.3f}x at the share's 95% top), ceiling {r['ceiling_ratio']:.3f}x; "
              f"{args.goal}x needs a harmless share of {needed}")
    if longer:
        print(f"longer chains at alpha {fitted:.3f}: " + ", ".join(f"K = {k}: oracle {r:.3f}x" for k, r in longer.items()))
    write_result(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
