"""What the AutoJudge engines compute, written with the reference runtime (any device, no TensorRT).

:class:`ReferenceTargetEngine` takes exactly the inputs of the AutoJudge target engine
(:class:`.packing.PackedCycle`) and returns exactly its outputs: it runs every context row through
the target, gathers the final-norm hidden state and logits at ``node_rows``, scores the judge and
applies :func:`trtllm_autojudge.decoding.acceptance.accept_tree`. :class:`ReferenceDrafter` drafts
a chain tree the way the stock draft engine does (greedy chain plus the draft's top-W per step).
Together they are the CPU specification of the engine path: the tests compare them with the
reference speculative loop, and on a GPU host the engine's outputs can be compared with them on
the same inputs.
"""
from __future__ import annotations

import numpy as np
import torch

from ..backends.protocol import LanguageModel
from ..decoding.acceptance import Acceptance, accept_tree
from ..decoding.rules import judge_relaxed
from ..decoding.tree import DraftTree
from ..judge.head import JudgeHead
from .loop import DraftProposal
from .packing import PackedCycle, chain_width, check_chain_tree, pack_cycle, tree_from_chain


def forward_rows(lm: LanguageModel, input_ids: np.ndarray, context_lengths: np.ndarray
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Run each context row on its own (no KV cache across rows), as the context-only engine does.

    Returns logits [T, V] and final-norm hidden states [T, H] of the packed tokens.
    """
    logits, hidden, start = [], [], 0
    for length in context_lengths.tolist():
        out = lm.session().forward(input_ids[start : start + length].tolist())
        logits.append(out.logits)
        hidden.append(out.hidden)
        start += length
    return torch.cat(logits), torch.cat(hidden)


class ReferenceTargetEngine:
    """The AutoJudge target engine (accept mode) on the reference runtime."""

    def __init__(self, target: LanguageModel, head: JudgeHead):
        if not head.usable_while_decoding:
            raise ValueError(f"judge setup {head.setup} is not computable while decoding: use DT or DD-DT")
        head.check_models(target_hidden=target.hidden_size)
        self.target, self.head = target, head
        self.needs_draft_hidden = "DD" in head.blocks
        self.w, self.c = head.folded()

    @torch.inference_mode()
    def verify(self, cycle: PackedCycle) -> Acceptance:
        B, N = cycle.draft_tokens.shape
        logits, hidden = forward_rows(self.target, cycle.input_ids, cycle.context_lengths)
        rows = torch.as_tensor(cycle.node_rows, dtype=torch.long)
        node_logits, node_hidden = logits[rows], hidden[rows]  # [B*(N+1), V], [B*(N+1), Ht]
        blocks = {"DT": node_hidden.double().cpu().numpy()}
        if self.needs_draft_hidden:
            if cycle.draft_hidden is None:
                raise ValueError(f"judge setup {self.head.setup} needs the draft's hidden states in the cycle")
            blocks["DD"] = cycle.draft_hidden.astype(np.float64)
        x = np.concatenate([blocks[b] for b in self.head.blocks], axis=1)  # [B*(N+1), F]
        judge_logit = (x @ self.w.astype(np.float64) + self.c).reshape(B, N + 1)
        target_argmax = node_logits.argmax(-1).cpu().numpy().reshape(B, N + 1)
        relaxed = judge_relaxed(judge_logit, cycle.threshold.astype(np.float64))
        return accept_tree(cycle.draft_tokens, target_argmax, cycle.paths, relaxed, cycle.draft_lens)


class ReferenceDrafter:
    """Greedy chain drafting with the draft's top-W tokens per step (a stock draft engine's view)."""

    def __init__(self, draft: LanguageModel):
        self.draft = draft

    @torch.inference_mode()
    def propose(self, prefixes: list[list[int]], tree: DraftTree, need_hidden: bool) -> DraftProposal:
        check_chain_tree(tree)
        D, W = tree.max_depth, chain_width(tree)
        chain = np.zeros((len(prefixes), D), np.int64)
        topk = np.zeros((len(prefixes), D, W), np.int64)
        for b, prefix in enumerate(prefixes):
            session = self.draft.session()
            out = session.forward(list(prefix))
            for step in range(D):
                top = torch.topk(out.logits[-1], W).indices
                topk[b, step], chain[b, step] = top.cpu().numpy(), int(top[0])
                if step + 1 < D:
                    out = session.forward([int(chain[b, step])])
        node_tokens, draft_lens = tree_from_chain(chain, topk, np.full(len(prefixes), D), tree)
        hidden = None
        if need_hidden:
            packed = pack_cycle(prefixes, tree, node_tokens, draft_lens, np.zeros(len(prefixes), np.float32))
            _, h = forward_rows(self.draft, packed.input_ids, packed.context_lengths)
            hidden = h[torch.as_tensor(packed.node_rows, dtype=torch.long)].double().cpu().numpy()
            hidden = hidden.reshape(len(prefixes), tree.num_nodes + 1, -1)
        return DraftProposal(node_tokens, draft_lens, hidden, forwards=D)
