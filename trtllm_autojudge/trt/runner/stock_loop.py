"""The stock route's loop: TensorRT-LLM 1.2's draft-target flow, unchanged.

Per cycle (as ``examples/run.py`` ``run_draft_target_model`` and the Triton BLS's
``_spec_generate`` do it): the draft engine generates D greedy tokens per request (the same
drafting as the context route: :class:`.chain_drafter.ChainTreeDrafter` on a chain); then every
request goes to the target as a FRESH request, ``prefix`` with the drafted tokens as external
draft tokens and ``max_tokens = K + 1``. Its prefix's KV blocks are reused, so only the draft
tokens and the uncached tail are computed. The target engine's plugin has rewritten its logits, so
the runtime's exact-match acceptance returns exactly the judge-approved prefix followed by one
target token. A :class:`StockTarget` is that request on a GPU host
(:class:`trtllm_autojudge.trt.runner.engines.ExecutorStockTarget`) or
:class:`.reference_engine.ReferenceStockTarget` on CPU.

Metrics: accepted draft tokens per cycle (returned tokens - 1). The judged count is not observable:
the stock runtime returns tokens, and the rewritten logits no longer say which matches were judged.
"""
from __future__ import annotations

import time
from typing import Protocol, Sequence

from ...decoding.speculative import CycleMetrics, GenerationResult
from ...decoding.tree import DraftTree
from .loop import Drafter, append_cycle_tokens, start_generation


class StockTarget(Protocol):
    def verify(self, prefixes: list[list[int]], drafts: list[list[int]]) -> list[list[int]]:
        """Per request: the accepted draft tokens, then one target token (the correction or bonus)."""
        ...


def stock_generate(
    drafter: Drafter,
    target: StockTarget,
    prompts: Sequence[Sequence[int]],
    *,
    depth: int,
    max_new_tokens: int,
    stop_ids: Sequence[int],
) -> list[GenerationResult]:
    """Generate for a batch of prompts with chains of ``depth`` draft tokens; finished requests leave
    the batch. The threshold is the target engine's (one per engine on this route)."""
    stop, seqs, results, active = start_generation(prompts, stop_ids, max_new_tokens)
    if depth < 1:
        raise ValueError(f"depth must be >= 1 (draft tokens per cycle), got {depth}")
    chain = DraftTree.chain(depth)
    while active:
        prefixes = [seqs[i] for i in active]
        t0 = time.perf_counter()
        proposal = drafter.propose(prefixes, chain, False)
        drafts = [[int(t) for t in proposal.node_tokens[b, : int(proposal.draft_lens[b])]] for b in range(len(active))]
        t1 = time.perf_counter()
        returned = target.verify(prefixes, drafts)
        t2 = time.perf_counter()
        still = []
        for b, i in enumerate(active):
            res, seq, tokens = results[i], seqs[i], returned[b]
            if not 1 <= len(tokens) <= len(drafts[b]) + 1 or tokens[:-1] != drafts[b][: len(tokens) - 1]:
                raise RuntimeError(f"the target returned {tokens} for drafts {drafts[b]}: expected an accepted prefix of "
                                   f"the drafts and one target token (is the target a draft_tokens_external engine?)")
            res.cycles.append(CycleMetrics(accepted=len(tokens) - 1, judged=0, draft_nodes=len(drafts[b]),
                                           draft_forwards=proposal.forwards, target_forwards=1, t_draft=t1 - t0,
                                           t_verify=t2 - t1, t_accept=0.0, t_rule=0.0))
            if append_cycle_tokens(res, seq, tokens, stop, max_new_tokens):
                still.append(i)
        active = still
    for res, seq in zip(results, seqs):
        res.tokens = seq[len(res.prompt_ids):]
    return results
