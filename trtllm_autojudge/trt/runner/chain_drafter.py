"""Chain-tree drafting on a draft engine, for the engine-path loop (:class:`.loop.Drafter`).

:class:`DraftEngine` is what the drafter needs from a draft engine: greedy generation for a batch
of contexts with, per request, the generated tokens, the generation logits and (for a judge with
the blocks DD or DD1) the hidden-state rows the TensorRT-LLM executor returns for an additional model output
(:mod:`.draft_spec`). On a GPU host it is the executor
(:class:`trtllm_autojudge.trt.runner.engines.ExecutorDraftEngine`); on CPU
:class:`.reference_engine.ReferenceDraftEngine`, so the same drafting code runs in the tests.

One cycle: generate D tokens per request (the greedy chain; its logits give the top-W siblings),
then, when the judge reads draft hidden states, one more pass with ``max_new_tokens = 1`` over the
nodes the chain generation did not take as input (:func:`.drafts.unfed_nodes`): its row 0 is the
draft's hidden state with that node as the last input token.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from ...decoding.tree import DraftTree
from .drafts import assemble_draft_hidden, draft_from_outputs, node_context, unfed_nodes
from .loop import DraftProposal
from .packing import chain_width, tree_from_chain


@dataclass
class DraftOutput:
    """One request's result; rows past the generated tokens are unspecified (the executor's layout)."""

    tokens: list[int]  # generated tokens, prompt excluded (an end_id token included)
    logits: np.ndarray | None  # [max_new_tokens, V_padded] generation logits (when asked for)
    hidden: np.ndarray | None  # [max_new_tokens, Hd]: row 0 the last prompt token, row k generated token k


class DraftEngine(Protocol):
    vocab_size: int
    end_id: int  # generation stops after this token
    returns_hidden: bool  # the engine has the hidden-state output (built for a judge with the blocks DD or DD1)

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, *, logits: bool,
                 hidden: bool) -> list[DraftOutput]: ...


class ChainTreeDrafter:
    """Drafts chain trees (greedy chain plus top-W leaf siblings per depth) on a :class:`DraftEngine`."""

    def __init__(self, engine: DraftEngine):
        self.engine = engine

    def propose(self, prefixes: list[list[int]], tree: DraftTree, need_hidden: bool) -> DraftProposal:
        if need_hidden and not self.engine.returns_hidden:
            raise ValueError("the draft engine does not return its hidden states, which a judge with the blocks DD or "
                             "DD1 reads: rebuild it with `trtllm-autojudge build-engines --judge <that judge>` (it builds "
                             "the draft with trtllm_autojudge/trt/engine/draft_model_cls.py), or use a target-only judge "
                             "(e.g. DT or DT-DT1-DT2-LS)")
        D, W = tree.max_depth, chain_width(tree)
        outs = self.engine.generate(prefixes, D, logits=W > 1, hidden=need_hidden)
        output_ids = np.full((len(prefixes), max(len(p) for p in prefixes) + D), self.engine.end_id, np.int64)
        for b, (p, o) in enumerate(zip(prefixes, outs)):
            output_ids[b, : len(p) + len(o.tokens)] = list(p) + list(o.tokens)
        lengths = np.array([len(p) + len(o.tokens) for p, o in zip(prefixes, outs)])
        logits = np.stack([o.logits[:D] for o in outs]) if W > 1 else None  # [B, D, V_padded]
        chain, topk, drafted = draft_from_outputs(prefixes, output_ids, lengths, logits, D, W, self.engine.vocab_size,
                                                  self.engine.end_id)
        node_tokens, draft_lens = tree_from_chain(chain, topk, drafted, tree)
        if not need_hidden:
            return DraftProposal(node_tokens, draft_lens, None, forwards=D)
        leaves = unfed_nodes(tree, draft_lens, drafted)
        contexts = [node_context(prefixes[b], tree, node_tokens[b], n) for b, n in leaves]
        leaf_outs = self.engine.generate(contexts, 1, logits=False, hidden=True) if leaves else []
        chain_hidden = np.stack([o.hidden for o in outs])  # [B, D, Hd]
        leaf_hidden = np.array([o.hidden[0] for o in leaf_outs]).reshape(len(leaves), chain_hidden.shape[2])
        hidden = assemble_draft_hidden(tree, chain_hidden, drafted, leaves, leaf_hidden)
        return DraftProposal(node_tokens, draft_lens, hidden, forwards=D + bool(leaves))
