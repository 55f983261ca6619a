"""Load a draft/target pair from command-line names: the embedded default or any HF folder.

``--target tuned|raw|PATH``, ``--draft embedded|FILE.safetensors|eagle|eagle:HEAD|PATH`` and ``--draft-vocab auto|embedded|none|FILE`` (a
draft LM head over a vocabulary subset, see :mod:`.vocab_subset`; auto: the task's shipped subset for an embedded-style draft). A FILE.safetensors is a draft file of this
project for the embedded tuned target (``build_scripts/train_draft.py --out``: layer cut + LoRA), to
compare drafts without replacing the shipped one. ``eagle`` / ``eagle:HEAD`` name an EAGLE head,
which :func:`..decoding.loading.load_pair` loads (with :func:`load_target_model` for the target
here). A PATH is a local transformers
checkpoint folder (no hub downloads: ``local_files_only``); its tokenizer must match the target's.
``--dtype auto|float32|bfloat16`` (see :mod:`.dtype`): models are loaded and adapted in float32,
then cast, so a bf16 pair is the rounding of the float32 one; bf16 linears on a CPU are then packed
(:mod:`..kernels.cpu_linear`: bit-identical outputs, about twice the weight bandwidth), and each layer's q/k/v
and gate/up projections stacked into one packed matmul each (:mod:`..kernels.sibling_linear`: bit-identical too).
float32 linears on a CPU run the project's row-invariant kernel at decoding steps of up to 8 rows
(``--cpu-linear auto|rows|torch``, :mod:`..kernels.row_linear`: equal to torch's up to float32 rounding).
Masked multi-token forwards on a CPU read the KV heads in place instead of copying them per query
group (:mod:`..kernels.gqa_attention`: bit-identical as well).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..dtype_record import check_artifact_dtype
from ..kernels.cpu_linear import pack_linears
from ..kernels.gqa_attention import use_gqa_sdpa
from ..kernels.row_linear import CHOICES as CPU_LINEAR_CHOICES, RowLinearUnavailable, use_row_linears
from ..kernels.sibling_linear import fuse_siblings
from .dtype import CHOICES, dtype_name, resolve_dtype
from .transformers_backend import TransformersLM

EMBEDDED_TARGETS = ("tuned", "raw")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("models")
    g.add_argument("--target", default="tuned",
                   help="embedded target 'tuned' (GSM8K adapter, default) or 'raw', or a local HF checkpoint folder")
    g.add_argument("--draft", default="embedded",
                   help="'embedded' (the task's shipped draft), a draft file of this project for the embedded tuned target "
                        "(build_scripts/train_draft.py --out FILE.safetensors), 'eagle' (the task's shipped EAGLE head) or "
                        "'eagle:HEAD' (an EAGLE head, build_scripts/train_eagle.py), or a local HF checkpoint folder")
    g.add_argument("--draft-vocab", default="auto",
                   help="draft LM head over a vocabulary subset: 'embedded' (the task's shipped subset, for the embedded "
                        "draft or a draft file), a subset file (build_scripts/make_draft_vocab.py), 'none' (the full head) "
                        "or 'auto' (default: embedded for the embedded draft or a draft file, else none)")
    g.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    g.add_argument("--dtype", default="auto", choices=CHOICES,
                   help="compute dtype (default auto: bfloat16 where the CPU/GPU computes it natively, else float32)")
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    g.add_argument("--cpu-linear", default="auto", choices=CPU_LINEAR_CHOICES,
                   help="float32 CPU linears: 'rows' (the project's kernel for decoding steps, built on first use), "
                        "'torch' (torch's own: its exact numbers) or 'auto' (default: rows where the kernel builds)")


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
    """(target, draft, tokenizer) from the arguments of :func:`add_model_args`, for a draft MODEL
    (an EAGLE head, ``--draft eagle[:HEAD]``, is loaded by :func:`..decoding.loading.load_pair`).

    The embedded ``tuned`` target and ``embedded`` draft are the ones shipped for ``task`` (a
    :class:`..tasks.Task`; default the worded GSM8K task's).
    """
    dtype = _resolve_dtype(args)
    target, tokenizer = _load_target_float32(args, task)  # the draft is cut and adapted before the cast
    if is_embedded_draft(args.draft):
        if args.target != "tuned":
            raise SystemExit(f"--draft {args.draft} is made for the embedded tuned target: give --target tuned, "
                             "or --draft PATH (a checkpoint folder) for your own target")
        from .embedded_draft import load_draft

        try:
            draft, _ = load_draft(target, **_draft_file(args.draft, task))
        except ValueError as e:  # a .safetensors file that is no draft of this project
            raise SystemExit(f"--draft {args.draft}: {e}") from None
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
    _adapt_cpu_modules(getattr(args, "cpu_linear", "auto"), (target.model, draft.model), draft.head)
    return target, draft, tokenizer


def load_draft_model(args: argparse.Namespace, task=None):
    """The draft alone, loaded and adapted as :func:`load_pair` loads it, without loading the target
    when the draft is a checkpoint folder of its own (a draft made from the embedded target needs the
    target: then it is :func:`load_pair`'s)."""
    if is_embedded_draft(args.draft):
        return load_pair(args, task)[1]
    dtype = _resolve_dtype(args)
    draft, tokenizer = _hf(args.draft, args.device)
    draft.model.to(dtype)
    for what, made_in in draft.artifact_dtypes.items():
        check_artifact_dtype(what, made_in, dtype_name(dtype))
    _use_draft_vocab(draft, getattr(args, "draft_vocab", "none"), args.draft, tokenizer, task)
    _adapt_cpu_modules(getattr(args, "cpu_linear", "auto"), (draft.model,), draft.head)
    return draft


def load_target_model(args: argparse.Namespace, task=None):
    """(target, tokenizer) alone, as :func:`load_pair` loads the target: for a drafter that is no
    model (an EAGLE head reads the target's states)."""
    dtype = _resolve_dtype(args)
    target, tokenizer = _load_target_float32(args, task)
    target.model.to(dtype)
    for what, made_in in target.artifact_dtypes.items():
        check_artifact_dtype(what, made_in, dtype_name(dtype))
    _adapt_cpu_modules(getattr(args, "cpu_linear", "auto"), (target.model,))
    return target, tokenizer


def _resolve_dtype(args: argparse.Namespace):
    """``--threads`` applied, and the compute dtype of ``--dtype`` on ``--device``."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        return resolve_dtype(getattr(args, "dtype", "auto"), args.device)
    except ValueError as e:
        raise SystemExit(f"--dtype: {e}") from None


def _load_target_float32(args: argparse.Namespace, task) -> tuple[TransformersLM, object]:
    if args.target in EMBEDDED_TARGETS:
        from .embedded import load_target

        adapter = task.shipped_model_path("adapter") if task is not None and args.target == "tuned" else None
        target, tokenizer = load_target(args.target, adapter=adapter)
        target.model.to(args.device)
        return target, tokenizer
    return _hf(args.target, args.device)


def _adapt_cpu_modules(cpu_linear: str, models: tuple, *heads) -> None:
    """The CPU kernels of the module docstring on the transformers ``models`` and the draft's LM
    ``heads`` (a subset head is no part of its model); each keeps its outputs."""
    pack_linears(*models, *heads)  # bf16 on CPU: weights laid out once (same outputs)
    fuse_siblings(*models)  # then q/k/v and gate/up as one matmul each (same outputs)
    try:
        use_row_linears(cpu_linear, *models, *heads)  # float32 on CPU
    except RowLinearUnavailable as e:
        raise SystemExit(f"--cpu-linear rows: {e} (or give --cpu-linear torch)") from None
    use_gqa_sdpa(*models)  # masked CPU forwards: no copy of the KV heads (same outputs)


def is_embedded_draft(name: str) -> bool:
    """``--draft`` names a draft made from the embedded target: the shipped one, or a draft file."""
    return name == "embedded" or name.endswith(".safetensors")


def _draft_file(name: str, task) -> dict:
    """``load_draft``'s ``path`` for an embedded-style ``--draft`` (none: the gsm8k-cot draft)."""
    if name != "embedded":
        if not Path(name).is_file():
            raise SystemExit(f"--draft {name}: no such file (make one with build_scripts/train_draft.py --out {name})")
        return {"path": name}
    return {"path": task.shipped_model_path("draft")} if task is not None else {}


def _use_draft_vocab(draft: TransformersLM, choice: str, draft_name: str, tokenizer, task) -> None:
    """Give the draft a vocabulary-subset head (after the cast: the head copies rows in the draft's dtype)."""
    from ..tasks import load_task
    from .vocab_subset import SubsetHead, load_subset

    if choice == "auto":
        choice = "embedded" if is_embedded_draft(draft_name) else "none"
    if choice == "none":
        return
    if choice == "embedded":
        if not is_embedded_draft(draft_name):
            raise SystemExit("--draft-vocab embedded is made for the embedded draft: give --draft-vocab FILE for yours")
        choice = (task or load_task("gsm8k-cot")).shipped_model_path("draft_vocab")
    try:
        draft.use_head(SubsetHead(draft.model.lm_head, load_subset(choice, tokenizer, draft.vocab_size)))
    except (OSError, ValueError) as e:
        raise SystemExit(f"--draft-vocab: {e}") from None
