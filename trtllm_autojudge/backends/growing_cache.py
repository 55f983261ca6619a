"""A KV cache that grows in place: new entries are written after the old ones, not concatenated.

transformers' ``DynamicLayer`` concatenates on every update, so each forward copies the whole
cache of every layer ([b, kv_heads, N, head_dim] keys and values). For the running batch of
mining's batched regeneration (4 rows of about 600 entries, 30 layers, bf16) that is 55 MB read
and written per step, for a few new tokens a row. :class:`GrowingLayer` keeps keys and values in
buffers with room to spare and hands out views of their filled part; it copies only when a buffer
is full (then growing it by half), so a step writes just its new entries.

The views hold exactly what ``DynamicLayer`` would hold (tested), so attention reads the same
numbers. Anything that replaces ``keys`` / ``values`` itself (``crop``, ``reset``, reordering) is
seen at the next update, which starts a new buffer from what is there.
"""
from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys`` / ``values`` ([b, kv_heads, N, head_dim]) are views of
    buffers ([b, kv_heads, capacity, head_dim]) filled up to N."""

    slack = 64  # entries of room a new buffer has at least

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None
        self._views: tuple[torch.Tensor, torch.Tensor] | None = None  # what keys / values were last set to

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:  # new entries [b, kv_heads, T, head_dim] each
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        replaced = self._views is None or self.keys is not self._views[0] or self.values is not self._views[1]
        old = 0 if replaced and self.keys.numel() == 0 else self.keys.shape[-2]
        total = old + key_states.shape[-2]
        if replaced or total > self._buffers[0].shape[-2]:
            capacity = total + max(self.slack, total // 2)
            buffers = tuple(new.new_empty(*new.shape[:-2], capacity, new.shape[-1]) for new in (key_states, value_states))
            if old:
                buffers[0][..., :old, :], buffers[1][..., :old, :] = self.keys, self.values
            self._buffers = buffers
        keys, values = self._buffers
        keys[..., old:total, :], values[..., old:total, :] = key_states, value_states
        self.keys, self.values = keys[..., :total, :], values[..., :total, :]
        self._views = (self.keys, self.values)
        return self.keys, self.values


def growing_cache(config) -> DynamicCache:
    """A ``DynamicCache`` for ``config`` whose full-attention layers are :class:`GrowingLayer` (other
    layer kinds, e.g. sliding windows, stay as transformers makes them)."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
