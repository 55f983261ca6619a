"""Entry points of ``trtllm-autojudge train`` and ``trtllm-autojudge export``.

``main_train(argv)`` and ``main_export(argv)`` parse their own arguments (``argv`` without the
verb) and return a process exit code, so the package CLI can dispatch to them directly.
"""
from __future__ import annotations

import argparse
import sys

from .dataset import FeatureSet
from .export import FORMATS, export_judge, unsupported_reason
from .frontier import DEFAULT_MAX_IMPORTANT_ACCEPT
from .head import JudgeHead
from .train import SPLIT_UNITS, train_judge


def _c_grid(text: str) -> list[float]:
    try:
        grid = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--c-grid takes comma-separated numbers, e.g. 1e-3,1e-2,0.1; got {text!r}")
    if not grid or any(c <= 0 for c in grid):
        raise argparse.ArgumentTypeError(f"--c-grid values must be positive, got {text!r}")
    return grid


def train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trtllm-autojudge train",
                                description="Train a judge head (StandardScaler + logistic regression) on a feature-set file.")
    p.add_argument("--features", required=True, action="append",
                   help="feature-set file (safetensors) from feature extraction; repeat it to train on several "
                        "(e.g. mined and on-policy labels: prompts stay apart)")
    p.add_argument("--setup", default=None,
                   help="feature setup of the judge: DT, DD-DT, ... (default: all blocks of the feature file)")
    p.add_argument("--out", required=True, help="judge file to write (safetensors)")
    p.add_argument("--seed", type=int, default=0, help="seed of the train/validation split by prompt (default 0)")
    p.add_argument("--c-grid", type=_c_grid, default=None,
                   help="comma-separated C values to try (default: 1e-7 ... 3e-1 in half-decades, 1, 3, 10, 50, 100)")
    p.add_argument("--max-important-accept", type=float, default=DEFAULT_MAX_IMPORTANT_ACCEPT,
                   help="default-threshold rule: the largest threshold whose validation important-accept rate "
                        f"(accepted important / all important) is at most this (default {DEFAULT_MAX_IMPORTANT_ACCEPT})")
    p.add_argument("--val-fraction", type=float, default=0.1, help="fraction of prompts (or templates) held out (default 0.1)")
    p.add_argument("--split-by", choices=SPLIT_UNITS, default="prompt",
                   help="validation split unit: prompt (default; variants of one template on both sides) or template "
                        "(validation measures templates never trained on; needs features from labels with templates)")
    p.add_argument("--refit-all", action="store_true",
                   help="after choosing C on the validation split, fit the saved head again on every row")
    p.add_argument("--drop-nonfinite", action="store_true",
                   help="drop feature rows holding NaN/inf (they are counted and reported) instead of failing")
    p.add_argument("--plot", default=None, help="also write the validation frontier as a PNG to this path")
    return p


def main_train(argv: list[str] | None = None) -> int:
    args = train_parser().parse_args(argv)
    try:
        fs = FeatureSet.concat([FeatureSet.load(path) for path in args.features])
        kwargs = {} if args.c_grid is None else {"c_grid": args.c_grid}
        head, report = train_judge(fs, args.setup, seed=args.seed, max_important_accept=args.max_important_accept,
                                   val_fraction=args.val_fraction, split_by=args.split_by, refit_all=args.refit_all,
                                   drop_nonfinite=args.drop_nonfinite, **kwargs)
    except (ValueError, FileNotFoundError) as e:
        print(f"trtllm-autojudge train: {e}", file=sys.stderr)
        return 2
    if report.dropped_nonfinite_rows:
        print(f"dropped {report.dropped_nonfinite_rows} feature rows holding NaN/inf")
    print(report.summary())
    head.save(args.out)
    print(f"wrote judge {args.out}")
    if args.plot:
        from .plot import plot_frontier

        plot_frontier(report.frontier, args.plot, report.threshold,
                      title=f"{head.setup} judge, validation ROC-AUC {report.val_roc_auc:.3f}")
        print(f"wrote frontier plot {args.plot}")
    return 0


def export_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trtllm-autojudge export",
                                description="Export a judge file: TensorRT plugin fields, ONNX graph, vLLM JudgeConfig JSON.")
    p.add_argument("--judge", required=True, help="judge file (safetensors) from trtllm-autojudge train")
    p.add_argument("--out-dir", required=True, help="folder for the exported files")
    p.add_argument("--formats", default=None,
                   help=f"comma-separated subset of {','.join(FORMATS)} (default: every format the judge's setup supports)")
    return p


def main_export(argv: list[str] | None = None) -> int:
    args = export_parser().parse_args(argv)
    formats = None if args.formats is None else [f.strip() for f in args.formats.split(",") if f.strip()]
    try:
        head = JudgeHead.load(args.judge)
        written = export_judge(head, args.out_dir, formats)
    except (ValueError, FileNotFoundError) as e:
        print(f"trtllm-autojudge export: {e}", file=sys.stderr)
        return 2
    for fmt, path in written.items():
        print(f"{fmt:>6}: {path}")
    for fmt in FORMATS:
        if fmt not in written and formats is None:
            print(f"{fmt:>6}: skipped: {unsupported_reason(head, fmt)}")
    return 0
