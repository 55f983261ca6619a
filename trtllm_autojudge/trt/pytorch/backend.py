"""The judge rule in the PyTorch backend's draft-token processing: the part that needs no TensorRT-LLM.

TensorRT-LLM's ``TorchSampler`` (``tensorrt_llm/_torch/pyexecutor/sampler.py``) verifies the
draft tokens of each generation request from its ``1 + draft_len`` logits rows (context requests'
rows come first, then each generation request's, densely packed). Row ``n`` is the target's
prediction for the child of node ``n`` (row 0: the root), the convention of
:mod:`trtllm_autojudge.spec.acceptance`. Chains compare ``py_draft_tokens`` one by one; trees
walk ``spec_tree_manager.get_eagle_paths(seq_slot)`` (static trees of two-model EAGLE3,
``eagle_choices``): paths ``[N+1, D+1]``, row ``n`` the path from the root (node 0) to node ``n``,
-1 padded, our convention too; node ``n`` is draft token ``n - 1``.

:func:`accept_requests` replaces that walk for a whole step: it gathers every request's node rows
of the logits and of the LM head's input (the target's final-norm hidden states, the DT feature)
and runs ``torch.ops.autojudge.accept`` (:mod:`trtllm_autojudge.ops.torch_ops`: CUDA kernels on a
GPU, the C++ host core on CPU), or the Python reference when the op is not built. Those rows feed
every judge block read from the target (:data:`TARGET_BLOCKS`): DT at the node, and for a
lookahead judge DT1, DT2 and LS at its greedy child and grandchild (:func:`batch_greedy_child`).
:func:`step_tokens` turns one request's result into the tokens to append and the ``new_tokens``
row each belongs to, and for a tree the accepted nodes the KV cache keeps
(:meth:`JudgedStep.kv_indices`). :mod:`.sampler` applies them inside TensorRT-LLM.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ...decoding.rules import judge_relaxed, within_min_run
from ...judge.head import JudgeHead
from ...judge.lookahead import node_lookahead
from ...spec.acceptance import PAD, Acceptance, accept_tree

TARGET_BLOCKS = ("DT", "DT1", "DT2", "LS")  # the judge blocks the target's rows of one step give


@dataclass
class JudgedStep:
    tokens: list[int]  # tokens to append: the accepted draft tokens, then the correction token
    rows: list[int]  # new_tokens row of each token: the node it follows (its parent on the best path)
    accepted: int  # accepted draft tokens
    judged: int  # of which mismatches let through by the judge
    tree: bool  # the draft is a static tree: the KV cache keeps the accepted nodes by index

    def kv_indices(self, appended: int) -> list[int]:
        """``py_num_accepted_draft_tokens_indices`` once ``appended`` tokens of the step are in the
        sequence: the draft-token index (node - 1) of each appended token but the last, which is the
        next step's root (its key/value is computed then). Token i is node ``rows[i + 1]``'s draft token."""
        return [n - 1 for n in self.rows[1:appended]]


class JudgeScorer:
    """A judge of target blocks only, folded: ``logit = w . x + c``, x its blocks in setup order."""

    def __init__(self, head: JudgeHead, threshold: float | None = None):
        other = [b for b in head.blocks if b not in TARGET_BLOCKS]
        if other:
            raise ValueError(f"judge setup {head.setup} reads {'-'.join(other)}, which the PyTorch backend cannot "
                             f"feed: its sampler sees the target's logits and LM-head input rows (final-norm hidden "
                             f"states) at the chain or tree nodes of a step, the blocks {', '.join(TARGET_BLOCKS)}; "
                             f"train with a setup of those (`trtllm-autojudge features --setup DT` and `train --setup "
                             f"DT`), or run a DD-DT judge on the engine path's context route (docs/deploy.md)")
        unapplied = []  # parts of the judge's default operating point that the accept op has no input for
        if head.meta.get("veto"):
            unapplied.append(f"a token veto (classes {head.meta['veto'].get('classes')})")
        if head.min_target_prob:
            unapplied.append(f"a target-confidence gate (min_target_prob {head.min_target_prob:g})")
        if head.meta.get("max_judged") is not None:
            unapplied.append(f"a limit of {head.meta['max_judged']} judged acceptances per response (max_judged)")
        if unapplied:
            raise ValueError(f"this judge's default operating point has {' and '.join(unapplied)}, which "
                             f"torch.ops.autojudge.accept and the reference path here do not apply (only the Python "
                             f"decoding rule does, `--accept-impl python`): use a judge file without it on the "
                             f"PyTorch backend")
        self.head = head
        self.threshold = head.threshold if threshold is None else float(threshold)
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must lie in [0, 1], got {self.threshold}")
        w, self.c = head.folded()
        self.w = torch.from_numpy(w)  # [F] float32: the weights of the setup's blocks, in its order

    @property
    def target_hidden(self) -> int:
        return self.head.target_hidden

    def judge_logits(
        self,
        logits: torch.Tensor,  # [B, N+1, V]: the target's rows of each request's nodes
        hidden: torch.Tensor,  # [B, N+1, Ht]: the LM head's input rows, same nodes
        draft_tokens: np.ndarray,  # [B, N] int
        greedy_child: np.ndarray | None,  # [B, N+1] int: batch_greedy_child (lookahead judges), else None
    ) -> np.ndarray:  # [B, N+1] float64: +inf at a node without a verdict
        """The judge's logit at every node, as :class:`~trtllm_autojudge.decoding.modes.JudgeRule` scores it."""
        B, N1 = hidden.shape[:2]
        nodes = np.arange(N1)
        out = np.empty((B, N1))
        for b in range(B):
            blocks, has_verdict = {"DT": hidden[b]}, np.ones(N1, bool)  # [N+1, Ht], [N+1]
            if self.head.lookahead:
                more, has_verdict = node_lookahead(self.head.blocks, greedy_child[b], draft_tokens[b], nodes, logits[b],
                                                   hidden[b], None)
                blocks.update(more)
            x = torch.cat([blocks[k].float() for k in self.head.blocks], dim=-1)  # [N+1, F]
            out[b] = np.where(has_verdict, x.cpu().double().numpy() @ self.w.double().numpy() + self.c, np.inf)
        return out


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


def batch_greedy_child(draft_lens: Sequence[int], tree_children: Sequence[np.ndarray | None], N: int) -> np.ndarray:
    """``[B, N+1]``: the rank-0 child of each node, which a lookahead judge reads: a chain's next
    node, or the tree's (``tree_children[b]`` ``[n+1]``); -1 for none and past the request's draft."""
    out = np.full((len(draft_lens), N + 1), PAD, np.int64)
    for b, (k, child) in enumerate(zip(draft_lens, tree_children)):
        child = np.arange(1, N + 2) if child is None else np.asarray(child)
        out[b, : len(child)] = np.where(child <= int(k), child, PAD)
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
    greedy_child: np.ndarray | None = None,  # [B, N+1] int: batch_greedy_child, for a lookahead judge only
) -> Acceptance:
    """Judge-gated acceptance of every request of the step (numpy results)."""
    if (greedy_child is not None) != bool(scorer.head.lookahead):
        raise ValueError(f"judge setup {scorer.head.setup} {'reads' if scorer.head.lookahead else 'reads no'} "
                         f"lookahead blocks: {'give' if scorer.head.lookahead else 'do not give'} greedy_child [B, N+1]")
    rows = torch.as_tensor(index, device=logits.device)
    node_logits, node_hidden = logits[rows], hidden[rows]  # [B*(N+1), V], [B*(N+1), Ht]
    B, N = np.asarray(draft_tokens).shape
    if use_op:
        from ...ops.torch_ops import accept

        dev = logits.device
        as_int = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.int32, device=dev)  # noqa: E731
        out = accept(node_logits, node_hidden, as_int(draft_tokens), as_int(draft_lens), as_int(paths),
                     torch.as_tensor(np.asarray(thresholds, np.float32), device=dev), scorer.w.to(dev), scorer.c,
                     None, scorer.head.setup, None if greedy_child is None else as_int(greedy_child),
                     scorer.head.min_run)
        return Acceptance(accepted_len=out.accepted_lens.cpu().numpy(), best_path=out.best_path.cpu().numpy(),
                          accepted_tokens=out.accepted_tokens.cpu().numpy(), judged_count=out.judged_count.cpu().numpy())
    judge_logit = scorer.judge_logits(node_logits.view(B, N + 1, -1), node_hidden.view(B, N + 1, -1),
                                      np.asarray(draft_tokens), greedy_child)  # [B, N+1]
    target_argmax = node_logits.argmax(-1).cpu().numpy().reshape(B, N + 1)
    relaxed = within_min_run(judge_relaxed(judge_logit, np.asarray(thresholds, np.float64)), draft_tokens,
                             target_argmax, paths, draft_lens, scorer.head.min_run)  # as JudgeRule.judgeable
    return accept_tree(np.asarray(draft_tokens), target_argmax, np.asarray(paths), relaxed, np.asarray(draft_lens))


def step_tokens(acc: Acceptance, b: int, paths: np.ndarray, tree: bool = False) -> JudgedStep:
    """Tokens to append for request ``b`` and the ``new_tokens`` row each one is written to;
    ``tree``: its paths are a static tree's (not a chain)."""
    length, best = int(acc.accepted_len[b]), int(acc.best_path[b])
    rows = [int(r) for r in paths[b, best, : length + 1]]
    return JudgedStep(acc.tokens(b), rows, length, int(acc.judged_count[b]), tree)
