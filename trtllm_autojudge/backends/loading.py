"""Load a draft/target pair from command-line names: the embedded default or any HF folder.

``--target tuned|raw|PATH`` and ``--draft embedded|PATH``. A PATH is a local transformers
checkpoint folder (no hub downloads: ``local_files_only``); its tokenizer must match the target's.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .transformers_backend import TransformersLM

EMBEDDED_TARGETS = ("tuned", "raw")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("models")
    g.add_argument("--target", default="tuned",
                   help="embedded target 'tuned' (GSM8K adapter, default) or 'raw', or a local HF checkpoint folder")
    g.add_argument("--draft", default="embedded", help="'embedded' (the shipped draft) or a local HF checkpoint folder")
    g.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")


def _hf(path: str, device: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(path)
    if not folder.is_dir():
        raise SystemExit(f"{path!r} is neither an embedded model name nor a local checkpoint folder")
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32).to(device)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else None
    return TransformersLM(model, eos, folder.name), tokenizer


def load_pair(args: argparse.Namespace):
    """(target, draft, tokenizer) from the arguments of :func:`add_model_args`."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.target in EMBEDDED_TARGETS:
        from .embedded import load_target

        target, tokenizer = load_target(args.target)
        target.model.to(args.device)
    else:
        target, tokenizer = _hf(args.target, args.device)
    if args.draft == "embedded":
        if args.target not in EMBEDDED_TARGETS:
            raise SystemExit("--draft embedded is made for the embedded target: give --draft PATH for your own target")
        from .embedded_draft import load_draft

        draft, _ = load_draft(target)
        draft.model.to(args.device)
    else:
        draft, _ = _hf(args.draft, args.device)
    if draft.vocab_size != target.vocab_size:
        raise SystemExit(f"draft vocab {draft.vocab_size} != target vocab {target.vocab_size}: the pair must share a tokenizer")
    return target, draft, tokenizer
