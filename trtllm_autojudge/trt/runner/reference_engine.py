"""What the AutoJudge engines compute, written with the reference runtime (any device, no TensorRT).

:class:`ReferenceTargetEngine` takes exactly the inputs of the AutoJudge target engine
(:class:`.packing.PackedCycle`) and returns exactly its outputs: it runs every context row through
the target, gathers the final-norm hidden state and logits at ``node_rows``, scores the judge and
applies :func:`trtllm_autojudge.decoding.acceptance.accept_tree`. :class:`ReferenceDraftEngine`
returns what the draft engine returns through the executor: greedy tokens, generation logits and
the hidden-state rows of the DD-DT draft engine's additional output (:mod:`.draft_spec`).
:class:`ReferenceDrafter` is the engine path's drafter (:class:`.chain_drafter.ChainTreeDrafter`)
on it. Together they are the CPU specification of the engine path: the tests compare them with the
reference speculative loop, and on a GPU host the engines' outputs can be compared with them on
the same inputs.
"""
from __future__ import annotations

import numpy as np
import torch

from ...backends.protocol import LanguageModel
from ...decoding.acceptance import Acceptance, accept_tree
from ...decoding.rules import judge_relaxed
from ...judge.head import JudgeHead
from .chain_drafter import ChainTreeDrafter, DraftOutput
from .packing import PackedCycle


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


class ReferenceDraftEngine:
    """The draft engine as the executor returns it (:class:`.chain_drafter.DraftEngine`), on the
    reference runtime: greedy decoding with a KV cache, stopping after ``end_id`` (-1: never)."""

    def __init__(self, draft: LanguageModel, end_id: int = -1, returns_hidden: bool = True):
        self.draft, self.end_id, self.returns_hidden = draft, end_id, returns_hidden
        self.vocab_size = draft.vocab_size

    @torch.inference_mode()
    def generate(self, prompts, max_new_tokens: int, *, logits: bool, hidden: bool) -> list[DraftOutput]:
        if hidden and not self.returns_hidden:
            raise ValueError("this draft engine has no hidden-state output")
        outs = []
        for prompt in prompts:
            session = self.draft.session()
            step = session.forward(list(prompt))
            tokens = []
            logit_rows = np.zeros((max_new_tokens, self.vocab_size))  # [max_new_tokens, V]
            hidden_rows = np.zeros((max_new_tokens, self.draft.hidden_size))  # [max_new_tokens, Hd]
            for k in range(max_new_tokens):
                # row k: the step whose last input is the prompt's last token (k = 0) or generated token k
                logit_rows[k] = step.logits[-1].double().cpu().numpy()
                hidden_rows[k] = step.hidden[-1].double().cpu().numpy()
                tokens.append(int(torch.topk(step.logits[-1], 1).indices[0]))
                if tokens[-1] == self.end_id or k + 1 == max_new_tokens:
                    break
                step = session.forward([tokens[-1]])
            outs.append(DraftOutput(tokens, logit_rows if logits else None, hidden_rows if hidden else None))
        return outs


class ReferenceDrafter(ChainTreeDrafter):
    """The engine path's drafter on :class:`ReferenceDraftEngine`."""

    def __init__(self, draft: LanguageModel, end_id: int = -1):
        super().__init__(ReferenceDraftEngine(draft, end_id))
