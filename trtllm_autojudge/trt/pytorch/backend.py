"""The judge rule in the PyTorch backend's draft-token processing: the part that needs no TensorRT-LLM.

TensorRT-LLM's ``TorchSampler`` (``tensorrt_llm/_torch/pyexecutor/sampler.py``) verifies the
draft tokens of each generation request from its ``1 + draft_len`` logits rows (context requests'
rows come first, then each generation request's, densely packed). Row ``n`` is the target's
prediction for the child of node ``n`` (row 0: the root), the convention of
:mod:`trtllm_autojudge.spec.acceptance`. Chains compare ``py_draft_tokens`` one by one; trees
walk ``spec_tree_manager.get_eagle_paths(seq_slot)``: paths ``[P, D+1]`` rooted at node 0, -1
padded, our convention too.

:func:`accept_requests` replaces that walk for a whole step: it gathers every request's node rows
of the logits and of the LM head's input (the target's final-norm hidden states, the DT feature)
and runs ``torch.ops.autojudge.accept`` (:mod:`trtllm_autojudge.ops.torch_ops`: CUDA kernels on a
GPU, the C++ host core on CPU), or the Python reference when the op is not built.
:func:`step_tokens` turns one request's result into the tokens to append and the ``new_tokens``
row each belongs to. :mod:`.sampler` applies them inside TensorRT-LLM.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ...decoding.rules import judge_relaxed
from ...judge.head import JudgeHead
from ...spec.acceptance import PAD, Acceptance, accept_tree


@dataclass
class JudgedStep:
    tokens: list[int]  # tokens to append: the accepted draft tokens, then the correction token
    rows: list[int]  # new_tokens row of each token: the node it follows (its parent on the best path)
    accepted: int  # accepted draft tokens
    judged: int  # of which mismatches let through by the judge


class JudgeScorer:
    """A DT judge, folded: ``logit = w . h + c`` on the target's final-norm hidden rows."""

    def __init__(self, head: JudgeHead, threshold: float | None = None):
        if head.setup != "DT":
            raise ValueError(f"the PyTorch-backend path reads the target's hidden states only: it runs DT judges, "
                             f"this judge has setup {head.setup}")
        self.head = head
        self.threshold = head.threshold if threshold is None else float(threshold)
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must lie in [0, 1], got {self.threshold}")
        w, self.c = head.folded()
        self.w = torch.from_numpy(w)  # [Ht] float32

    @property
    def target_hidden(self) -> int:
        return self.head.target_hidden


def generation_row_offsets(num_context_rows: int, draft_lens: Sequence[int]) -> list[int]:
    """First logits row of each generation request: after the context rows, ``1 + draft_len`` each."""
    offsets, row = [], int(num_context_rows)
    for k in draft_lens:
        offsets.append(row)
        row += 1 + int(k)
    return offsets


def node_row_index(row_offsets: Sequence[int], draft_lens: Sequence[int]) -> tuple[np.ndarray, int]:
    """``[B*(N+1)]`` logits row of each node, N = the longest draft; nodes past a request's draft
    point at its root row (they are not valid: ``draft_lens`` excludes them)."""
    N = max((int(k) for k in draft_lens), default=0)
    index = np.zeros((len(draft_lens), N + 1), np.int64)
    for b, (start, k) in enumerate(zip(row_offsets, draft_lens)):
        index[b] = start
        index[b, : int(k) + 1] = start + np.arange(int(k) + 1)
    return index.reshape(-1), N


def batch_paths(draft_lens: Sequence[int], trees: Sequence[np.ndarray | None]) -> np.ndarray:
    """``[B, P, D+1]``: a request's eagle paths, or its chain ``[0, 1, ..., k]``; padded with -1."""
    per = [np.arange(int(k) + 1)[None] if t is None else np.asarray(t) for k, t in zip(draft_lens, trees)]
    P, D1 = max(p.shape[0] for p in per), max(p.shape[1] for p in per)
    out = np.full((len(per), P, D1), PAD, np.int32)
    for b, p in enumerate(per):
        out[b, : p.shape[0], : p.shape[1]] = p
    return out


def accept_requests(
    scorer: JudgeScorer,
    logits: torch.Tensor,  # [R, V]: the step's logits rows (model_outputs["logits"])
    hidden: torch.Tensor,  # [R, Ht]: the LM head's input rows, same order
    index: np.ndarray,  # [B*(N+1)]: node_row_index
    draft_tokens: np.ndarray,  # [B, N] int
    draft_lens: np.ndarray,  # [B] int
    paths: np.ndarray,  # [B, P, D+1] int
    thresholds: np.ndarray,  # [B] float in [0, 1]
    use_op: bool = True,
) -> Acceptance:
    """Judge-gated acceptance of every request of the step (numpy results)."""
    rows = torch.as_tensor(index, device=logits.device)
    node_logits, node_hidden = logits[rows], hidden[rows]  # [B*(N+1), V], [B*(N+1), Ht]
    B, N = np.asarray(draft_tokens).shape
    if use_op:
        from ...ops.torch_ops import accept

        dev = logits.device
        as_int = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.int32, device=dev)  # noqa: E731
        out = accept(node_logits, node_hidden, as_int(draft_tokens), as_int(draft_lens), as_int(paths),
                     torch.as_tensor(np.asarray(thresholds, np.float32), device=dev), scorer.w.to(dev), scorer.c)
        return Acceptance(accepted_len=out.accepted_lens.cpu().numpy(), best_path=out.best_path.cpu().numpy(),
                          accepted_tokens=out.accepted_tokens.cpu().numpy(), judged_count=out.judged_count.cpu().numpy())
    judge_logit = (node_hidden.detach().to("cpu", torch.float64) @ scorer.w.double() + scorer.c).numpy()
    target_argmax = node_logits.argmax(-1).cpu().numpy().reshape(B, N + 1)
    relaxed = judge_relaxed(judge_logit.reshape(B, N + 1), np.asarray(thresholds, np.float64))
    return accept_tree(np.asarray(draft_tokens), target_argmax, np.asarray(paths), relaxed, np.asarray(draft_lens))


def step_tokens(acc: Acceptance, b: int, paths: np.ndarray) -> JudgedStep:
    """Tokens to append for request ``b`` and the ``new_tokens`` row each one is written to."""
    length, best = int(acc.accepted_len[b]), int(acc.best_path[b])
    rows = [int(r) for r in paths[b, best, : length + 1]]
    return JudgedStep(acc.tokens(b), rows, length, int(acc.judged_count[b]))
