#!/usr/bin/env python3
"""Do token-class features help the judge? Validation ROC-AUC and left tail with and without them.
Backs notebook/certification.md, "Levers".

    python experiments/token_class_probe.py --labels labels/gsm8k-program_train-v24-seed7_draft30.jsonl.gz \\
        --features out/judge_bf16/features.safetensors --setup DD-DT-DT1-DT2-DD1-LS \\
        --out docs/results/token_class_probe_program.json

``--features`` is the ``features`` verb's file of the same ``--labels`` (rows in label order). Each
label gets the 0/1 columns of :mod:`trtllm_autojudge.judge.token_class` (comment or code line; digit,
word, operator, question word, for the draft's and the target's token). For each validation split
(by prompt and by template, ``--seed``, ``--val-fraction``), three judges are fitted as ``train``
fits one (StandardScaler, L2 logistic regression, C by validation ROC-AUC over ``--cs``): the hidden
setup alone, the token classes alone, and both. Printed and written: validation ROC-AUC and the share
of harmless validation mismatches accepted at 0.5 / 1 / 2 / 5% of the harmful ones (the left tail,
where a certified threshold lives). A probe: the runtimes' judges read hidden states only, so a gain
here would first need the token classes in the rule and the engine.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.judge.dataset import FeatureSet  # noqa: E402
from trtllm_autojudge.judge.probe import TAIL, fit_probe, tail_text, write_result  # noqa: E402
from trtllm_autojudge.judge.token_class import COLUMNS, question_words, token_class_features  # noqa: E402
from trtllm_autojudge.judge.train import split_by_group, split_groups  # noqa: E402
from trtllm_autojudge.mining.store import read_records  # noqa: E402


def question_of(tokenizer, prompt_ids: list[int]) -> str:
    """The user turn of a chat prompt (the whole prompt when it has no user turn)."""
    text = tokenizer.decode(prompt_ids)
    return text.rsplit("user\n", 1)[-1].split("<|im_end|>")[0]


def class_rows(tokenizer, records: list[dict]) -> np.ndarray:  # [M, C] float32, rows in label order
    rows = []
    for rec in tqdm(records, desc="token classes", unit="prompt", file=sys.stderr):
        question = question_words(question_of(tokenizer, rec["prompt_ids"]))
        for pos, _important, target, draft in rec["labels"]:
            rows.append(token_class_features(tokenizer, rec["final_ids"], int(pos), int(draft), int(target), question))
    return np.stack(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--labels", type=Path, required=True, help="the mined labels the features were extracted from")
    p.add_argument("--features", type=Path, required=True, help="the features verb's file of --labels")
    p.add_argument("--setup", default="DD-DT-DT1-DT2-DD1-LS", help="hidden-state blocks of the judge")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--val-fraction", type=float, default=0.2)
    p.add_argument("--cs", default="1e-4,3e-4,1e-3,3e-3,1e-2", help="inverse L2 strengths to try")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    from trtllm_autojudge.models.embedded import load_tokenizer

    fs = FeatureSet.load(args.features).select_setup(args.setup)
    records, _ = read_records(args.labels, required=("prompt_ids", "final_ids", "labels"))
    tc = class_rows(load_tokenizer(), records)  # [M, C]
    if tc.shape[0] != fs.num_rows:
        raise SystemExit(f"{args.labels} holds {tc.shape[0]} labels, {args.features} {fs.num_rows} rows: "
                         f"give the features file extracted from these labels")
    cs = [float(c) for c in args.cs.split(",")]
    y = fs.labels.astype(np.int64)
    hidden = fs.features.astype(np.float32)
    inputs = {"hidden": hidden, "token classes": tc, "hidden + token classes": np.concatenate([hidden, tc], 1)}
    out = {"labels": args.labels.name, "setup": args.setup, "seed": args.seed, "val_fraction": args.val_fraction,
           "columns": list(COLUMNS), "important_share": {c: float(y[tc[:, i] == 1].mean()) if tc[:, i].any() else None
                                                        for i, c in enumerate(COLUMNS)}, "splits": {}}
    for split in ("prompt", "template"):
        train, val = split_by_group(split_groups(fs, split), args.val_fraction, args.seed, split)
        out["splits"][split] = {name: fit_probe(X[train], y[train], X[val], y[val], cs) for name, X in inputs.items()}
    print("share labelled important among the labels of each token class:")
    for c, share in out["important_share"].items():
        print(f"  {c:<20} {'-' if share is None else f'{share:.1%}'}")
    print(f"\n{'split':<10}{'judge input':<24}{'ROC-AUC':>8}  harmless accepted at " + " / ".join(f"{s:.1%}" for s in TAIL)
          + " of the harmful")
    for split, fits in out["splits"].items():
        for name, r in fits.items():
            print(f"{split:<10}{name:<24}{r['val_roc_auc']:>8.3f}  {tail_text(r)}")
    write_result(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
