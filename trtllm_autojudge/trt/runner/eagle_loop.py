"""The EAGLE route's loop: TensorRT-LLM 1.2's EAGLE decoding as the executor drives it, one engine step
at a time (:class:`EagleEngine`: the engine on a GPU host through the executor, or
:class:`.eagle_engine.ReferenceEagleEngine` on CPU).

First step: every request is a context request (its prompt); the engine emits the target's first token
and drafts a tree after it. Each later step: every unfinished request is a generation request with its
last accepted token and the draft the engine returned (:mod:`.eagle_step`); the engine returns the
accepted tokens and the next draft. Per-request thresholds travel as ``posterior_threshold``.

Metrics: accepted draft tokens per cycle (``num_accepted_tokens - 1``). The judged count is not
observable: the stock outputs carry tokens, and the rewritten logits no longer say which matches were
judged (as on the stock route).
"""
from __future__ import annotations

import time
from typing import Protocol, Sequence

import numpy as np

from ...decoding.speculative import CycleMetrics, GenerationResult
from .eagle_step import EagleOutput, EagleStep, EagleStepOutputs, assemble_step, context_step_entry, generation_step_entry
from .loop import append_cycle_tokens, check_thresholds, start_generation


class EagleEngine(Protocol):
    max_draft_len: int  # N
    max_path_len: int  # num_eagle_layers + 1

    def step(self, step: EagleStep) -> EagleStepOutputs: ...

    def release(self, request_id: int) -> None:
        """Free a finished request's cache."""
        ...


def eagle_generate(
    engine: EagleEngine,
    prompts: Sequence[Sequence[int]],
    *,
    thresholds: float | Sequence[float],
    max_new_tokens: int,
    stop_ids: Sequence[int],
) -> list[GenerationResult]:
    """Generate for a batch of prompts; finished requests leave the batch. ``thresholds``: one value or
    one per prompt (0: lossless, the stock EAGLE engine's output)."""
    stop, seqs, results, active = start_generation(prompts, stop_ids, max_new_tokens)
    thr = check_thresholds(thresholds, len(prompts))
    drafts: dict[int, tuple] = {}  # request -> (next draft tokens [N], length, paths [N+1, D+1])
    while active:
        entries = [context_step_entry(seqs[i], engine.max_draft_len, engine.max_path_len) if i not in drafts
                   else generation_step_entry(seqs[i][-1], *drafts[i]) for i in active]
        step = assemble_step(list(active), entries, thr[active])
        t0 = time.perf_counter()
        out = engine.step(step).tensors
        t1 = time.perf_counter()
        still = []
        for b, i in enumerate(step.request_ids):
            res, seq = results[i], seqs[i]
            length = int(out[EagleOutput.NUM_ACCEPTED_TOKENS.value][b])
            tokens = [int(t) for t in out[EagleOutput.ACCEPTED_TOKENS.value][b, :length]]
            draft_len = int(step.tensors["draft_lens"][b])
            res.cycles.append(CycleMetrics(accepted=length - 1, judged=0, draft_nodes=draft_len, draft_forwards=0,
                                           target_forwards=1, t_draft=0.0, t_verify=t1 - t0, t_accept=0.0, t_rule=0.0))
            drafts[i] = (np.asarray(out[EagleOutput.NEXT_DRAFT_TOKENS.value][b]),
                         int(out[EagleOutput.NEXT_DRAFT_LENS.value][b]),
                         np.asarray(out[EagleOutput.NEXT_DRAFT_PATHS.value][b]))
            if append_cycle_tokens(res, seq, tokens, stop, max_new_tokens):
                still.append(i)
            else:
                engine.release(i)
        active = sorted(still)
    for res, seq in zip(results, seqs):
        res.tokens = seq[len(res.prompt_ids):]
    return results
