"""`trtllm-autojudge features`: hidden-state features of mined labels, as a FeatureSet file."""
from __future__ import annotations

import argparse

from ..backends.loading import add_model_args, load_pair
from .features import ALL_BLOCKS, extract_features
from .store import read_records


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="trtllm-autojudge features", description=__doc__)
    p.add_argument("--labels", required=True, help="label file from `trtllm-autojudge mine`")
    p.add_argument("--out", required=True, help="feature file (safetensors)")
    p.add_argument("--setup", default=ALL_BLOCKS, help=f"blocks to store (default {ALL_BLOCKS}: train can select any)")
    p.add_argument("--task", default="gsm8k")
    add_model_args(p)
    args = p.parse_args(argv)
    records, _problems = read_records(args.labels)
    if not records:
        raise SystemExit(f"{args.labels} holds no readable records")
    target, draft, _ = load_pair(args)
    fs = extract_features(target, draft, records, args.setup, task=args.task)
    fs.save(args.out)
    counts = fs.label_counts()
    print(f"wrote {args.out}: {len(fs.labels)} labels ({counts}), setup {args.setup}")
    return 0
