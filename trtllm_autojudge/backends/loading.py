"""Load a draft/target pair from command-line names: the embedded default or any HF folder.

``--target tuned|raw|PATH``, ``--draft embedded|PATH`` and ``--draft-vocab auto|embedded|none|FILE`` (a
draft LM head over a vocabulary subset, see :mod:`.vocab_subset`; auto: the task's shipped subset for the embedded draft). A PATH is a local transformers
checkpoint folder (no hub downloads: ``local_files_only``); its tokenizer must match the target's.
``--dtype auto|float32|bfloat16`` (see :mod:`.dtype`): models are loaded and adapted in float32,
then cast, so a bf16 pair is the rounding of the float32 one; bf16 linears on a CPU are then packed
(:mod:`.cpu_linear`: bit-identical outputs, about twice the weight bandwidth), and each layer's q/k/v
and gate/up projections stacked into one packed matmul each (:mod:`.sibling_linear`: bit-identical too).
Masked multi-token forwards on a CPU read the KV heads in place instead of copying them per query
group (:mod:`.gqa_attention`: bit-identical as well).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..dtype_record import check_artifact_dtype
from .cpu_linear import pack_linears
from .gqa_attention import use_gqa_sdpa
from .sibling_linear import fuse_siblings
from .dtype import CHOICES, dtype_name, resolve_dtype
from .transformers_backend import TransformersLM

EMBEDDED_TARGETS = ("tuned", "raw")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("models")
    g.add_argument("--target", default="tuned",
                   help="embedded target 'tuned' (GSM8K adapter, default) or 'raw', or a local HF checkpoint folder")
    g.add_argument("--draft", default="embedded", help="'embedded' (the shipped draft) or a local HF checkpoint folder")
    g.add_argument("--draft-vocab", default="auto",
                   help="draft LM head over a vocabulary subset: 'embedded' (the task's shipped subset, for the embedded "
                        "draft), a subset file (build_scripts/make_draft_vocab.py), 'none' (the full head) or 'auto' "
                        "(default: embedded for the embedded draft, else none)")
    g.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    g.add_argument("--dtype", default="auto", choices=CHOICES,
                   help="compute dtype (default auto: bfloat16 where the CPU/GPU computes it natively, else float32)")
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


def load_pair(args: argparse.Namespace, task=None):
    """(target, draft, tokenizer) from the arguments of :func:`add_model_args`.

    The embedded ``tuned`` target and ``embedded`` draft are the ones shipped for ``task`` (a
    :class:`..tasks.Task`; default the worded GSM8K task's).
    """
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        dtype = resolve_dtype(getattr(args, "dtype", "auto"), args.device)
    except ValueError as e:
        raise SystemExit(f"--dtype: {e}") from None
    if args.target in EMBEDDED_TARGETS:
        from .embedded import load_target

        adapter = task.shipped_model_path("adapter") if task is not None and args.target == "tuned" else None
        target, tokenizer = load_target(args.target, adapter=adapter)  # float32: the draft is cut and adapted before the cast
        target.model.to(args.device)
    else:
        target, tokenizer = _hf(args.target, args.device)
    if args.draft == "embedded":
        if args.target not in EMBEDDED_TARGETS:
            raise SystemExit("--draft embedded is made for the embedded target: give --draft PATH for your own target")
        from .embedded_draft import load_draft

        draft, _ = load_draft(target, **({"path": task.shipped_model_path("draft")} if task is not None else {}))
        draft.model.to(args.device)
    else:
        draft, _ = _hf(args.draft, args.device)
    target.model.to(dtype)  # embedded: also the embeddings and LM head the draft shares
    draft.model.to(dtype)
    for lm in (target, draft):
        for what, made_in in lm.artifact_dtypes.items():
            check_artifact_dtype(what, made_in, dtype_name(dtype))
    if draft.vocab_size != target.vocab_size:
        raise SystemExit(f"draft vocab {draft.vocab_size} != target vocab {target.vocab_size}: the pair must share a tokenizer")
    _use_draft_vocab(draft, getattr(args, "draft_vocab", "none"), args.draft, tokenizer, task)
    pack_linears(target.model, draft.model, draft.head)  # bf16 on CPU: weights laid out once (same outputs)
    fuse_siblings(target.model, draft.model)  # then q/k/v and gate/up as one matmul each (same outputs)
    use_gqa_sdpa(target.model, draft.model)  # masked CPU forwards: no copy of the KV heads (same outputs)
    return target, draft, tokenizer


def _use_draft_vocab(draft: TransformersLM, choice: str, draft_name: str, tokenizer, task) -> None:
    """Give the draft a vocabulary-subset head (after the cast: the head copies rows in the draft's dtype)."""
    from ..tasks import load_task
    from .vocab_subset import SubsetHead, load_subset

    if choice == "auto":
        choice = "embedded" if draft_name == "embedded" else "none"
    if choice == "none":
        return
    if choice == "embedded":
        if draft_name != "embedded":
            raise SystemExit("--draft-vocab embedded is made for the embedded draft: give --draft-vocab FILE for yours")
        choice = (task or load_task("gsm8k-cot")).shipped_model_path("draft_vocab")
    try:
        draft.use_head(SubsetHead(draft.model.lm_head, load_subset(choice, tokenizer, draft.vocab_size)))
    except (OSError, ValueError) as e:
        raise SystemExit(f"--draft-vocab: {e}") from None
