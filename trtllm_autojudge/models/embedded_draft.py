"""The embedded draft: a layer cut of the tuned target, adapted by distillation.

The draft runs the target's first layers (a copy of decoder layers ``0..k-1``), then its own final
norm, then the target's LM head; embeddings and LM head are the TARGET's tensors (shared, not
copied). ``assets/draft.safetensors`` holds only what differs from the tuned target: LoRA factors
for the copied layers and full norm weights (see :mod:`.lora`), with the layer list in its
metadata (``layers``). ``build_scripts/train_draft.py`` reproduces it.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Sequence

from safetensors import safe_open
from torch import nn
from transformers import AutoModelForCausalLM, PreTrainedModel

from .embedded import ASSETS, load_target, load_tokenizer
from .lora import merge_adapter
from .transformers_backend import TransformersLM

DRAFT_FILE = ASSETS / "draft.safetensors"


def cut_model(target: PreTrainedModel, layers: Sequence[int]) -> PreTrainedModel:
    """A model made of ``target``'s decoder ``layers`` (copied), its final norm (copied) and its
    embeddings and LM head (shared: the same tensors)."""
    n = target.config.num_hidden_layers
    if not layers or any(not 0 <= i < n for i in layers) or list(layers) != sorted(set(layers)):
        raise ValueError(f"draft layers must be increasing indices in [0, {n}), got {list(layers)}")
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in layers]
    draft = AutoModelForCausalLM.from_config(config, dtype=target.dtype)
    draft.model.embed_tokens = target.model.embed_tokens
    draft.lm_head = target.lm_head
    draft.model.layers = nn.ModuleList(copy.deepcopy(target.model.layers[i]) for i in layers)
    for j, layer in enumerate(draft.model.layers):
        layer.self_attn.layer_idx = j  # the KV cache is indexed by position in the cut
    for module in draft.model.layers.modules():  # the copies read the draft's config, not a copy of the target's:
        if getattr(module, "config", None) is not None:  # set_attn_implementation on the draft then reaches them
            module.config = draft.config
    draft.model.norm = copy.deepcopy(target.model.norm)
    draft.generation_config = copy.deepcopy(target.generation_config)
    return draft.to(next(target.parameters()).device).eval()


def draft_layers(path: str | Path = DRAFT_FILE) -> list[int]:
    """The target layers a draft file was trained on (metadata ``layers``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"the embedded draft {path} is missing: rebuild it with build_scripts/train_draft.py")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if "layers" not in meta:
        raise ValueError(f"{path} is not a draft file of this project (no 'layers' metadata)")
    return [int(i) for i in meta["layers"].split(",")]


def load_draft(target: TransformersLM | None = None, path: str | Path = DRAFT_FILE, cache: str | Path | None = None):
    """(TransformersLM, tokenizer) of the draft for the TUNED target.

    Pass the loaded tuned ``target`` to share its embeddings and LM head; without it the tuned
    target is loaded first (and only its shared tensors are kept).
    """
    if target is None:
        target, tokenizer = load_target("tuned", cache=cache)
    elif getattr(target, "variant", None) != "tuned":
        raise ValueError("the embedded draft was trained for the tuned target: pass load_target('tuned')[0]")
    else:
        tokenizer = load_tokenizer(cache)
    layers = draft_layers(path)
    draft = cut_model(target.model, layers)
    meta = merge_adapter(draft, path)
    lm = TransformersLM(draft, target.eos_token_ids, f"{target.name}[layers {','.join(map(str, layers))}]+draft-lora")
    lm.artifact_dtypes[f"the draft {Path(path).name}"] = meta.get("dtype")
    return lm, tokenizer
