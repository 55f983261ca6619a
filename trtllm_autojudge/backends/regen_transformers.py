"""Batched greedy regeneration on a transformers model, reusing the KV cache of shared prefixes.

Each request starts from the KV cache of the longest prefix it shares with a sequence this backend
computed recently for the same owner (a :class:`PrefixStore` entry: the prompt's response, an
earlier regeneration). The rest of its prefix but the last token is prefilled at batch 1, without
padding. Then it joins the running batch (continuous batching): all rows decode together, their
tokens packed into one sequence without padding, each with its own position ids and a mask that
lets it see only its own row's cache entries; the cache (:mod:`.growing_cache`: written in place)
holds every row's entries in that one sequence. Finished rows leave, queued requests take their
place, their prefixes' entries appended.

Without ``lookup`` every row feeds one token per step. With ``lookup``
(:class:`.prompt_lookup.LookupWindows`, ``--regenerator lookup --batch-size B``) every row also
feeds a window looked up in its owner's earlier sequences (:class:`.prompt_lookup.LookupCursor`);
each row keeps the window's tokens the target's argmax confirms and adds the target's own next
token, as speculative decoding does. The cache entries of rejected tokens, and of rows that
finished or were cancelled, are holes no row sees, compacted away when they outgrow the live ones.
Every emitted token is still the target's argmax at its own prefix.

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

from .growing_cache import growing_cache
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
    position: int  # that token's position (= the row's entries in the cache)
    generated: list[int]
    forwarded: int
    cursor: LookupCursor | None = None  # with lookup: where it stands in its reference

    def window(self) -> list[int]:
        """The looked-up tokens to feed after ``feed`` this step (none without lookup)."""
        if self.cursor is None:
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

    hole_slack = 64  # cache entries of no running row (rejected, cancelled, finished) tolerated before compacting

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
        self.rows: list[Row] = []  # the running rows, in the order they joined
        self.cache: DynamicCache | None = None  # every row's entries in one sequence: batch 1, [1, kv_heads, N, head_dim]
        self.owner: torch.Tensor | None = None  # [N] long: the ticket of the row each cache entry belongs to

    # -- the interface --

    def collect(self) -> dict[int, Continuation]:
        done = {}
        for t in [t for t, r in self.queue.items() if r.finished]:
            del self.queue[t]
            done[t] = Continuation([], 0)
        while not done:
            self._admit()
            if not self.rows:
                return {}
            done = self._step()
        return done

    def cancel(self, tickets: Sequence[int]) -> dict[int, int]:
        spent = {t: 0 for t in tickets if self.queue.pop(t, None) is not None}
        wanted = set(tickets)
        spent.update((row.ticket, row.forwarded) for row in self.rows if row.ticket in wanted)
        self.rows = [row for row in self.rows if row.ticket not in wanted]  # their entries are holes now
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

    def _row_kv(self, ticket: int, n: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The first ``n`` cache entries of a running row, in token order (per layer [kv_heads, n, head_dim])."""
        index = (self.owner == ticket).nonzero().squeeze(1)[:n]  # [n]
        return ([layer.keys[0].index_select(1, index) for layer in self.cache.layers],
                [layer.values[0].index_select(1, index) for layer in self.cache.layers])

    def _holes(self) -> int:
        """Cache entries of no running row: rejected window tokens, cancelled and finished rows."""
        return 0 if self.owner is None else self.owner.numel() - sum(row.position for row in self.rows)

    @torch.inference_mode()
    def _admit(self) -> None:
        """Compact the cache when its holes outgrow ``hole_slack`` and half the live entries; then let
        queued requests join while there is room, their prefixes' entries appended to the cache."""
        if self._holes() > max(self.hole_slack, sum(row.position for row in self.rows) // 2):
            keep = torch.isin(self.owner, torch.tensor([row.ticket for row in self.rows], device=self.owner.device))
            index = keep.nonzero().squeeze(1)  # [live]
            old, self.cache = self.cache, growing_cache(self.lm.model.config)
            for j, layer in enumerate(old.layers):
                self.cache.update(layer.keys.index_select(2, index), layer.values.index_select(2, index), j)
            self.owner = self.owner[index]
        while self.queue and len(self.rows) < self.max_rows:
            ticket, request = self.queue.popitem(last=False)
            row = self._prefill(ticket, request)
            if self.cache is None:
                self.cache = growing_cache(self.lm.model.config)  # each step writes only its new entries
                self.owner = torch.zeros(0, dtype=torch.long, device=self.lm.device)
            for j in range(self._layers):
                self.cache.update(row.keys[j][None], row.values[j][None], j)
            self.owner = torch.cat([self.owner, torch.full((row.position,), ticket, device=self.owner.device)])
            row.keys = row.values = None
            self.rows.append(row)

    @torch.inference_mode()
    def _step(self) -> dict[int, Continuation]:
        """Every row feeds its token and its looked-up window, all rows' tokens packed into one
        sequence (no padding), each seeing only its own row's entries; each row keeps the confirmed
        part and the target's next token. The rows that finished."""
        model, device = self.lm.model, self.lm.device
        windows = [row.window() for row in self.rows]
        fed = [[row.feed] + w for row, w in zip(self.rows, windows)]
        tokens = torch.tensor([[t for f in fed for t in f]], device=device)  # [1, T]
        positions = torch.tensor([row.position + k for row, f in zip(self.rows, fed) for k in range(len(f))],
                                 device=device)  # [T]
        owner = torch.tensor([row.ticket for row, f in zip(self.rows, fed) for _ in f], device=device)  # [T]
        mask = torch.cat([owner[:, None] == self.owner[None],  # [T, N] the row's cache entries
                          (owner[:, None] == owner[None]) & (positions[:, None] >= positions[None])],  # [T, T] causal
                         dim=1)[None, None]  # [1, 1, T, N + T], True = attend
        if model.config._attn_implementation == "eager":  # eager attention adds its mask to the scores
            mask = torch.zeros(mask.shape, dtype=self.lm.dtype, device=device).masked_fill(~mask, torch.finfo(self.lm.dtype).min)
        hidden = model.model(input_ids=tokens, attention_mask=mask, position_ids=positions[None], cache=self.cache,
                             use_cache=True).last_hidden_state[0]  # [T, H]
        chosen = model.lm_head(hidden).argmax(-1).tolist()  # [T] the target's token after each fed one
        self.forward_calls += 1
        first, self.owner = self.owner.numel(), torch.cat([self.owner, owner])  # the step's entries: [first, first + T)
        done, running = {}, []
        for row, window, f in zip(self.rows, windows, fed):
            mine, first = chosen[:len(f)], first + len(f)
            chosen = chosen[len(f):]
            k = 0  # window tokens the target confirms
            while k < len(window) and mine[k] == window[k]:
                k += 1
            self.owner[first - len(f) + 1 + k:first] = -1  # rejected window tokens: holes
            row.feed, row.position = mine[k], row.position + 1 + k
            row.forwarded += len(f)
            req, alive = row.request, True
            for t in window[:k] + [mine[k]]:
                row.generated.append(t)
                if (t in req.stop_ids or len(req.prefix) + len(row.generated) >= req.max_len
                        or (req.is_final is not None and req.is_final(list(req.prefix) + row.generated))):
                    alive = False
                    break
            if alive:
                if row.cursor is not None:
                    row.cursor.update(list(req.prefix) + row.generated, len(window), k)
                running.append(row)
                continue
            done[row.ticket] = Continuation(row.generated, row.forwarded)
            seq = tuple(req.prefix) + tuple(row.generated)
            if self.refs is not None:
                self.refs.add(req.owner, seq)
            if self.store.max_bytes > 0:
                keys, values = self._row_kv(row.ticket, len(seq) - 1)  # prefix + generated[:-1]
                self.store.add(CachedSequence(req.owner, seq[:-1], keys, values))
        self.rows = running
        return done
