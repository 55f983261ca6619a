"""Grouped-query attention that reads the KV cache in place, for masked multi-token CPU forwards.

transformers' SDPA attention (``integrations/sdpa_attention.py``) copies every layer's keys and
values ``num_key_value_groups`` times (``repeat_kv``) whenever a forward has a mask and more than
one query token: the padded batches of mining's batched regeneration, tree verifies. The embedded
model has 9 query heads over 3 KV heads, so each such forward copies its whole cache three times
over, every layer. torch's SDPA reads the KV heads in place with ``enable_gqa=True``, and on the
CPU flash kernel its outputs are bit-identical to the copied path (tested), so lossless results,
labels and judge features do not move. transformers takes that path only without a mask, because
CUDA's masked kernels lack it; this one takes it on the CPU only.

:func:`use_gqa_sdpa` switches models from ``"sdpa"`` to this attention (:data:`NAME`), registered
once with sdpa's mask builder. Everything but a masked multi-token CPU forward goes to
transformers' own SDPA function unchanged, except a forward over packed rows (the keyword
``packed_rows``, :class:`.row_cache.PackedRows`: mining's batched regeneration), whose rows each
attend to their own cache entries.
"""
from __future__ import annotations

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "autojudge_sdpa_gqa"


def reads_kv_in_place(module: nn.Module, query: torch.Tensor, attention_mask: torch.Tensor | None, kwargs: dict) -> bool:
    """The forwards transformers would serve by copying the KV heads (and no other special case)."""
    return (getattr(module, "num_key_value_groups", 1) > 1 and attention_mask is not None and query.shape[2] > 1
            and query.device.type == "cpu" and kwargs.get("position_bias") is None and kwargs.get("softcap") is None
            and not kwargs.get("output_attentions", False))


def sdpa_gqa_forward(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                     is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """query [b, heads, q, d], key / value [b, kv_heads, k, d], attention_mask [b, 1, q, k] ->
    ([b, q, heads, d], None): transformers' attention-function contract."""
    rows = kwargs.get("packed_rows")
    if rows is not None:
        return rows.attend(module.layer_idx, query, scaling), None
    if not reads_kv_in_place(module, query, attention_mask, kwargs):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                                           scale=scaling, enable_gqa=True)  # [b, heads, q, d]
    return out.transpose(1, 2).contiguous(), None


def use_gqa_sdpa(*models: nn.Module) -> int:
    """Switch every model using ``"sdpa"`` attention to :data:`NAME`, in place; others (eager, flash)
    are left alone. Returns how many were switched."""
    if NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(NAME, sdpa_gqa_forward)
        AttentionMaskInterface.register(NAME, sdpa_mask)
    switched = 0
    for model in models:
        if model.config._attn_implementation == "sdpa":
            model.set_attn_implementation(NAME)
            switched += 1
    return switched
