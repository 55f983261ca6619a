#!/usr/bin/env python3
"""Which labels make the best judge for one draft's mismatches: its own, another draft's, or both?
Backs notebook/eagle-head.md, "A judge for the head's drafts".

    python experiments/judge_label_sources.py --validate-on eagle=out/features_eagle.safetensors \\
        --other archive=out/judge_bf16/features.safetensors --setups DT,DT-DT1-DT2-LS --seeds 7,8,9 \\
        --out docs/results/judge_label_sources_eagle_program.json

A label is the target's answer with and without one swap, so a target-only judge (no DD blocks)
can learn from any draft's labels; but each draft's mismatches are its own mix. For each setup and
seed the prompts of ``--validate-on`` are split (``--val-fraction`` of them held out), and probe
judges (:mod:`trtllm_autojudge.judge.probe`) are fitted on: its training prompts alone, each
``--other`` set alone, and all of them together. Every one is scored on the same held-out prompts
of ``--validate-on``: validation ROC-AUC and the harmless share accepted at 0.5 / 1 / 2 / 5% of the
harmful (the left tail, where a certified threshold lives). Printed per seed and as means over the
seeds; ``--out`` writes them as JSON.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.judge.dataset import FeatureSet  # noqa: E402
from trtllm_autojudge.judge.head import parse_setup  # noqa: E402
from trtllm_autojudge.judge.probe import TAIL, fit_probe, over_seeds, seed_lines, write_result  # noqa: E402
from trtllm_autojudge.judge.train import split_by_group  # noqa: E402


def named_path(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"give NAME=FEATURES.safetensors, got {text!r}")
    return name, Path(path)


def compare(target: FeatureSet, others: dict[str, FeatureSet], own: str, setup: str, seed: int,
            val_fraction: float, cs: list[float]) -> dict[str, dict]:
    """Probe judges of ``setup`` trained on each label source and on all, scored on held-out prompts of ``target``."""
    t = target.select_setup(setup)
    o = {name: fs.select_setup(setup) for name, fs in others.items()}
    train, val = split_by_group(t.prompt_index, val_fraction, seed)
    sources = {own: (t.features[train], t.labels[train]), **{name: (fs.features, fs.labels) for name, fs in o.items()}}
    sources["all"] = (np.concatenate([x for x, _ in sources.values()]), np.concatenate([y for _, y in sources.values()]))
    X_val, y_val = t.features[val].astype(np.float32), t.labels[val].astype(np.int64)
    return {name: fit_probe(X.astype(np.float32), y.astype(np.int64), X_val, y_val, cs) for name, (X, y) in sources.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--validate-on", type=named_path, required=True, metavar="NAME=PATH",
                   help="the features verb's file of the draft whose mismatches the judge is for")
    p.add_argument("--other", type=named_path, action="append", required=True, metavar="NAME=PATH",
                   help="features of other labels (another draft's), extracted with the same target and dtype")
    p.add_argument("--setups", default="DT", help="comma-separated target-only setups to compare")
    p.add_argument("--seeds", default="7,8,9", help="comma-separated seeds of the prompt split")
    p.add_argument("--val-fraction", type=float, default=0.25)
    p.add_argument("--cs", default="1e-4,3e-4,1e-3,3e-3,1e-2,3e-2", help="inverse L2 strengths to try")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    setups = args.setups.split(",")
    drafted = [s for s in setups if any(b.startswith("DD") for b in parse_setup(s))]
    if drafted:
        raise SystemExit(f"setups {drafted} read the draft's hidden states, which differ between drafts: "
                         f"compare target-only setups (DT, DT-DT1-DT2-LS, ...)")
    own, path = args.validate_on
    target = FeatureSet.load(path)
    others = {name: FeatureSet.load(p) for name, p in args.other}
    for name, fs in others.items():
        if (fs.target_model, fs.dtype, fs.target_hidden) != (target.target_model, target.dtype, target.target_hidden):
            raise SystemExit(f"--other {name}: features of {fs.target_model} in {fs.dtype}, but --validate-on {own} "
                             f"has {target.target_model} in {target.dtype}: extract both with the same target and dtype")
    cs = [float(c) for c in args.cs.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    out = {"validate_on": {"name": own, "labels": target.label_counts(), "prompts": int(np.unique(target.prompt_index).size)},
           "other": {name: {"labels": fs.label_counts(), "prompts": int(np.unique(fs.prompt_index).size)}
                     for name, fs in others.items()},
           "val_fraction": args.val_fraction, "seeds": seeds, "setups": {}}
    header = f"{'setup':<16}{'trained on':<12}{'seed':>6}{'ROC-AUC':>9}  harmless accepted at " + \
        " / ".join(f"{s:.1%}" for s in TAIL) + " of the harmful"
    print(header)
    for setup in setups:
        runs = {seed: compare(target, others, own, setup, seed, args.val_fraction, cs) for seed in seeds}
        out["setups"][setup] = over_seeds(runs)
        print("\n".join(seed_lines(f"{setup:<16}", out["setups"][setup], 12)))
    write_result(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
