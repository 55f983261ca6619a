"""Per-row KV caches for packed multi-row forwards: each row attends to its own entries only.

Mining's batched regeneration (:mod:`..generation.regen_transformers`) feeds every running row's tokens in one
forward, packed into one sequence without padding. Each row keeps its keys and values in its own
buffers (:class:`RowKV`), and the forward is told the layout (:class:`PackedRows`): the model's
``cache.update`` writes each row's new entries into that row's buffers, and the attention function
(:mod:`.gqa_attention`) runs one SDPA per row, over that row's entries, with a causal mask for its
own new tokens. Nothing is masked out of a shared sequence, so a row's queries cost what its own
entries cost: with every row's entries in one sequence behind a [T, N + T] mask, each query scored
all rows' entries (4 rows: 4x the attention work), and rejected window tokens stayed behind as
holes until a compaction.

The attention of a row is the same computation as at batch 1 over that row's sequence (up to the
kernel's blocking of the key axis, so float32 / bfloat16 may round a near-tie differently; float64
agrees: tests/test_row_cache.py).
"""
from __future__ import annotations

import torch


class RowKV:
    """One row's keys and values: per layer [kv_heads, capacity, head_dim] buffers, of which the first
    ``length`` entries are the row's sequence. A forward writes its new entries after them
    (:meth:`write`); :meth:`keep` then sets how many of them stay (the rest are overwritten later)."""

    slack = 64  # entries of room a buffer gets beyond what it must hold

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor]):  # per layer [kv_heads, N, head_dim]
        self.length = keys[0].shape[1]
        self.keys = [self._with_room(k, self.length + self.slack) for k in keys]
        self.values = [self._with_room(v, self.length + self.slack) for v in values]

    @staticmethod
    def _with_room(t: torch.Tensor, capacity: int) -> torch.Tensor:  # [kv_heads, n, head_dim] -> [kv_heads, capacity, head_dim]
        buffer = t.new_empty(t.shape[0], capacity, t.shape[2])
        buffer[:, :t.shape[1]] = t
        return buffer

    def write(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Put a forward's new entries ([kv_heads, t, head_dim] each) after the row's ``length``."""
        end = self.length + keys.shape[1]
        if end > self.keys[layer].shape[1]:
            capacity = end + max(self.slack, end // 2)
            self.keys[layer] = self._with_room(self.keys[layer][:, :self.length], capacity)
            self.values[layer] = self._with_room(self.values[layer][:, :self.length], capacity)
        self.keys[layer][:, self.length:end] = keys
        self.values[layer][:, self.length:end] = values

    def keep(self, n: int) -> None:
        """The row's sequence is its first ``n`` entries (after a forward: the ones its tokens keep)."""
        self.length = n

    def gather(self, keep: int, slots: list[int]) -> None:
        """The row's sequence becomes its first ``keep`` entries followed by the entries at ``slots``
        (each in [keep, length)): a tree's accepted nodes moved behind their prefix."""
        if not 0 <= keep <= self.length or any(s < keep or s >= self.length for s in slots):
            raise ValueError(f"gather({keep}, {slots}) is outside the row's {self.length} entries")
        index = torch.tensor(slots, dtype=torch.long, device=self.keys[0].device)
        for buffers in (self.keys, self.values):
            for b in buffers:  # [kv_heads, capacity, head_dim]
                b[:, keep:keep + len(slots)] = b.index_select(1, index)
        self.length = keep + len(slots)

    def prefix(self, n: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Views of the first ``n`` entries, per layer [kv_heads, n, head_dim] (valid until the next write)."""
        return [k[:, :n] for k in self.keys], [v[:, :n] for v in self.values]


class PackedRows:
    """One forward's layout: row ``r`` feeds ``sizes[r]`` tokens, packed in row order into one
    sequence [1, T]. Pass it to the model as its ``cache`` and as the keyword ``packed_rows``, with
    :attr:`placeholder_mask` as ``attention_mask`` (a 4D mask, which transformers uses as given
    instead of building one: ``masking_utils._preprocess_mask_arguments``; the rows' attention
    does not read it)."""

    def __init__(self, rows: list[RowKV], sizes: list[int], masks: list[torch.Tensor | None] | None = None):
        if len(rows) != len(sizes) or min(sizes, default=1) < 1:
            raise ValueError(f"every row feeds at least one token: rows {len(rows)}, sizes {sizes}")
        self.rows, self.sizes = rows, sizes
        self.starts = [sum(sizes[:r]) for r in range(len(sizes))]
        device = rows[0].keys[0].device
        # row r's query j sees its first length + j + 1 entries: [t, length + t], True = attend (None for one token);
        # a row's own mask (a tree's) replaces that
        given = masks or [None] * len(rows)
        for row, t, m in zip(rows, sizes, given):
            if m is not None and tuple(m.shape) != (t, row.length + t):
                raise ValueError(f"a row's mask must be [t, length + t] = [{t}, {row.length + t}], got {tuple(m.shape)}")
        self.masks = [m.to(device=device, dtype=torch.bool) if m is not None else None if t == 1 else
                      torch.ones(t, row.length + t, dtype=torch.bool, device=device).tril(row.length)
                      for row, t, m in zip(rows, sizes, given)]
        self.placeholder_mask = torch.ones(1, 1, sum(sizes), 1, dtype=torch.bool, device=device)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """transformers' ``Cache.update``: the forward's new entries ([1, kv_heads, T, head_dim] each)
        go to their rows' buffers. Returns them unchanged; the attention reads the rows (:meth:`attend`)."""
        for row, s, t in zip(self.rows, self.starts, self.sizes):
            row.write(layer_idx, key_states[0, :, s:s + t], value_states[0, :, s:s + t])
        return key_states, value_states

    def attend(self, layer: int, query: torch.Tensor, scaling: float | None) -> torch.Tensor:
        """query [1, heads, T, head_dim] -> [1, T, heads, head_dim]: each row's queries over its own entries."""
        out = []
        for row, s, t, mask in zip(self.rows, self.starts, self.sizes, self.masks):
            n = row.length + t
            out.append(torch.nn.functional.scaled_dot_product_attention(
                query[:, :, s:s + t], row.keys[layer][None, :, :n], row.values[layer][None, :, :n], attn_mask=mask,
                scale=scaling, enable_gqa=True))  # [1, heads, t, head_dim]
        return torch.cat(out, dim=2).transpose(1, 2).contiguous()
