"""`trtllm-autojudge features`: hidden-state features of mined labels, as a FeatureSet file."""
from __future__ import annotations

import argparse

from ..decoding.loading import is_eagle_draft
from ..models.loading import add_model_args, load_pair
from ..tasks import add_task_args, task_from_args
from .features import ALL_BLOCKS, extract_features
from .store import read_records


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="trtllm-autojudge features", description=__doc__)
    p.add_argument("--labels", required=True, help="label file from `trtllm-autojudge mine`")
    p.add_argument("--out", required=True, help="feature file (safetensors)")
    p.add_argument("--setup", default=ALL_BLOCKS, help=f"blocks to store (default {ALL_BLOCKS}: train can select any)")
    add_task_args(p)  # recorded in the feature file (and the judge trained on it)
    add_model_args(p)
    args = p.parse_args(argv)
    records, _problems = read_records(args.labels)
    if not records:
        raise SystemExit(f"{args.labels} holds no readable records")
    task = task_from_args(args)
    if is_eagle_draft(args.draft):  # before loading the models: a refusal costs nothing
        raise SystemExit(f"features --draft {args.draft}: labels mined along an EAGLE head's drafts take their "
                         f"target-only blocks (DT, TT) from the target alone: give --draft embedded (or the draft "
                         f"model of your pair) with --setup DT; the lookahead blocks (DT1, DT2, LS) follow the "
                         f"drafter's own continuation, which this command computes for a draft model only")
    target, draft, _ = load_pair(args, task)
    fs = extract_features(target, draft, records, args.setup, task=task.name)
    fs.save(args.out)
    counts = fs.label_counts()
    print(f"wrote {args.out}: {len(fs.labels)} labels ({counts}), setup {args.setup}")
    return 0
