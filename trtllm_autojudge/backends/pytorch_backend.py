"""The judge rule in the PyTorch backend's draft-token processing: the part that needs no TensorRT-LLM.

TensorRT-LLM's ``TorchSampler`` (``tensorrt_llm/_torch/pyexecutor/sampler.py``) verifies draft
tokens per request from ``new_tokens[step, seq_slot, beam]``: the target's greedy token for the
child of node ``step`` (row 0 is the root), the same convention as ``target_argmax`` in
:mod:`trtllm_autojudge.decoding.acceptance`. Chains compare ``py_draft_tokens`` one by one; trees
walk ``spec_tree_manager.get_eagle_paths(seq_slot)``, paths ``[P, D+1]`` rooted at node 0 and
padded with -1, again our convention. :func:`judged_step` replaces that walk with
:func:`~trtllm_autojudge.decoding.acceptance.accept_tree` under the judge's ``relaxed`` mask and
says which token to append for each row; :mod:`.pytorch_backend_sampler` applies it inside
TensorRT-LLM.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ..decoding.acceptance import accept_tree
from ..decoding.rules import judge_relaxed
from ..judge.head import JudgeHead


@dataclass
class JudgedStep:
    tokens: list[int]  # tokens to append: the accepted draft tokens, then the correction token
    rows: list[int]  # new_tokens row each token is written to (the parent node of its position)
    accepted: int  # accepted draft tokens
    judged: int  # of which mismatches let through by the judge
    judged_flags: list[bool]  # per token: a draft token that differs from the target's (judged)


class JudgeScorer:
    """Folded judge of a DT head: ``logit = w . h + c`` on the target's final-norm hidden rows."""

    def __init__(self, head: JudgeHead, threshold: float | None = None):
        if head.setup != "DT":
            raise ValueError(f"the PyTorch-backend path reads the target's hidden states only: it runs DT judges, "
                             f"this judge has setup {head.setup}")
        self.head = head
        self.threshold = head.threshold if threshold is None else float(threshold)
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must lie in [0, 1], got {self.threshold}")
        w, c = head.folded()
        self.w64, self.c = torch.from_numpy(w.astype(np.float64)), float(c)

    @property
    def target_hidden(self) -> int:
        return self.head.target_hidden

    def relaxed(self, hidden: torch.Tensor, threshold: float | None = None) -> np.ndarray:
        """hidden [N+1, Ht] (row n: node n as the input token) -> relaxed [N+1] bool (node 0 False)."""
        if hidden.ndim != 2 or hidden.shape[1] != self.target_hidden:
            raise ValueError(f"hidden rows must be [N+1, {self.target_hidden}], got {tuple(hidden.shape)}")
        logit = (hidden.detach().to("cpu", torch.float64) @ self.w64 + self.c).numpy()  # [N+1]
        return judge_relaxed(logit[None], self.threshold if threshold is None else threshold)[0]


def judged_step(
    draft_tokens: Sequence[int],  # [N]: token of node n at index n-1
    target_tokens: Sequence[int],  # [N+1]: target's greedy child of each node (new_tokens rows)
    relaxed: np.ndarray | None,  # [N+1] bool, None = lossless
    paths: np.ndarray | None = None,  # [P, D+1] eagle paths; None = the chain [0, 1, ..., N]
) -> JudgedStep:
    draft = np.asarray(draft_tokens, np.int64).reshape(-1)
    N = draft.shape[0]
    target = np.asarray(target_tokens, np.int64).reshape(-1)[: N + 1]
    if target.shape[0] != N + 1:
        raise ValueError(f"target_tokens needs N+1 = {N + 1} rows for {N} draft tokens, got {target.shape[0]}")
    paths = np.arange(N + 1, dtype=np.int64)[None] if paths is None else np.asarray(paths, np.int64)
    acc = accept_tree(draft[None], target[None], paths[None], None if relaxed is None else np.asarray(relaxed)[None])
    length, best = int(acc.accepted_len[0]), int(acc.best_path[0])
    rows = [int(r) for r in paths[best, : length + 1]]
    tokens = acc.tokens(0)
    flags = [j < length and tokens[j] != int(target[rows[j]]) for j in range(length + 1)]
    return JudgedStep(tokens, rows, length, int(acc.judged_count[0]), flags)


def generation_row_offsets(num_context_rows: int, draft_lens: Sequence[int]) -> list[int]:
    """First row of each generation request in ``model_outputs["logits"]``: context requests' rows
    come first, then each generation request's ``1 + draft_len`` rows, densely packed
    (``TorchSampler._process_requests`` / ``_select_generated_logits``)."""
    offsets, row = [], int(num_context_rows)
    for k in draft_lens:
        offsets.append(row)
        row += 1 + int(k)
    return offsets
