"""Relaxed rules: which MISMATCHING draft nodes may be accepted (the ``relaxed`` mask).

Each rule returns ``relaxed[B, N+1]`` (bool) for :func:`..spec.acceptance.accept_tree`; node 0 (the
root) is always False. Exact matches are accepted by ``accept_tree`` itself, so a rule only
decides the mismatches:

- ``judge``: the AutoJudge rule: ``judge_logit < logit(threshold)``; a NaN or infinite judge
  logit never accepts. ``threshold`` is the largest "important" probability still accepted.
- ``topk``: the draft token is among the target's top-K at the parent (ties count as inside).
- ``typical``: Medusa/EAGLE typical acceptance: ``p(token) > min(posterior_threshold,
  alpha * exp(-entropy))`` under the target at the parent.
- ``mtp_relaxed``: TensorRT-LLM MTP relaxed acceptance: the token is among the top
  ``relaxed_topk`` and ``p(token) >= p(top-1) - relaxed_delta``.
The lossless mode uses no rule (``relaxed=None``).

``limit_judged`` caps any relaxed mask at a number of judged nodes per path (the per-response
limit on judged acceptances, :class:`.modes.JudgeRule` ``max_judged``). ``exact_runs`` counts the
tokens a node opens through the exact matches below it (the judge's minimum run, ``min_run``).
"""
from __future__ import annotations

import numpy as np


def check_threshold(threshold: np.ndarray, batch: int) -> np.ndarray:
    threshold = np.broadcast_to(np.asarray(threshold, np.float64), (batch,))
    if not np.all((threshold >= 0.0) & (threshold <= 1.0)):
        raise ValueError(f"threshold must lie in [0, 1] (a probability of 'important'), got {threshold}")
    return threshold


def threshold_logit(threshold: np.ndarray) -> np.ndarray:
    """logit(threshold) with logit(0) = -inf and logit(1) = +inf."""
    t = np.asarray(threshold, np.float64)
    with np.errstate(divide="ignore"):
        return np.log(t) - np.log1p(-t)


def judge_relaxed(
    judge_logit: np.ndarray,  # [B, N+1] float: w . x(b, n) + c at each node
    threshold: np.ndarray | float,  # [B] or scalar, in [0, 1]
) -> np.ndarray:  # [B, N+1] bool
    judge_logit = np.asarray(judge_logit, np.float64)
    if judge_logit.ndim != 2:
        raise ValueError(f"judge_logit must be [B, N+1], got shape {judge_logit.shape}")
    cut = threshold_logit(check_threshold(threshold, judge_logit.shape[0]))[:, None]
    relaxed = np.isfinite(judge_logit) & (judge_logit < cut)
    relaxed[:, 0] = False
    return relaxed


def check_tokens(draft_tokens: np.ndarray, vocab_size: int) -> None:
    draft_tokens = np.asarray(draft_tokens)
    if draft_tokens.size and (draft_tokens.min() < 0 or draft_tokens.max() >= vocab_size):
        bad = draft_tokens[(draft_tokens < 0) | (draft_tokens >= vocab_size)][0]
        raise ValueError(f"draft_tokens holds token id {bad}, outside the vocabulary [0, {vocab_size})")


def _parent_probs(
    target_logits: np.ndarray,  # [B, N+1, V]
    draft_tokens: np.ndarray,  # [B, N]
    parents: np.ndarray,  # [B, N+1], -1 for the root / unused nodes
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Target distribution at each node's parent, and the draft token's probability in it."""
    B, N1, V = target_logits.shape
    if draft_tokens.shape != (B, N1 - 1) or parents.shape != (B, N1):
        raise ValueError(
            f"expected draft_tokens [B, N] = [{B}, {N1 - 1}] and parents [B, N+1] = [{B}, {N1}], "
            f"got {draft_tokens.shape} and {parents.shape}"
        )
    check_tokens(draft_tokens, V)
    rows = np.take_along_axis(target_logits, np.maximum(parents, 0)[:, 1:, None], axis=1)  # [B, N, V]
    rows = rows.astype(np.float64)
    probs = np.exp(rows - rows.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    p_tok = np.take_along_axis(probs, draft_tokens[:, :, None], axis=-1)[..., 0]  # [B, N]
    valid = parents[:, 1:] >= 0
    return probs, p_tok, valid


def _with_root(mask: np.ndarray) -> np.ndarray:  # [B, N] -> [B, N+1], root False
    return np.concatenate([np.zeros((mask.shape[0], 1), bool), mask], axis=1)


def topk_relaxed(target_logits, draft_tokens, parents, k: int) -> np.ndarray:
    """Draft token within the target's top-k at the parent. Shapes as in :func:`_parent_probs`."""
    if k < 1:
        raise ValueError(f"top-K needs k >= 1, got {k}")
    probs, p_tok, valid = _parent_probs(np.asarray(target_logits), np.asarray(draft_tokens), np.asarray(parents))
    rank = (probs > p_tok[..., None]).sum(-1)  # tokens strictly more likely than the draft's
    return _with_root(valid & (rank < k))


def typical_relaxed(target_logits, draft_tokens, parents, posterior_threshold: float = 0.09, alpha: float = 0.3):
    """Medusa/EAGLE typical acceptance (defaults: Medusa's posterior_threshold and alpha)."""
    probs, p_tok, valid = _parent_probs(np.asarray(target_logits), np.asarray(draft_tokens), np.asarray(parents))
    entropy = -(probs * np.log(np.clip(probs, 1e-30, None))).sum(-1)
    cut = np.minimum(posterior_threshold, alpha * np.exp(-entropy))
    return _with_root(valid & (p_tok > cut))


def mtp_relaxed(target_logits, draft_tokens, parents, relaxed_topk: int = 4, relaxed_delta: float = 0.1):
    """TensorRT-LLM MTP relaxed acceptance: in the top relaxed_topk and within delta of top-1."""
    probs, p_tok, valid = _parent_probs(np.asarray(target_logits), np.asarray(draft_tokens), np.asarray(parents))
    rank = (probs > p_tok[..., None]).sum(-1)
    return _with_root(valid & (rank < relaxed_topk) & (p_tok >= probs.max(-1) - relaxed_delta))


def limit_judged(
    relaxed: np.ndarray,  # [B, N+1] bool: a rule's relaxed mask (node 0 False)
    parents: np.ndarray,  # [B, N+1] int: parent of each node, -1 for the root
    remaining: np.ndarray | int,  # [B] or scalar: judged acceptances still allowed per sequence
) -> np.ndarray:  # [B, N+1] bool
    """``relaxed`` with only the first ``remaining`` relaxed nodes of every root-to-node path kept.

    The walk accepts a path's nodes in order, so a node past the ``remaining``-th relaxed node of
    its path could only be accepted as one judged acceptance too many. Parents precede children
    (:class:`.tree.DraftTree`), so one pass in node order counts each node's relaxed ancestors.
    """
    relaxed, parents = np.asarray(relaxed, bool), np.asarray(parents)
    if relaxed.shape != parents.shape or relaxed.ndim != 2:
        raise ValueError(f"relaxed and parents must both be [B, N+1], got {relaxed.shape} and {parents.shape}")
    remaining = np.broadcast_to(np.asarray(remaining, np.int64), (relaxed.shape[0],))
    count = np.zeros(relaxed.shape, np.int64)  # [B, N+1]: relaxed nodes on the path root..n
    for n in range(1, relaxed.shape[1]):
        above = np.where(parents[:, n] >= 0, count[np.arange(relaxed.shape[0]), np.maximum(parents[:, n], 0)], 0)
        count[:, n] = above + relaxed[:, n]
    return relaxed & (count <= remaining[:, None])


def exact_runs(
    draft_tokens: np.ndarray,  # [B, N] int: token of node n at column n - 1
    target_argmax: np.ndarray,  # [B, N+1] int: the target's greedy child of each node
    paths: np.ndarray,  # [B, P, D+1] int: root-to-leaf node indices, -1 padded
    draft_lens: np.ndarray | None = None,  # [B] int: nodes 1..draft_lens[b] may be accepted (default N)
) -> np.ndarray:  # [B, N+1] int64
    """The run each node opens if it is accepted (``accept_core.h``, "exact run"): 1 (the node) + the
    longest chain of exact matches below it, so a judged acceptance at node n buys ``runs[n]`` draft
    tokens before the walk meets another mismatch or the end of the draft, whatever the judge says
    there. From the path rows: the largest over the rows through a node of 1 + the consecutive exact
    matches after it on the row; a row ends at a node past ``draft_lens`` (never accepted) or at -1.
    Nodes may come in any order (an EAGLE step numbers a child before its parent); nodes on no path
    row run 1."""
    draft_tokens, target_argmax, paths = np.asarray(draft_tokens), np.asarray(target_argmax), np.asarray(paths)
    B, N = draft_tokens.shape
    if target_argmax.shape != (B, N + 1) or paths.ndim != 3 or paths.shape[0] != B:
        raise ValueError(f"with draft_tokens [B, N] = {draft_tokens.shape}, target_argmax must be [B, N+1] and paths "
                         f"[B, P, D+1]; got {target_argmax.shape} and {paths.shape}")
    lens = np.full(B, N) if draft_lens is None else np.clip(np.asarray(draft_lens), 0, N)
    runs = np.ones((B, N + 1), np.int64)  # [B, N+1]
    for b in range(B):
        for row in paths[b]:
            if row[0] != 0:
                continue  # a padding row
            nodes = [0]
            for node in row[1:].tolist():
                if not 1 <= node <= lens[b]:
                    break
                nodes.append(node)
            run = 1  # of the node after the last one seen, counting back along the row
            for j in range(len(nodes) - 1, -1, -1):
                child_exact = j + 1 < len(nodes) and draft_tokens[b, nodes[j + 1] - 1] == target_argmax[b, nodes[j]]
                run = run + 1 if child_exact else 1
                runs[b, nodes[j]] = max(runs[b, nodes[j]], run)
    return runs


def within_min_run(
    relaxed: np.ndarray,  # [B, N+1] bool: the judge's verdicts
    draft_tokens: np.ndarray,  # [B, N] int
    target_argmax: np.ndarray,  # [B, N+1] int
    paths: np.ndarray,  # [B, P, D+1] int
    draft_lens: np.ndarray | None,  # [B] int (default N)
    min_run: int,
) -> np.ndarray:  # [B, N+1] bool
    """``relaxed`` kept only at nodes whose exact run (:func:`exact_runs`) reaches ``min_run``: the
    judge's minimum run on verdicts computed for every node (the engines' references; JudgeRule
    filters the nodes before it asks the judge)."""
    if min_run <= 1:
        return relaxed
    return relaxed & (exact_runs(draft_tokens, target_argmax, paths, draft_lens) >= min_run)
