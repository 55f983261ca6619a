#!/usr/bin/env python3
"""Would a non-linear judge, or more labels, hold a better left tail than the linear judge has now?
Backs notebook/certification.md, "Levers" and "Levers: more labels of the same kind".

    python experiments/judge_model_probe.py --features out/judge_bf16/features.safetensors \\
        --setups DT-DT1-DT2-LS,DD-DT-DT1-DT2-DD1-LS --seeds 7,8,9 \\
        --out docs/results/judge_model_probe_program.json
    python experiments/judge_model_probe.py --features out/judge_bf16/features.safetensors \\
        --setups DT-DT1-DT2-LS --splits prompt --families logistic --train-fractions 0.125,0.25,0.5,0.75,1 \\
        --out docs/results/judge_learning_curve_program.json     # the learning curve

``--features`` is a ``features`` verb's file. For each setup, split (by prompt and by template,
``--val-fraction`` of the groups held out) and seed, probe judges of each model family of
:func:`trtllm_autojudge.judge.probe.fit_model_probe` are fitted on the training rows and scored on
the held-out ones: validation ROC-AUC and the share of harmless mismatches accepted at 0.5 / 1 / 2
/ 5% of the harmful (the left tail, where a certified threshold lives). Printed per seed and as
means over the seeds; ``--out`` writes them as JSON. A probe: the plugin, the CUDA kernel and the
Python rule compute a linear judge, so a gain here would first need another head in all of them.

``--train-fractions`` fits each family on that share of the training groups too (drawn with the
split's seed; the validation groups stay the same), named ``family@share``: a learning curve, which
says what mining more labels of the same kind would buy.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.judge.dataset import FeatureSet  # noqa: E402
from trtllm_autojudge.judge.probe import (MODEL_FAMILIES, TAIL, fit_model_probe, over_seeds,  # noqa: E402
                                          seed_lines, write_result)
from trtllm_autojudge.judge.train import SPLIT_UNITS, split_by_group, split_groups  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--features", type=Path, required=True, action="append",
                   help="a features verb's file (repeatable: the files' rows together, as `train` reads them)")
    p.add_argument("--setups", default="DT-DT1-DT2-LS", help="comma-separated setups (blocks of the file) to compare")
    p.add_argument("--splits", default=",".join(SPLIT_UNITS), help="comma-separated split units: prompt, template")
    p.add_argument("--families", default=",".join(MODEL_FAMILIES), help=f"comma-separated, of {', '.join(MODEL_FAMILIES)}")
    p.add_argument("--seeds", default="7,8,9", help="comma-separated seeds of the split")
    p.add_argument("--val-fraction", type=float, default=0.2)
    p.add_argument("--cs", default="1e-4,3e-4,1e-3,3e-3,1e-2", help="inverse L2 strengths of the logistic judge")
    p.add_argument("--train-fractions", default="1", help="comma-separated shares of the training groups to fit on, "
                                                          "each in (0, 1] (a learning curve)")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    families, splits = args.families.split(","), args.splits.split(",")
    unknown = sorted(set(families) - set(MODEL_FAMILIES)) + sorted(set(splits) - set(SPLIT_UNITS))
    if unknown:
        raise SystemExit(f"unknown {unknown}: --families takes {', '.join(MODEL_FAMILIES)}; "
                         f"--splits takes {', '.join(SPLIT_UNITS)}")
    cs = [float(c) for c in args.cs.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    fractions = [float(f) for f in args.train_fractions.split(",")]
    if not all(0 < f <= 1 for f in fractions):
        raise SystemExit(f"--train-fractions {args.train_fractions}: each share must lie in (0, 1]")
    full = FeatureSet.concat([FeatureSet.load(path) for path in args.features])
    out = {"features": ", ".join(path.name for path in args.features), "labels": full.label_counts(),
           "val_fraction": args.val_fraction, "seeds": seeds, "train_fractions": fractions, "setups": {}}
    print(f"{'setup':<24}{'split':<10}{'judge':<15}{'seed':>6}{'ROC-AUC':>9}  harmless accepted at "
          + " / ".join(f"{s:.1%}" for s in TAIL) + " of the harmful")
    jobs = [(setup, split) for setup in args.setups.split(",") for split in splits]
    for setup, split in tqdm(jobs, desc="probes", unit="split", file=sys.stderr):
        fs = full.select_setup(setup)
        X, y = fs.features.astype(np.float32), fs.labels.astype(np.int64)  # [M, F], [M]
        runs = {}
        groups = split_groups(fs, split)  # [M]
        for seed in seeds:
            train, val = split_by_group(groups, args.val_fraction, seed, split)
            runs[seed] = {}
            for share in fractions:
                part = train & training_share(groups, train, share, seed)  # [M] bool
                runs[seed] |= {f if share == 1 else f"{f}@{share:g}":
                               fit_model_probe(f, X[part], y[part], X[val], y[val], cs, seed) for f in families}
        result = out["setups"].setdefault(setup, {})[split] = over_seeds(runs)
        print("\n".join(seed_lines(f"{setup:<24}{split:<10}", result, 15)))
    write_result(args.out, out)
    return 0


def training_share(groups: np.ndarray, train: np.ndarray, share: float, seed: int) -> np.ndarray:  # [M] int, [M] bool
    """[M] bool: the rows of ``round(share * G)`` of the G training groups (at least one), drawn with ``seed``."""
    train_groups = np.unique(groups[train])
    kept = np.random.default_rng(seed).permutation(train_groups)[:max(1, round(share * train_groups.size))]
    return np.isin(groups, kept)


if __name__ == "__main__":
    sys.exit(main())
