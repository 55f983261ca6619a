"""Batched greedy regeneration on a transformers model, reusing the KV cache of shared prefixes.

Each request starts from the KV cache of the longest prefix it shares with a sequence this backend
computed recently for the same owner (a :class:`PrefixStore` entry: the prompt's response, an
earlier regeneration). The rest of its prefix but the last token is prefilled at batch 1, without
padding. Then it joins the running batch (continuous batching): all rows decode together, their
tokens packed into one sequence without padding, each with its own position ids; each row keeps
its keys and values in its own buffers and attends to them only (:mod:`..kernels.row_cache`). Finished rows
leave, queued requests take their place.

Without ``lookup`` every row feeds one token per step. With ``lookup``
(:class:`.prompt_lookup.LookupWindows`, ``--regenerator lookup --batch-size B``) every row also
feeds a window looked up in its owner's earlier sequences (:class:`.prompt_lookup.LookupCursor`);
each row keeps the window's tokens the target's argmax confirms and adds the target's own next
token, as speculative decoding does; the entries of its rejected tokens are overwritten by its next
step. Every emitted token is still the target's argmax at its own prefix.

Batch and window shapes change float32 rounding, so a near-tie can break differently than at
batch 1; in float64 the continuations equal the sequential ones (tests/test_mining_regeneration.py).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import torch
from transformers import DynamicCache

from ..kernels.gqa_attention import NAME as ROWS_ATTENTION, use_gqa_sdpa
from ..kernels.row_cache import PackedRows, RowKV
from ..models.transformers_backend import TransformersLM
from .prompt_lookup import LookupCursor, LookupWindows, References, common_prefix_len
from .regeneration import Continuation, RegenerationRequest, RequestQueue, model_context


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
    kv: RowKV  # its cache entries: those of every token before ``feed``
    feed: int  # the token it feeds next, at position kv.length
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
    """A :class:`.regeneration.RegenerationBackend` on a :class:`..models.transformers_backend.TransformersLM`.

    Continuous batching: queued requests join the running batch whenever there is room (at most
    ``max_rows`` rows), so the batch stays full while rows of different lengths finish.
    ``cache_bytes`` caps the KV kept for prefix reuse (0 turns reuse off). ``lookup`` verifies windows
    looked up in each owner's earlier sequences (module docstring); ``forward_calls`` counts the
    batched forwards.
    """

    def __init__(self, lm: TransformersLM, max_rows: int = 32, cache_bytes: int = 2**31,
                 lookup: LookupWindows | None = None):
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        use_gqa_sdpa(lm.model)
        if lm.model.config._attn_implementation != ROWS_ATTENTION:
            raise ValueError(f"batched regeneration runs each row's attention with SDPA; this target uses "
                             f"{lm.model.config._attn_implementation!r} attention: load it with attn_implementation='sdpa'")
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
        self.rows = [row for row in self.rows if row.ticket not in wanted]
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
        return Row(ticket, request, RowKV(keys, values), prefix[-1], [], len(pending), cursor)

    def _admit(self) -> None:
        """Let queued requests join while there is room."""
        while self.queue and len(self.rows) < self.max_rows:
            self.rows.append(self._prefill(*self.queue.popitem(last=False)))

    @torch.inference_mode()
    def _step(self) -> dict[int, Continuation]:
        """Every row feeds its token and its looked-up window, all rows' tokens packed into one
        sequence (no padding), each row attending to its own entries; each row keeps the confirmed
        part and the target's next token. The rows that finished."""
        model, device = self.lm.model, self.lm.device
        windows = [row.window() for row in self.rows]
        fed = [[row.feed] + w for row, w in zip(self.rows, windows)]
        tokens = torch.tensor([[t for f in fed for t in f]], device=device)  # [1, T]
        positions = torch.tensor([row.kv.length + k for row, f in zip(self.rows, fed) for k in range(len(f))],
                                 device=device)  # [T]
        layout = PackedRows([row.kv for row in self.rows], [len(f) for f in fed])
        hidden = model.model(input_ids=tokens, attention_mask=layout.placeholder_mask, position_ids=positions[None],
                             cache=layout, packed_rows=layout, use_cache=True).last_hidden_state[0]  # [T, H]
        chosen = model.lm_head(hidden).argmax(-1).tolist()  # [T] the target's token after each fed one
        self.forward_calls += 1
        done, running = {}, []
        for row, window, f in zip(self.rows, windows, fed):
            mine, chosen = chosen[:len(f)], chosen[len(f):]
            k = 0  # window tokens the target confirms
            while k < len(window) and mine[k] == window[k]:
                k += 1
            row.kv.keep(row.kv.length + 1 + k)  # the entries of the rejected window tokens are dropped
            row.feed = mine[k]
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
                keys, values = row.kv.prefix(len(seq) - 1)  # prefix + generated[:-1]
                self.store.add(CachedSequence(req.owner, seq[:-1], [k.clone() for k in keys], [v.clone() for v in values]))
        self.rows = running
        return done
