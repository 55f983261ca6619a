"""Would more labels make a better judge? The judge's learning curve and ROC left tail, by
cross-validation over prompts. Backs notebook/program-judge-label-sets.md, "The judge (2026-12-01,
second version)", and notebook/program-draft30-judges.md, "The same judge on 2.2x the labels" and
"The judge on 9,890 labels: the left tail stops moving".

    python experiments/judge_curve.py --features out/judge_more/features.safetensors \
        --out docs/results/judge_program_learning_curve.json

The prompts of a feature set are cut into --folds folds. For every fold, a judge is trained
(StandardScaler + L2 logistic regression, as :mod:`trtllm_autojudge.judge.train` does) on a
--fractions share of the OTHER folds' prompts and scores its fold, so every label is scored once
by a judge that never saw its prompt. Reported per setup, C and fraction: the pooled ROC-AUC of
those scores. At the full fraction and --tail-c, the left tail of the ROC curve too: the share of
unimportant mismatches a threshold accepts when it lets through a given share of important ones,
which is what decides whether a judge can keep answers unchanged (docs/results.md, "Judge quality").

``--extra-features F --extra-labels L --labels L0`` asks whether another label set helps: labels
mined with another draft (their features extracted through THIS pair, ``features --labels L``),
on the same questions or others. Its rows join every fold's training side, except the rows of
questions in the held-out fold (matched by record id through the two label files), and rows are
still scored on the main set only; each setup is reported twice, alone and as ``SETUP+extra``.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtllm_autojudge.judge.dataset import FeatureSet  # noqa: E402
from trtllm_autojudge.mining.store import read_records  # noqa: E402

TAIL_RATES = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1)  # important-accept rates of the left tail


def numbers(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


@dataclass
class Extra:
    """Rows that only ever train: another label set's features and labels, and the question (record
    id) of each row, beside the question of each main prompt."""

    features: np.ndarray  # [N, F] float16, the main set's setup
    labels: np.ndarray  # [N] int8
    question: np.ndarray  # [N] str: record id of each row
    main_question: np.ndarray  # [P] str: record id of the main set's prompt_index p


def record_ids(labels: Path) -> np.ndarray:
    """[P] record id of each record of a label file, in file order (a feature set's prompt_index)."""
    return np.array([str(r["id"]) for r in read_records(labels)[0]])


def cross_validated_scores(fs: FeatureSet, folds: list[np.ndarray], C: float, fraction: float,
                           extra: Extra | None = None) -> tuple[np.ndarray, int]:
    """[M] probability of 'important' for every row, each from a judge trained without its fold
    (nor ``extra``'s rows of that fold's questions); and the mean number of training rows."""
    scores, sizes = np.zeros(fs.num_rows), []
    prompts = np.unique(fs.prompt_index)
    for i, fold in enumerate(folds):
        held = np.isin(fs.prompt_index, fold)
        rest = np.setdiff1d(prompts, fold)
        kept = np.random.default_rng(i).permutation(rest)[:max(2, round(fraction * rest.size))]
        train = np.isin(fs.prompt_index, kept)
        X, y = fs.features[train], fs.labels[train]  # [M_train, F], [M_train]
        if extra is not None:
            free = ~np.isin(extra.question, extra.main_question[fold])  # [N]: not a held-out question
            X, y = np.concatenate([X, extra.features[free]]), np.concatenate([y, extra.labels[free]])
        scaler = StandardScaler()
        X = scaler.fit_transform(X.astype(np.float32))  # [M_train (+ N_free), F]
        model = LogisticRegression(C=C, max_iter=3000).fit(X, y)
        scores[held] = model.predict_proba(scaler.transform(fs.features[held].astype(np.float32)))[:, 1]
        sizes.append(int(X.shape[0]))
    return scores, round(float(np.mean(sizes)))


def left_tail(scores: np.ndarray, labels: np.ndarray) -> list[dict]:
    """Unimportant-accept rate of the threshold that accepts each rate of TAIL_RATES of the important rows."""
    important = np.sort(scores[labels == 1])
    rows = []
    for rate in TAIL_RATES:
        threshold = important[int(np.floor(rate * important.size))]  # accept score < threshold
        rows.append({"important_accept": rate, "unimportant_accept": round(float((scores[labels == 0] < threshold).mean()), 4)})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--features", type=Path, required=True, help="feature-set file (from `features` or make_judge.py)")
    p.add_argument("--setups", default="DT,DD-DT")
    p.add_argument("--cs", type=numbers, default=[3e-4, 1e-3, 3e-3], help="inverse L2 strengths")
    p.add_argument("--fractions", type=numbers, default=[0.125, 0.25, 0.5, 1.0],
                   help="shares of the other folds' prompts to train on")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--tail-c", type=float, default=1e-3, help="C of the left-tail rows")
    p.add_argument("--seed", type=int, default=0, help="seed of the fold assignment")
    p.add_argument("--out", type=Path, default=None, help="JSON to write (default: print only)")
    p.add_argument("--labels", type=Path, default=None, help="the label file of --features (with --extra-features)")
    p.add_argument("--extra-features", type=Path, default=None,
                   help="another label set's features through the same pair: training rows only (module docstring)")
    p.add_argument("--extra-labels", type=Path, default=None, help="the label file of --extra-features")
    args = p.parse_args(argv)
    full = FeatureSet.load(args.features)
    prompts = np.unique(full.prompt_index)
    if (args.extra_features is None) != (args.extra_labels is None) or (args.extra_features and args.labels is None):
        raise SystemExit("--extra-features needs --extra-labels (its label file) and --labels (the label file of --features)")
    extra_set = FeatureSet.load(args.extra_features) if args.extra_features else None
    if extra_set is not None:
        main_ids, extra_ids = record_ids(args.labels), record_ids(args.extra_labels)
        for ids, fs, name in ((main_ids, full, "--labels"), (extra_ids, extra_set, "--extra-labels")):
            if ids.size <= fs.prompt_index.max():
                raise SystemExit(f"{name} holds {ids.size} records, its feature set names prompt "
                                 f"{fs.prompt_index.max()}: pass the label file the features were extracted from")
    if not 2 <= args.folds <= prompts.size:
        raise SystemExit(f"--folds must lie in [2, {prompts.size}] (the feature set's prompts), got {args.folds}")
    if any(not 0 < f <= 1 for f in args.fractions):
        raise SystemExit(f"--fractions must lie in (0, 1], got {args.fractions}")
    folds = np.array_split(np.random.default_rng(args.seed).permutation(prompts), args.folds)
    result = {"features": str(args.features), "labels": full.num_rows, "important": int(full.labels.sum()),
              "prompts": int(prompts.size), "folds": args.folds, "curve": [], "tail": {},
              "command": "python experiments/judge_curve.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    for setup in args.setups.split(","):
        fs = full.select_setup(setup)
        variants = [(setup, None)]
        if extra_set is not None:
            ex = extra_set.select_setup(setup)
            variants.append((setup + "+extra", Extra(ex.features, ex.labels, extra_ids[ex.prompt_index], main_ids)))
        for name, extra in variants:
            for C in args.cs:
                for fraction in args.fractions:
                    scores, size = cross_validated_scores(fs, folds, C, fraction, extra)
                    auc = round(float(roc_auc_score(fs.labels, scores)), 4)
                    result["curve"].append({"setup": name, "C": C, "train_fraction": fraction, "train_labels": size,
                                            "cv_roc_auc": auc})
                    print(f"{name:<12} C {C:<7g} {size:6d} training labels: cross-validated ROC-AUC {auc:.4f}", flush=True)
                    if fraction == 1.0 and C == args.tail_c:
                        result["tail"][name] = left_tail(scores, fs.labels)
    for setup, rows in result["tail"].items():
        print(f"{setup} left tail (C {args.tail_c:g}): " + ", ".join(
            f"{r['important_accept']:.1%} important -> {r['unimportant_accept']:.1%} unimportant" for r in rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
