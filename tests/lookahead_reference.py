"""The Python reference of the compiled judge for any setup of spec/judge_blocks.py's blocks: JudgeRule
(decoding/modes.py, which scores only the mismatching nodes it may judge, JudgeRule.judgeable: with a
minimum run, those whose exact run reaches it; and gives a node without the draft tokens its blocks
need after it no verdict) per sequence, then accept_tree; in accept mode on a batch of one
draft tree, in logits mode on a packed TensorRT-LLM step (each sequence's draft rows a chain). Shared
by tests/test_host_core_lookahead.py and the GPU check (tests/gpu)."""
from __future__ import annotations

import numpy as np
import torch

from trtllm_autojudge.decoding.modes import JudgeRule, VerifyContext
from trtllm_autojudge.decoding.rules import judge_relaxed, exact_runs
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.spec import packed_step
from trtllm_autojudge.spec.acceptance import Acceptance, accept_tree


def judge_head(setup: str, weight: np.ndarray, bias: float, target_hidden: int, draft_hidden: int,
               min_run: int = 1) -> JudgeHead:
    """A judge whose folded weights are ``weight`` ([F]) and bias ``bias`` (mean 0, scale 1), with the
    minimum run ``min_run`` (1: none)."""
    F = len(weight)
    return JudgeHead(np.asarray(weight, np.float32), np.zeros(F), np.ones(F), float(bias), setup, draft_hidden,
                     target_hidden, meta={"min_run": min_run} if min_run > 1 else {})


def ranked_tree(parents: list[int]) -> DraftTree:
    """The tree of ``parents`` with each node's rank its order among its siblings (the first child is
    the greedy one), as DraftTree.static numbers them."""
    seen: dict[int, int] = {}
    ranks = [0]
    for parent in parents[1:]:
        ranks.append(seen.get(parent, 0))
        seen[parent] = ranks[-1] + 1
    return DraftTree(tuple(parents), tuple(ranks))


def _judge_logits(rule: JudgeRule, tree: DraftTree, tokens: np.ndarray, logits: torch.Tensor, hidden: torch.Tensor,
                  draft: torch.Tensor | None) -> np.ndarray:
    """[N+1]: the rule's judge logits at the mismatches it may judge, +inf elsewhere (tokens [N], rows [N+1, .])."""
    ctx = VerifyContext([0], tree, np.asarray(tokens, np.int64)[None], np.asarray(tree.parents, np.int32)[None], logits,
                        hidden, draft)
    nodes = rule.judgeable(ctx, ctx.mismatches())
    return rule.judge_logits(ctx, nodes)[0] if len(nodes) else np.full(tree.num_nodes + 1, np.inf)


def tree_judge_logits(head: JudgeHead, tree: DraftTree, target_logits: torch.Tensor, target_hidden: torch.Tensor,
                      draft_hidden: torch.Tensor | None, draft_tokens: np.ndarray, draft_lens: np.ndarray
                      ) -> np.ndarray:
    """[B, N+1] float64: accept mode's judge logits. ``target_logits`` [B*(N+1), V], the hidden states
    [B*(N+1), H], ``draft_tokens`` [B, N], ``draft_lens`` [B]: sequence b is the tree cut after node
    draft_lens[b] (a greedy child past it is none), whose nodes are rows b*(N+1) .. b*(N+1) + draft_lens[b]."""
    B, N = draft_tokens.shape
    rule = JudgeRule(head)
    out = np.full((B, N + 1), np.inf)
    for b in range(B):
        L = int(np.clip(draft_lens[b], 0, N))
        cut = DraftTree(tree.parents[: L + 1], tree.ranks[: L + 1])
        rows = slice(b * (N + 1), b * (N + 1) + L + 1)
        out[b, : L + 1] = _judge_logits(rule, cut, draft_tokens[b, :L], target_logits[rows], target_hidden[rows],
                                        None if draft_hidden is None else draft_hidden[rows])
    return out


def packed_judge_logits(head: JudgeHead, target_logits: torch.Tensor, target_hidden: torch.Tensor,
                        draft_hidden: torch.Tensor | None, input_ids: np.ndarray, last_token_ids: np.ndarray,
                        request_types: np.ndarray, host_context_lengths: np.ndarray) -> np.ndarray:
    """[L] float64: logits mode's judge logits of a packed step (rows [L, .]; input_ids [T];
    last_token_ids [L]; the per-sequence inputs [S]); raises StepMismatch like the rule."""
    first_row, num_drafts = packed_step.segment_step(last_token_ids, len(input_ids), request_types,
                                                     host_context_lengths)
    rule = JudgeRule(head)
    out = np.full(len(last_token_ids), np.inf)
    for first, k in zip(first_row.tolist(), num_drafts.tolist()):
        if k == packed_step.REFUSED:
            continue
        rows = slice(first, first + k + 1)
        tokens = input_ids[last_token_ids[first + 1: first + k + 1] - 1]
        out[rows] = _judge_logits(rule, DraftTree.chain(k), tokens, target_logits[rows], target_hidden[rows],
                                  None if draft_hidden is None else draft_hidden[rows])
    return out


def cut_in_a_gap(judge_logit: np.ndarray, margin: float) -> float:
    """A threshold whose logit lies in a gap of the finite ``judge_logit`` at least 20 * margin wide,
    the one nearest their median (some judged, some rejected); 0.5 when none is finite."""
    finite = np.sort(judge_logit[np.isfinite(judge_logit)])
    if finite.size == 0:
        return 0.5
    values = np.concatenate([[finite[0] - 1.0], finite, [finite[-1] + 1.0]])
    middles = (values[1:] + values[:-1]) / 2
    wide = np.flatnonzero(np.diff(values) > 20 * margin)
    cut = middles[wide[np.argmin(np.abs(middles[wide] - np.median(finite)))]]
    return float(1.0 / (1.0 + np.exp(-cut)))


def accept(judge_logit: np.ndarray, threshold: np.ndarray, draft_tokens: np.ndarray, target_argmax: np.ndarray,
           paths: np.ndarray, draft_lens: np.ndarray, min_run: int = 1) -> Acceptance:
    """accept_tree with judge_relaxed of [B, N+1] judge logits at [B] thresholds (float64 cut), a node
    whose exact run (rules.exact_runs) is below ``min_run`` never judged."""
    relaxed = judge_relaxed(np.asarray(judge_logit, np.float64), np.asarray(threshold, np.float64))
    relaxed &= exact_runs(draft_tokens, target_argmax, paths, draft_lens) >= min_run
    return accept_tree(draft_tokens, target_argmax, paths, relaxed, draft_lens)
