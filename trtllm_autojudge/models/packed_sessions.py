"""Many sequences decoded at once, each by its own unchanged loop: their forwards packed into one.

Batch-1 decoding of this small model on a CPU is memory-bound, so one forward over 8 sequences'
tokens costs little more than over one's. A :class:`ForwardPool` lets B threads each run the
ordinary speculative loop (:func:`..decoding.speculative.speculative_generate`) on its own question:
every session's ``forward`` hands its tokens to the pool and waits. Once every thread that is
decoding waits on a forward, the pool runs one packed forward per model over all of them
(:class:`..kernels.row_cache.PackedRows`: each row attends to its own KV entries, with its own
positions and, for a tree, its own mask) and wakes them with their rows of the outputs.

Sequences drift out of step (a new question's prompt, a cycle cut short), and a round that ran the
target for the one sequence that had finished drafting would cost a whole target forward for one
row. So the target is *deferred*: its forwards run only in a round where no draft forward waits.
The sequences then fall into step: all draft, then one target forward verifies every sequence.

A row computes what its batch-1 forward computes, up to the blocking of the kernels' sums: in
float64 the tokens are those of batch 1 (tests/test_packed_sessions.py); in float32 or bfloat16 a
near-tie can round the other way, as between any two kernels. Timings of concurrent sequences are
shared, so runs decoded in a pool report no tokens per second (:mod:`..evaluation.runner`).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch

from ..kernels.gqa_attention import NAME as ROWS_ATTENTION, use_gqa_sdpa
from ..kernels.row_cache import PackedRows, RowKV
from .protocol import ForwardOutput, check_forward, check_retain
from .transformers_backend import TransformersLM


@dataclass(eq=False)
class _Request:
    session: "PackedSession"
    tokens: list[int]  # [t]
    positions: list[int]  # [t]
    mask: torch.Tensor | None  # [t, cached_len + t] bool, or None: causal
    out: ForwardOutput | None = None
    error: BaseException | None = field(default=None, repr=False)


class ForwardPool:
    """Gathers the forwards of concurrently decoding threads into one packed forward per model.

    A thread decodes inside ``with pool.member():``; the pool runs the waiting forwards once every
    member waits on one. So between its forwards a member must not wait for another member (its own
    work there is fine: the others wait for it).
    """

    def __init__(self):
        self._cond = threading.Condition()
        self._members = 0
        self._waiting: list[_Request] = []
        self.forwards = 0  # packed forwards run
        self.rows = 0  # rows they held

    @contextmanager
    def member(self) -> Iterator["ForwardPool"]:
        """The calling thread decodes until the block ends: rounds wait for its forwards."""
        with self._cond:
            self._members += 1
        try:
            yield self
        finally:
            with self._cond:
                self._members -= 1
                self._cond.notify_all()  # the members left may all wait now: one of them runs the round

    def submit(self, request: _Request) -> ForwardOutput:
        with self._cond:
            if self._members < 1:
                raise RuntimeError("a packed session's forward ran outside `with pool.member():`")
            self._waiting.append(request)
            while request.out is None and request.error is None:
                if len(self._waiting) == self._members:  # every member waits: this thread runs a round
                    self._run()
                else:
                    self._cond.wait()
        if request.error is not None:
            raise request.error
        return request.out

    def _run(self) -> None:
        """Every member waits (the lock is held): one packed forward per model, the deferred model's only
        when no other's wait; wake them all."""
        urgent = [r for r in self._waiting if not r.session.deferred]
        batch = urgent or self._waiting  # a deferred model's forwards wait for every other model's
        self._waiting = [r for r in self._waiting if r.session.deferred] if urgent else []
        by_model: dict[int, list[_Request]] = {}
        for r in batch:
            by_model.setdefault(id(r.session.lm), []).append(r)
        try:
            for requests in by_model.values():
                _packed_forward(requests)
                self.forwards += 1
                self.rows += len(requests)
        except BaseException as e:  # every waiting thread raises it, not only the one that ran the forward
            for r in batch:
                if r.out is None:
                    r.error = e
        self._cond.notify_all()


@torch.inference_mode()
def _packed_forward(requests: list[_Request]) -> None:
    """One forward of one model over every request's tokens, packed in request order."""
    lm = requests[0].session.lm
    device = lm.device
    layout = PackedRows([r.session.kv for r in requests], [len(r.tokens) for r in requests],
                        [r.mask for r in requests])
    ids = torch.tensor([[t for r in requests for t in r.tokens]], dtype=torch.long, device=device)  # [1, T]
    positions = torch.tensor([[p for r in requests for p in r.positions]], dtype=torch.long, device=device)  # [1, T]
    hidden = lm.model.model(input_ids=ids, attention_mask=layout.placeholder_mask, position_ids=positions,
                            cache=layout, packed_rows=layout, use_cache=True).last_hidden_state[0]  # [T, H]
    logits = lm.head(hidden)  # [T, V]
    for r, s, t in zip(requests, layout.starts, layout.sizes):
        r.session.kv.keep(r.session.kv.length + t)
        r.out = ForwardOutput(logits=logits[s:s + t].float(), hidden=hidden[s:s + t].float())


class PackedLM:
    """A :class:`.transformers_backend.TransformersLM` whose sessions' forwards go through a
    :class:`ForwardPool` (see :class:`.protocol.LanguageModel`); everything else is the model's.
    A ``deferred`` model's forwards run only when no other model's wait (module docstring)."""

    def __init__(self, lm: TransformersLM, pool: ForwardPool, deferred: bool = False):
        if not isinstance(lm, TransformersLM):
            raise TypeError(f"packed sessions run a TransformersLM, got {type(lm).__name__}")
        use_gqa_sdpa(lm.model)
        # every module's config, as the attention layers read their own at each forward
        kinds = {m.config._attn_implementation for m in lm.model.modules()
                 if hasattr(getattr(m, "config", None), "_attn_implementation")}
        if kinds != {ROWS_ATTENTION}:
            raise ValueError(f"packed sessions run each row's attention with SDPA; {lm.name}'s modules use "
                             f"{sorted(kinds)} attention: load it with attn_implementation='sdpa', with every layer "
                             f"reading the model's config")
        self.lm, self.pool, self.deferred = lm, pool, deferred
        cfg = lm.model.config
        self._layers = int(cfg.num_hidden_layers)
        self._kv_heads = int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)
        self._head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)

    def __getattr__(self, name):  # vocab_size, hidden_size, eos_token_ids, name, device, dtype, head, model, ...
        return getattr(self.lm, name)

    def session(self) -> "PackedSession":
        empty = [torch.zeros(self._kv_heads, 0, self._head_dim, dtype=self.lm.dtype, device=self.lm.device)
                 for _ in range(self._layers)]  # per layer [kv_heads, 0, head_dim]
        return PackedSession(self.lm, self.pool, RowKV(empty, list(empty)), self.deferred)


class PackedSession:
    """The KV cache of one sequence as one row of packed forwards (see :class:`.protocol.ModelSession`)."""

    def __init__(self, lm: TransformersLM, pool: ForwardPool, kv: RowKV, deferred: bool = False):
        self.lm, self.pool, self.kv, self.deferred = lm, pool, kv, deferred

    @property
    def cached_len(self) -> int:
        return self.kv.length

    def forward(self, tokens: Sequence[int], positions: Sequence[int] | None = None,
                mask: torch.Tensor | None = None) -> ForwardOutput:  # [T], [T], [T, cached_len + T] (protocol.py)
        T = len(tokens)
        check_forward(self.cached_len, T, positions, mask)
        pos = list(range(self.cached_len, self.cached_len + T)) if positions is None else [int(p) for p in positions]
        return self.pool.submit(_Request(self, [int(t) for t in tokens], pos, mask))

    def retain(self, keep: int, slots: Sequence[int] = ()) -> None:
        slots = [int(s) for s in slots]
        check_retain(self.cached_len, keep, slots)
        if slots == list(range(keep, keep + len(slots))):
            self.kv.keep(keep + len(slots))
        else:
            self.kv.gather(keep, slots)
