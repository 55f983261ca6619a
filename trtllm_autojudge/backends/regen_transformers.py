"""Batched greedy regeneration on a transformers model, reusing the KV cache of shared prefixes.

Each request starts from the KV cache of the longest prefix it shares with a sequence this backend
computed recently for the same owner (a :class:`PrefixStore` entry: the prompt's response, an
earlier regeneration). The rest of its prefix but the last token is prefilled at batch 1, without
padding. Then it joins the running batch (continuous batching): all rows decode together, rows of
different lengths right-padded in one cache with the padding masked out and their own position
ids; finished rows leave it, queued requests take their place.

Without ``lookup`` every row feeds one token per step. With ``lookup``
(:class:`.prompt_lookup.LookupWindows`, ``--regenerator lookup --batch-size B``) every row also
feeds a window looked up in its owner's earlier sequences (:class:`.prompt_lookup.LookupCursor`),
right-padded to the longest window of the step; each row keeps the window's tokens the target's
argmax confirms and adds the target's own next token, as speculative decoding does, and the cache
entries of the rejected and padded tokens are masked out (holes, compacted when they outgrow the
rows). Every emitted token is still the target's argmax at its own prefix.

Masked entries add exact zeros, but batch and window shapes change float32 rounding, so a near-tie
can break differently than at batch 1; in float64 the continuations equal the sequential ones
(tests/test_mining_regeneration.py).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import torch
from transformers import DynamicCache

from .prompt_lookup import LookupCursor, LookupWindows, References, common_prefix_len
from .regeneration import Continuation, RegenerationRequest, RequestQueue, model_context
from .transformers_backend import TransformersLM


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


@dataclass
class Row:
    """One request in the running batch."""

    ticket: int
    request: RegenerationRequest
    keys: list[torch.Tensor] | None  # per layer [kv_heads, N, head_dim] until the row joins the batch
    values: list[torch.Tensor] | None
    feed: int  # the token it feeds next
    position: int  # that token's position
    generated: list[int]
    forwarded: int
    cursor: LookupCursor | None = None  # with lookup: where it stands in its reference
    alive: bool = True

    def window(self) -> list[int]:
        """The looked-up tokens to feed after ``feed`` this step (none without lookup or when finished)."""
        if self.cursor is None or not self.alive:
            return []
        seq = list(self.request.prefix) + self.generated
        return self.cursor.propose(seq, self.request.max_len - len(seq) - 1)  # the last new token is the target's


class TransformersRegenerator(RequestQueue):
    """A :class:`.regeneration.RegenerationBackend` on a :class:`.transformers_backend.TransformersLM`.

    Continuous batching: queued requests join the running batch whenever there is room (at most
    ``max_rows`` rows), so the batch stays full while rows of different lengths finish.
    ``cache_bytes`` caps the KV kept for prefix reuse (0 turns reuse off). ``lookup`` verifies windows
    looked up in each owner's earlier sequences (module docstring); ``forward_calls`` counts the
    batched forwards.
    """

    hole_slack = 64  # cache entries a row may trail the widest by before the batch is compacted

    def __init__(self, lm: TransformersLM, max_rows: int = 32, cache_bytes: int = 2**31,
                 lookup: LookupWindows | None = None):
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        super().__init__()
        self.lm, self.max_rows, self.lookup = lm, max_rows, lookup
        self.refs = References(lookup.references) if lookup else None
        self.forward_calls = 0
        self.max_context = model_context(lm)
        self.store = PrefixStore(cache_bytes)
        cfg = lm.model.config
        self._layers = int(cfg.num_hidden_layers)
        self._kv_heads = int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)
        self._head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
        self.rows: list[Row] = []  # the running batch, in cache row order
        self.cache: DynamicCache | None = None
        self.mask: torch.Tensor | None = None  # [b, width] long, 1 = a valid cache entry of that row

    # -- the interface --

    def collect(self) -> dict[int, Continuation]:
        done = {}
        for t in [t for t, r in self.queue.items() if r.finished]:
            del self.queue[t]
            done[t] = Continuation([], 0)
        while not done:
            self._admit()
            if not any(row.alive for row in self.rows):
                return {}
            done = self._step()
        return done

    def cancel(self, tickets: Sequence[int]) -> dict[int, int]:
        spent = {t: 0 for t in tickets if self.queue.pop(t, None) is not None}
        wanted = set(tickets)
        for row in self.rows:
            if row.alive and row.ticket in wanted:
                row.alive = False
                spent[row.ticket] = row.forwarded
        return spent

    # -- the running batch --

    def _empty(self) -> torch.Tensor:  # [kv_heads, 0, head_dim]
        p = next(self.lm.model.parameters())
        return torch.zeros(self._kv_heads, 0, self._head_dim, dtype=p.dtype, device=p.device)

    @torch.inference_mode()
    def _prefill(self, ticket: int, request: RegenerationRequest) -> Row:
        """A new row: the KV of ``prefix[:-1]`` (from the store where it can), ``prefix[-1]`` to feed."""
        prefix = request.prefix
        entry, keep = self.store.longest(request.owner, prefix, len(prefix) - 1)
        keys = [entry.keys[j][:, :keep] for j in range(self._layers)] if entry else [self._empty()] * self._layers
        values = [entry.values[j][:, :keep] for j in range(self._layers)] if entry else [self._empty()] * self._layers
        pending = list(prefix[keep:-1])
        if pending:
            cache = DynamicCache(config=self.lm.model.config)
            if keep:
                for j in range(self._layers):
                    cache.update(keys[j][None], values[j][None], j)
            device = self.lm.device
            ids = torch.tensor([pending], dtype=torch.long, device=device)  # [1, T]
            positions = torch.arange(keep, keep + len(pending), device=device)[None]  # [1, T]
            self.lm.model.model(input_ids=ids, position_ids=positions, cache=cache, use_cache=True)
            keys, values = [layer.keys[0] for layer in cache.layers], [layer.values[0] for layer in cache.layers]
        cursor = LookupCursor(self.refs.best(request.owner, prefix), self.lookup) if self.lookup else None
        return Row(ticket, request, keys, values, prefix[-1], len(prefix) - 1, [], len(pending), cursor)

    def _row_kv(self, row: int, n: int | None = None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The first ``n`` (default: all) valid cache entries of one batch row, in token order (per
        layer [kv_heads, N, head_dim])."""
        index = self.mask[row].nonzero().squeeze(1)[:n]  # [N]
        return ([layer.keys[row].index_select(1, index) for layer in self.cache.layers],
                [layer.values[row].index_select(1, index) for layer in self.cache.layers])

    def _fragmented(self) -> bool:
        """The cache is wider than its longest row by more than ``hole_slack`` entries and half that
        row (lookup's holes)."""
        if self.mask is None or not self.rows:
            return False
        longest = int(self.mask.sum(1).max())
        return self.mask.shape[1] - longest > max(self.hole_slack, longest // 2)

    def _admit(self) -> None:
        """Rebuild the batch when requests wait and there is room, a quarter of it is dead, or its
        cache is fragmented."""
        live = [r for r in self.rows if r.alive]
        room = self.max_rows - len(live)
        dead = len(self.rows) - len(live)
        if (not (self.queue and room > 0) and not (dead and dead >= max(1, len(self.rows) // 4))
                and not self._fragmented()):
            return
        for k, row in enumerate(self.rows):
            if row.alive:
                row.keys, row.values = self._row_kv(k)
        while self.queue and room > 0:
            ticket, request = self.queue.popitem(last=False)
            live.append(self._prefill(ticket, request))
            room -= 1
        self.rows, self.cache, self.mask = live, None, None
        if not live:
            return
        device, lens = self.lm.device, [r.keys[0].shape[1] for r in live]
        width = max(lens)
        self.cache = DynamicCache(config=self.lm.model.config)
        if width:
            for j in range(self._layers):
                k = live[0].keys[j]
                keys = k.new_zeros(len(live), k.shape[0], width, k.shape[2])  # [b, kv_heads, width, head_dim]
                values = torch.zeros_like(keys)
                for b, row in enumerate(live):
                    keys[b, :, :lens[b]], values[b, :, :lens[b]] = row.keys[j], row.values[j]
                self.cache.update(keys, values, j)
        self.mask = (torch.arange(width)[None] < torch.tensor(lens)[:, None]).long().to(device)  # [b, width]
        for row in live:
            row.keys = row.values = None

    @torch.inference_mode()
    def _step(self) -> dict[int, Continuation]:
        """Every row feeds its token and its looked-up window (right-padded to the longest); each
        keeps the confirmed part and the target's next token. The rows that finished."""
        model, device = self.lm.model, self.lm.device
        windows = [row.window() for row in self.rows]
        width = 1 + max(len(w) for w in windows)  # L
        fed = [[row.feed] + w for row, w in zip(self.rows, windows)]
        tokens = torch.tensor([f + [0] * (width - len(f)) for f in fed], device=device)  # [b, L]
        positions = torch.tensor([row.position for row in self.rows], device=device)[:, None] \
            + torch.arange(width, device=device)  # [b, L]
        fresh = torch.tensor([[1] * len(f) + [0] * (width - len(f)) for f in fed], device=device)  # [b, L]
        self.mask = torch.cat([self.mask, fresh], dim=1)  # [b, width_before + L]
        hidden = model.model(input_ids=tokens, attention_mask=self.mask, position_ids=positions, cache=self.cache,
                             use_cache=True).last_hidden_state  # [b, L, H]
        real = fresh.bool()
        chosen = torch.zeros(fresh.shape, dtype=torch.long, device=device)  # [b, L] argmax after each fed token
        chosen[real] = model.lm_head(hidden[real]).argmax(-1)
        chosen = chosen.tolist()
        self.forward_calls += 1
        done = {}
        for b, (row, window) in enumerate(zip(self.rows, windows)):
            k = 0  # window tokens the target confirms
            while k < len(window) and chosen[b][k] == window[k]:
                k += 1
            self.mask[b, self.mask.shape[1] - width + 1 + k:] = 0  # rejected window tokens and padding
            row.feed, row.position = chosen[b][k], row.position + 1 + k
            if not row.alive:
                continue
            row.forwarded += len(fed[b])
            req = row.request
            for t in window[:k] + [chosen[b][k]]:
                row.generated.append(t)
                if (t in req.stop_ids or len(req.prefix) + len(row.generated) >= req.max_len
                        or (req.is_final is not None and req.is_final(list(req.prefix) + row.generated))):
                    row.alive = False
                    break
            if row.alive:
                if row.cursor is not None:
                    row.cursor.update(list(req.prefix) + row.generated, len(window), k)
                continue
            done[row.ticket] = Continuation(row.generated, row.forwarded)
            seq = tuple(req.prefix) + tuple(row.generated)
            if self.refs is not None:
                self.refs.add(req.owner, seq)
            if self.store.max_bytes > 0:
                keys, values = self._row_kv(b, len(seq) - 1)  # prefix + generated[:-1]
                self.store.add(CachedSequence(req.owner, seq[:-1], keys, values))
        return done
