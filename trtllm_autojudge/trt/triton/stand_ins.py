"""CPU stand-ins for the context route's two engines, with one KV cache per request.

The CPU route's repository (:mod:`.cpu`) serves the context route's own BLS over two Python models
that stand in for the engines on the reference runtime: ``tensorrt_llm_draft`` answers the
tensorrtllm backend's draft requests with :class:`CachedDraftEngine` (the greedy chain after a
prefix and its generation logits) and ``autojudge_target`` answers one verification cycle with
:class:`CachedTargetEngine` (what :class:`..runner.reference_engine.ReferenceTargetEngine`
returns). Both are sent the whole prefix each cycle, as the engines are, but keep each request's
KV cache between its cycles under the request's key (the id the BLS gives its requests): a cycle
feeds only the tokens the cache lacks. :class:`SessionCache` keeps what each cache holds and cuts it
back to the longest common prefix with the next input, so a cache never serves tokens it was not
fed; ``release(key)`` frees a request's cache (the BLS sends it when the request ends or is
cancelled). The cache also splits the process's torch threads among the requests it holds
(:func:`share_threads`), since the two stand-ins are two processes on the same cores.
:class:`KeyedDraft` and :class:`KeyedTarget` are one request's view of the two stand-ins without a
server (the engines :func:`..runner.loop.engine_generate` drives), as the BLS reaches them through
Triton: the tests and ``experiments/serving_profile.py`` run the served computation with them.

On a chain the forwards are those of the CPU runtime with a model drafter
(:func:`trtllm_autojudge.decoding.speculative.speculative_generate`): the target feeds the pending
tokens and the draft nodes in one forward and keeps the accepted nodes; the draft feeds the pending
tokens, then each drafted token but the last. So with the same models the served tokens are the
runtime's (the draft engine stops at ``end_id`` where the runtime drafts on; a cycle whose draft
stops early verifies fewer nodes).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from ...decoding.speculative import tree_forward
from ...decoding.tree import DraftTree, node_parents
from ...models.protocol import LanguageModel, ModelSession
from ...spec.acceptance import Acceptance
from ..runner.chain_drafter import DraftOutput
from ..runner.packing import PackedCycle
from ..runner.reference_engine import ReferenceTargetEngine


@dataclass
class CachedSequence:
    session: ModelSession
    tokens: list[int] = field(default_factory=list)  # what the session's cache holds, in order


def share_threads(cores: int, requests: int) -> int:
    """Give this process's torch ``cores`` threads split among the ``requests`` it holds (at least
    one each); returns the count set.

    With one request in flight the draft and target stand-ins take turns, so each may use every core,
    and OpenMP's idle threads spinning between operations (its default) keep a cycle's thousands of
    operations as fast as in process. With several, both stand-ins compute at once, and a process
    whose idle threads spin on cores the other needs starves its forwards: one thread per request
    leaves no idle thread to spin. Measured on 2 cores: docs/notebook/serving-cpu.md ("Threads
    shared by requests")."""
    n = max(1, cores // max(1, requests))
    if n != torch.get_num_threads():
        torch.set_num_threads(n)
    return n


class SessionCache:
    """One model session per request key; counts the tokens fed, so a test can tell a cache hit.
    Holding n requests, the process computes on ``cores // n`` torch threads (:func:`share_threads`),
    ``cores`` being the threads it had when the cache was made."""

    def __init__(self, lm: LanguageModel):
        self.lm = lm
        self.sequences: dict[str, CachedSequence] = {}
        self.fed_tokens = 0  # tokens forwarded through every session (metrics, tests)
        self.cores = torch.get_num_threads()

    def resume(self, key: str, tokens: Sequence[int], keep_at_most: int) -> CachedSequence:
        """The request's sequence, its cache cut to the longest common prefix of what it holds and
        ``tokens``, at most ``keep_at_most`` entries (a new session for a new key)."""
        seq = self.sequences.get(key)
        if seq is None:
            seq = self.sequences[key] = CachedSequence(self.lm.session())
        share_threads(self.cores, len(self.sequences))
        common = 0
        limit = min(len(seq.tokens), len(tokens), keep_at_most)
        while common < limit and seq.tokens[common] == tokens[common]:
            common += 1
        if common < seq.session.cached_len:
            seq.session.retain(common)
        del seq.tokens[common:]
        return seq

    def forward(self, seq: CachedSequence, tokens: Sequence[int]):
        """Feed ``tokens`` after what ``seq`` holds."""
        out = seq.session.forward(list(tokens))
        seq.tokens += [int(t) for t in tokens]
        self.fed_tokens += len(tokens)
        return out

    @property
    def cached_tokens(self) -> int:
        """KV entries held over every request (the caches' memory, in tokens)."""
        return sum(seq.session.cached_len for seq in self.sequences.values())

    def release(self, key: str) -> bool:
        """Free the request's cache; False when it holds none."""
        held = self.sequences.pop(key, None) is not None
        share_threads(self.cores, len(self.sequences))
        return held


class CachedDraftEngine:
    """Greedy drafting after a prefix, as the tensorrtllm backend returns it, with a cache per request."""

    def __init__(self, draft: LanguageModel):
        self.draft = draft
        self.vocab_size = draft.vocab_size
        self.cache = SessionCache(draft)

    @torch.inference_mode()
    def generate(self, key: str, prompt: Sequence[int], max_new_tokens: int, end_id: int, logits: bool) -> DraftOutput:
        """Up to ``max_new_tokens`` greedy tokens after ``prompt``, stopping after ``end_id``; with
        ``logits`` the draft's logits at each generated step ([max_new_tokens, V], rows past the
        generated tokens zero). The last generated token is not fed (the next cycle feeds it if kept)."""
        if len(prompt) == 0 or max_new_tokens < 1:
            raise ValueError(f"a draft request needs a prompt and request_output_len >= 1, got {len(prompt)} tokens "
                             f"and {max_new_tokens}")
        prompt = [int(t) for t in prompt]
        seq = self.cache.resume(key, prompt, len(prompt) - 1)
        step = self.cache.forward(seq, prompt[len(seq.tokens):])
        tokens: list[int] = []
        rows = np.zeros((max_new_tokens, self.vocab_size), np.float32) if logits else None  # [max_new_tokens, V]
        for k in range(max_new_tokens):
            if rows is not None:
                rows[k] = step.logits[-1].float().cpu().numpy()
            tokens.append(int(torch.topk(step.logits[-1], 1).indices[0]))  # the runtime's drafter picks the same way
            if tokens[-1] == end_id or k + 1 == max_new_tokens:
                break
            step = self.cache.forward(seq, [tokens[-1]])
        return DraftOutput(tokens, rows, None)


def request_tree(paths: np.ndarray, n_valid: int) -> DraftTree:
    """The tree of one request's first ``n_valid`` nodes from its path rows ``paths`` [P, D+1] (nodes
    are numbered level by level, so the valid ones, 1..n_valid, form a tree). Ranks are not carried
    by a cycle (a lookahead judge reads the cycle's greedy_child): they are all given 0."""
    parents = node_parents(paths[None])[0][: n_valid + 1]
    return DraftTree(tuple(int(p) for p in parents), (0,) * (n_valid + 1))


class CachedTargetEngine(ReferenceTargetEngine):
    """The AutoJudge target engine (accept mode), keeping each request's KV cache across cycles.

    Each request of a cycle is its prefix (the first ``L`` tokens of its rows, ``L`` read from its
    root's row) and its valid draft nodes; the cache keeps at most ``L - 1`` tokens, so the root
    (the last prefix token) is always fed and gives node 1's prediction. After the decision the cache
    keeps the prefix and the accepted nodes.
    """

    def __init__(self, target: LanguageModel, head):
        super().__init__(target, head)
        self.cache = SessionCache(target)

    @torch.inference_mode()
    def verify_requests(self, keys: Sequence[str], cycle: PackedCycle) -> Acceptance:
        B, N = cycle.draft_tokens.shape
        if len(keys) != B:
            raise ValueError(f"{len(keys)} request keys for a cycle of {B} requests")
        self.check_cycle(cycle)
        row_starts = np.concatenate([[0], np.cumsum(cycle.context_lengths)[:-1]])  # [R]
        logits, hidden, states = [], [], []
        for b, key in enumerate(keys):
            start = int(row_starts[np.flatnonzero(cycle.row_request == b)[0]])
            L = int(cycle.node_rows[b * (N + 1)]) - start + 1
            prefix = cycle.input_ids[start:start + L].tolist()
            n_valid = int(np.clip(cycle.draft_lens[b], 0, N))
            tree = request_tree(cycle.paths[b], n_valid)
            seq = self.cache.resume(key, prefix, L - 1)
            out, P, keep = tree_forward(seq.session, prefix, tree, cycle.draft_tokens[b, :n_valid])
            self.cache.fed_tokens += P + n_valid
            rows = torch.cat([torch.arange(P - 1, P + n_valid), torch.full((N - n_valid,), P - 1)])  # [N+1]
            logits.append(out.logits[rows])  # [N+1, V]: invalid nodes read the root's row, as node_rows says
            hidden.append(out.hidden[rows])  # [N+1, Ht]
            states.append((seq, prefix, keep))
        acc = self.accept_nodes(cycle, torch.stack(logits), torch.stack(hidden))
        for b, (seq, prefix, keep) in enumerate(states):
            nodes = [int(n) for n in cycle.paths[b, acc.best_path[b], 1:acc.accepted_len[b] + 1]]
            seq.session.retain(keep, [keep + n - 1 for n in nodes])
            seq.tokens = prefix + [int(cycle.draft_tokens[b, n - 1]) for n in nodes]
        return acc


class KeyedDraft:
    """One request's view of the draft stand-in (a :class:`..runner.chain_drafter.DraftEngine`)."""

    returns_hidden = False

    def __init__(self, engine: CachedDraftEngine, key: str, end_id: int = -1):
        self.engine, self.key, self.end_id, self.vocab_size = engine, key, end_id, engine.vocab_size

    def generate(self, prompts, max_new_tokens, *, logits, hidden):
        return [self.engine.generate(self.key, p, max_new_tokens, self.end_id, logits) for p in prompts]


class KeyedTarget:
    """One request's view of the target stand-in (a verifier of :func:`..runner.loop.engine_generate`)."""

    needs_draft_hidden = False

    def __init__(self, engine: CachedTargetEngine, key: str):
        self.engine, self.key = engine, key
        self.needs_greedy_child = engine.needs_greedy_child

    def verify(self, cycle):
        return self.engine.verify_requests([self.key], cycle)
