"""The engine-path speculative loop: draft a tree per request, verify a batch in one target run.

It knows nothing about TensorRT: a :class:`Drafter` proposes node tokens, a :class:`Verifier`
returns the accepted tokens for a :class:`.packing.PackedCycle` (the AutoJudge target engine on a
GPU host, :class:`.reference_engine.ReferenceTargetEngine` on CPU). Per request it keeps the
same metrics as the reference loop (:class:`trtllm_autojudge.decoding.speculative.CycleMetrics`):
accepted length, judged accepts and one entry per cycle, and it appends tokens with the same
budget and stop rules, so on the same models it produces the same tokens.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from ...decoding.speculative import CycleMetrics, GenerationResult
from ...decoding.tree import DraftTree
from ...spec.acceptance import Acceptance
from .packing import PackedCycle, pack_cycle


@dataclass
class DraftProposal:
    node_tokens: np.ndarray  # [B, N] int: token of node n at column n-1
    draft_lens: np.ndarray  # [B] int: valid nodes per request
    draft_hidden: np.ndarray | None = None  # [B, N+1, Hd] float (judges with the blocks DD, DD1 only)
    forwards: int = 0  # draft forward passes spent (metrics)


class Drafter(Protocol):
    def propose(self, prefixes: list[list[int]], tree: DraftTree, need_hidden: bool) -> DraftProposal: ...


class Verifier(Protocol):
    needs_draft_hidden: bool  # the judge reads the draft's hidden states (blocks DD, DD1)
    needs_greedy_child: bool  # the judge looks ahead (blocks DT1, DT2, DD1, LS): the cycle carries greedy children

    def verify(self, cycle: PackedCycle) -> Acceptance: ...


def check_thresholds(thresholds: float | Sequence[float], n: int) -> np.ndarray:
    t = np.broadcast_to(np.asarray(thresholds, np.float32), (n,)).copy()
    if not np.all((t >= 0) & (t <= 1)):
        raise ValueError(f"thresholds must lie in [0, 1] (0 = lossless, judge off), got {t}")
    return t


def engine_generate(
    drafter: Drafter,
    verifier: Verifier,
    prompts: Sequence[Sequence[int]],
    *,
    tree: DraftTree,
    thresholds: float | Sequence[float],
    max_new_tokens: int,
    stop_ids: Sequence[int],
    on_cycle: Callable[[int, list[int], CycleMetrics], None] | None = None,
) -> list[GenerationResult]:
    """Generate for a static batch of prompts; finished requests leave the batch.

    ``thresholds`` is one value or one per prompt (0 accepts exact matches only: lossless).
    ``on_cycle(i, tokens, metrics)``, when given, is called after each cycle with the tokens it
    appended to request i and its metrics (a streaming server sends them; an exception it raises ends
    the generation).
    """
    stop, seqs, results, active = start_generation(prompts, stop_ids, max_new_tokens)
    thr = check_thresholds(thresholds, len(prompts))
    while active:
        prefixes = [seqs[i] for i in active]
        t0 = time.perf_counter()
        proposal = drafter.propose(prefixes, tree, verifier.needs_draft_hidden)
        t1 = time.perf_counter()
        cycle = pack_cycle(prefixes, tree, proposal.node_tokens, proposal.draft_lens, thr[active], proposal.draft_hidden,
                           greedy_child=verifier.needs_greedy_child)
        acc = verifier.verify(cycle)
        t2 = time.perf_counter()
        still = []
        for b, i in enumerate(active):
            res, seq = results[i], seqs[i]
            # The judge runs inside the target engine: its time is part of t_verify.
            res.cycles.append(CycleMetrics(accepted=int(acc.accepted_len[b]), judged=int(acc.judged_count[b]),
                                           draft_nodes=int(proposal.draft_lens[b]), draft_forwards=proposal.forwards,
                                           target_forwards=1, t_draft=t1 - t0, t_verify=t2 - t1, t_accept=0.0,
                                           t_rule=0.0))
            before = len(seq)
            if append_cycle_tokens(res, seq, acc.tokens(b), stop, max_new_tokens):
                still.append(i)
            if on_cycle is not None:
                on_cycle(i, seq[before:], res.cycles[-1])
        active = still
    for res, seq in zip(results, seqs):
        res.tokens = seq[len(res.prompt_ids):]
    return results


def append_cycle_tokens(res: GenerationResult, seq: list[int], tokens: Sequence[int], stop: set[int],
                        max_new_tokens: int) -> bool:
    """Append one cycle's tokens to ``seq`` within the budget, stopping at EOS (``res.stop_reason``);
    True while the sequence goes on."""
    budget = max_new_tokens - (len(seq) - len(res.prompt_ids))
    for t in tokens[:budget]:
        seq.append(t)
        if t in stop:
            res.stop_reason = "eos"
            return False
    return len(seq) - len(res.prompt_ids) < max_new_tokens


def start_generation(prompts: Sequence[Sequence[int]], stop_ids: Sequence[int], max_new_tokens: int):
    """(stop set, running sequences, results, active indices) of a batch of prompts (none may be empty)."""
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    seqs = [[int(t) for t in p] for p in prompts]
    results = [GenerationResult(list(p), [], "budget") for p in seqs]
    return {int(s) for s in stop_ids}, seqs, results, [i for i in range(len(seqs)) if max_new_tokens > 0]
