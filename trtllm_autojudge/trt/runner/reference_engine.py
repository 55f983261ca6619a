"""What the AutoJudge engines compute, written with the reference runtime (any device, no TensorRT).

:class:`ReferenceTargetEngine` takes exactly the inputs of the AutoJudge target engine
(:class:`.packing.PackedCycle`) and returns exactly its outputs: it runs every context row through
the target, gathers the final-norm hidden state and logits at ``node_rows``, scores the judge and
applies :func:`trtllm_autojudge.spec.acceptance.accept_tree`. :class:`ReferenceDraftEngine`
returns what the draft engine returns through the executor: greedy tokens, generation logits and
the hidden-state rows of the DD-DT draft engine's additional output (:mod:`.draft_spec`).
:class:`ReferenceStockTarget` is the stock route's target engine inside the executor's draft-target
flow: one packed step, the logits-mode rewrite, the runtime's exact-match acceptance.
:class:`ReferenceDrafter` is the engine path's drafter (:class:`.chain_drafter.ChainTreeDrafter`)
on it. Together they are the CPU specification of the engine path: the tests compare them with the
reference speculative loop, and on a GPU host the engines' outputs can be compared with them on
the same inputs.
"""
from __future__ import annotations

import numpy as np
import torch

from ...decoding.rules import judge_relaxed
from ...judge.export import unsupported_reason
from ...judge.head import JudgeHead
from ...models.protocol import LanguageModel
from ...spec import packed_step
from ...spec.acceptance import Acceptance, accept_tree
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
        reason = unsupported_reason(head, "plugin")  # this engine computes what the plugin does
        if reason:
            raise ValueError(reason)
        head.check_models(target_hidden=target.hidden_size)
        self.target, self.head = target, head
        self.needs_draft_hidden = head.needs_draft_hidden
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


class ReferenceStockTarget:
    """The stock route's target (:mod:`trtllm_autojudge.trt.engine.stock_spec`) as the executor runs
    it for one cycle of fresh draft-target requests, on the reference runtime.

    The cycle is one packed step of context requests, ``prefix + drafts`` each, laid out as
    TensorRT-LLM lays a last context chunk out (``host_context_lengths = len(prefix) + K``, rows at
    the last 1 + K tokens). The logits and the LM head's input rows are gathered at
    ``last_token_ids``, the plugin's rule rewrites the logits (:func:`.packed_step.rewrite_logits`,
    judge logits in float64), and the runtime's exact-match acceptance reads the rewritten argmax.
    """

    def __init__(self, target: LanguageModel, head: JudgeHead, threshold: float | None = None):
        if head.setup != "DT":
            raise ValueError(f"the stock route takes DT judges; this judge is {head.setup}")
        head.check_models(target_hidden=target.hidden_size)
        self.target, self.head = target, head
        self.threshold = head.threshold if threshold is None else float(threshold)
        self.w, self.c = head.folded()

    @torch.inference_mode()
    def verify(self, prefixes: list[list[int]], drafts: list[list[int]]) -> list[list[int]]:
        input_ids, lengths, last_token_ids = [], [], []
        for prefix, draft in zip(prefixes, drafts):
            input_ids += [int(t) for t in prefix] + [int(t) for t in draft]
            lengths.append(len(prefix) + len(draft))
            last_token_ids += [len(input_ids) - len(draft) + j for j in range(len(draft) + 1)]
        input_ids, lengths = np.asarray(input_ids, np.int32), np.asarray(lengths, np.int32)
        rows = np.asarray(last_token_ids, np.int32)
        logits, hidden = forward_rows(self.target, input_ids, lengths)  # [T, V], [T, Ht]
        gathered = torch.as_tensor(rows - 1, dtype=torch.long)
        row_logits = logits[gathered].float().cpu().numpy()  # [L, V]: the engine's logits rows
        judge_logit = hidden[gathered].double().cpu().numpy() @ self.w.astype(np.float64) + self.c  # [L]
        request_types = np.full(len(prefixes), packed_step.CONTEXT_REQUEST, np.int32)
        rewritten = packed_step.rewrite_logits(row_logits, row_logits.argmax(-1), judge_logit, input_ids, rows,
                                               request_types, lengths, self.threshold)
        decided = rewritten.argmax(-1)  # what the stock greedy decoder reads
        out, root = [], 0
        for draft in drafts:
            accepted = 0
            while accepted < len(draft) and draft[accepted] == decided[root + accepted]:
                accepted += 1
            out.append([int(t) for t in draft[:accepted]] + [int(decided[root + accepted])])
            root += len(draft) + 1
        return out

