"""Batched greedy regeneration on a transformers model, reusing the KV cache of shared prefixes.

Each request starts from the KV cache of the longest prefix it shares with a sequence this backend
computed recently for the same owner (a :class:`PrefixStore` entry: the prompt's response, an
earlier regeneration). The rest of its prefix but the last token is prefilled at batch 1, without
padding. Then all rows decode together, one token per row per step: rows of different lengths sit
right-padded in one cache with the padding masked out and their own position ids, and finished
rows leave the batch. Masked entries add exact zeros, but batch shapes change float32 rounding, so
a near-tie can break differently than at batch 1; in float64 the continuations equal the
sequential ones (tests/test_mining_regeneration.py).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import torch
from transformers import DynamicCache

from .regeneration import Continuation, RegenerationRequest, model_context
from .transformers_backend import TransformersLM


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix (binary search over C-level slice comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class CachedSequence:
    owner: str
    tokens: tuple[int, ...]  # [N] what the cache holds
    keys: list[torch.Tensor]  # per layer [kv_heads, N, head_dim]
    values: list[torch.Tensor]  # per layer [kv_heads, N, head_dim]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)


class PrefixStore:
    """KV caches of recent sequences; the least recently used go past ``max_bytes``."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.nbytes = int(max_bytes), 0
        self.entries: OrderedDict[int, CachedSequence] = OrderedDict()
        self._next = 0

    def longest(self, owner: str, tokens: Sequence[int], limit: int) -> tuple[CachedSequence | None, int]:
        """The entry of ``owner`` sharing the longest prefix with ``tokens`` (at most ``limit``)."""
        best, best_len = None, 0
        tokens = tuple(tokens[:limit])
        for key, entry in self.entries.items():
            if entry.owner == owner:
                n = common_prefix_len(entry.tokens, tokens)
                if n > best_len:
                    best, best_len, best_key = entry, n, key
        if best is not None:
            self.entries.move_to_end(best_key)
        return best, best_len

    def add(self, entry: CachedSequence) -> None:
        self.entries[self._next] = entry
        self._next += 1
        self.nbytes += entry.nbytes
        while self.nbytes > self.max_bytes and len(self.entries) > 1:
            self.nbytes -= self.entries.popitem(last=False)[1].nbytes


class TransformersRegenerator:
    """A :class:`.regeneration.RegenerationBackend` on a :class:`.transformers_backend.TransformersLM`.

    ``max_rows`` caps the rows decoded together; ``cache_bytes`` the KV kept for prefix reuse
    (0 turns reuse off: every prefix is prefilled from scratch).
    """

    def __init__(self, lm: TransformersLM, max_rows: int = 64, cache_bytes: int = 2**31):
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        self.lm, self.max_rows = lm, max_rows
        self.max_context = model_context(lm)
        self.store = PrefixStore(cache_bytes)
        cfg = lm.model.config
        self._kv_heads = int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)
        self._head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)

    def generate(self, requests: Sequence[RegenerationRequest]) -> list[Continuation]:
        out: list[Continuation | None] = [None] * len(requests)
        live = []
        for i, r in enumerate(requests):
            if r.finished:
                out[i] = Continuation([], 0)
            else:
                live.append(i)
        for start in range(0, len(live), self.max_rows):
            rows = live[start:start + self.max_rows]
            for i, cont in zip(rows, self._decode([requests[i] for i in rows])):
                out[i] = cont
        return out

    # -- one batch --

    def _empty(self) -> torch.Tensor:  # [kv_heads, 0, head_dim]
        p = next(self.lm.model.parameters())
        return torch.zeros(self._kv_heads, 0, self._head_dim, dtype=p.dtype, device=p.device)

    @torch.inference_mode()
    def _prefill(self, request: RegenerationRequest) -> tuple[list[torch.Tensor], list[torch.Tensor], int]:
        """KV of ``prefix[:-1]`` (per layer [kv_heads, P - 1, head_dim]) and the tokens forwarded for it."""
        prefix, n_layers = request.prefix, self.lm.model.config.num_hidden_layers
        entry, keep = self.store.longest(request.owner, prefix, len(prefix) - 1)
        keys = [entry.keys[j][:, :keep] for j in range(n_layers)] if entry else [self._empty()] * n_layers
        values = [entry.values[j][:, :keep] for j in range(n_layers)] if entry else [self._empty()] * n_layers
        pending = list(prefix[keep:-1])
        if not pending:
            return keys, values, 0
        cache = DynamicCache(config=self.lm.model.config)
        if keep:
            for j in range(n_layers):
                cache.update(keys[j][None], values[j][None], j)
        device = self.lm.device
        ids = torch.tensor([pending], dtype=torch.long, device=device)  # [1, T]
        positions = torch.arange(keep, keep + len(pending), device=device)[None]  # [1, T]
        self.lm.model.model(input_ids=ids, position_ids=positions, cache=cache, use_cache=True)
        return ([layer.keys[0] for layer in cache.layers], [layer.values[0] for layer in cache.layers], len(pending))

    @torch.inference_mode()
    def _decode(self, requests: list[RegenerationRequest]) -> list[Continuation]:
        model, device = self.lm.model, self.lm.device
        prefilled = [self._prefill(r) for r in requests]
        lens = [len(r.prefix) - 1 for r in requests]  # cache entries of each row before decoding
        width, B = max(lens), len(requests)
        cache = DynamicCache(config=model.config)
        if width:
            for j in range(model.config.num_hidden_layers):
                k = prefilled[0][0][j]
                keys = k.new_zeros(B, k.shape[0], width, k.shape[2])  # [B, kv_heads, width, head_dim]
                values = torch.zeros_like(keys)
                for row, (ks, vs, _) in enumerate(prefilled):
                    keys[row, :, :lens[row]], values[row, :, :lens[row]] = ks[j], vs[j]
                cache.update(keys, values, j)
        mask = (torch.arange(width)[None] < torch.tensor(lens)[:, None]).long().to(device)  # [B, width]
        positions = torch.tensor(lens, device=device)  # [B]
        tokens = torch.tensor([r.prefix[-1] for r in requests], device=device)  # [B]
        generated = [[] for _ in requests]
        forwarded = [p[2] for p in prefilled]
        rows = list(range(B))  # request index of each batch row
        alive = [True] * B  # per batch row
        steps = 0
        while rows:
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)  # [b, width + steps + 1]
            hidden = model.model(input_ids=tokens[:, None], attention_mask=mask, position_ids=positions[:, None],
                                 cache=cache, use_cache=True).last_hidden_state[:, -1]  # [b, H]
            tokens = model.lm_head(hidden).argmax(-1)  # [b]
            steps += 1
            for row, i in enumerate(rows):
                if not alive[row]:
                    continue
                forwarded[i] += 1
                generated[i].append(int(tokens[row]))
                req, seq_len = requests[i], len(requests[i].prefix) + len(generated[i])
                if (generated[i][-1] in req.stop_ids or seq_len >= req.max_len
                        or (req.is_final is not None and req.is_final(list(req.prefix) + generated[i]))):
                    alive[row] = False
                    self._keep(req, generated[i], cache, row, lens[i], width, steps)
            dead = alive.count(False)
            if dead and (dead == len(rows) or dead >= max(1, len(rows) // 4)):
                keep_rows = [row for row in range(len(rows)) if alive[row]]
                if not keep_rows:
                    break
                index = torch.tensor(keep_rows, device=device)
                cache.batch_select_indices(index)
                mask, tokens, rows = mask[index], tokens[index], [rows[row] for row in keep_rows]
                positions, alive = positions[index], [True] * len(keep_rows)
            positions = positions + 1
        return [Continuation(g, f) for g, f in zip(generated, forwarded)]

    def _keep(self, request: RegenerationRequest, generated: list[int], cache: DynamicCache, row: int, n: int,
              width: int, steps: int) -> None:
        """Store the KV of prefix + generated[:-1] of one batch row (its padding cut out)."""
        if self.store.max_bytes <= 0:
            return
        keys, values = [], []
        for layer in cache.layers:  # [b, kv_heads, width + steps, head_dim]
            keys.append(torch.cat([layer.keys[row, :, :n], layer.keys[row, :, width:width + steps]], dim=1))
            values.append(torch.cat([layer.values[row, :, :n], layer.values[row, :, width:width + steps]], dim=1))
        tokens = tuple(request.prefix) + tuple(generated[:-1])
        self.store.add(CachedSequence(request.owner, tokens, keys, values))
