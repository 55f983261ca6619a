"""Lookahead feature blocks: the models' view AFTER the swapped token, two window tokens on.

A verify pass over a draft window computes more than the hidden state at a mismatching node n
(the DT block): it also runs the target over the draft's own continuation of that node, c1 and
c2 (the draft's greedy tokens after it, the nodes that follow it in a chain). How the target
carries on from the draft's token tells which mismatches are harmless better than the state at
the token alone (docs/notebook/program-lookahead-judge.md, "A lookahead judge"). Blocks, in the vocabulary of
:mod:`.head` (<model's hidden state> on the draft-token sequence, k tokens later):

  DT1, DT2  the target's hidden state with c1 / c2 as the input token   [Ht] each
  DD1       the draft's hidden state with c1 as the input token         [Hd]
  LS        six lookahead scores from the target's logits after the node (row 0) and after c1
            (row 1): log p0(c1), log p1(c2) (both floored at MIN_LOG_PROB), c1 == argmax p0,
            c2 == argmax p1 (1.0 or 0.0), the entropy of p0, the entropy of p1           [6]
            (LOOKAHEAD_SCORES names them in this order)

A block needs WINDOW_TOKENS_AFTER[block] draft tokens after the node; a node without them (the
last ones of a chain) has no verdict and is rejected. So a lookahead judge never reads the deepest
level's draft hidden states, and the decoding loop never feeds that level for it. Mining computes
the same blocks with plain forwards over each label's swapped sequence (:mod:`..mining.features`);
decoding gathers them from the verify pass (:func:`node_lookahead`); tests/test_lookahead.py holds
the two equal.
"""
from __future__ import annotations

import numpy as np
import torch

# One vocabulary with the compiled core (plugins/include/autojudge/accept_core.h): spec/judge_blocks.py.
from ..spec.judge_blocks import LOOKAHEAD_SCORES, MIN_LOG_PROB, WINDOW_TOKENS_AFTER

LOOKAHEAD_BLOCKS = tuple(WINDOW_TOKENS_AFTER)
NUM_SCORES = len(LOOKAHEAD_SCORES)


def lookahead_scores(
    logits: torch.Tensor,  # [R, V]: rows of the target's logits
    after_token: torch.Tensor,  # [M] int64: the row after each item's (draft) token
    after_c1: torch.Tensor,  # [M] int64: the row after its c1
    c1: torch.Tensor,  # [M] int64: the draft's token after the item's token
    c2: torch.Tensor,  # [M] int64: the draft's token after c1
) -> torch.Tensor:  # [M, NUM_SCORES] float32: the LS block
    logits = logits.float()
    lse = torch.logsumexp(logits, dim=-1)  # [R]
    p = torch.exp(logits - lse[:, None])  # [R, V]
    entropy = lse - torch.where(p > 0, p * logits, torch.zeros_like(p)).sum(-1)  # [R]: -sum p log p; masked tokens 0
    argmax = logits.argmax(-1)  # [R]
    pairs = ((after_token, c1), (after_c1, c2))
    out = [(logits[row, c] - lse[row]).clamp(min=MIN_LOG_PROB) for row, c in pairs]
    out += [(argmax[row] == c).float() for row, c in pairs]
    out += [entropy[row] for row, _ in pairs]
    return torch.stack(out, dim=1)


def node_lookahead(
    blocks: list[str],  # the judge's blocks; only the lookahead ones are computed
    greedy_child: np.ndarray,  # [N+1] int: the node carrying the draft's greedy token after each node, -1 none
    node_tokens: np.ndarray,  # [N] int: token of node n at index n-1
    nodes: np.ndarray,  # [M] int: the nodes to compute the blocks of
    target_logits: torch.Tensor,  # [N+1, V]: row n with node n as the input token
    target_hidden: torch.Tensor,  # [N+1, Ht]
    draft_hidden: torch.Tensor | None,  # [N+1, Hd]; NaN rows for nodes the draft did not consume
) -> tuple[dict[str, torch.Tensor], np.ndarray]:
    """The lookahead blocks of ``nodes`` ({block: [M, width]}) and which of them have them ([M] bool).

    LS reads two logit rows per node (after it and after its c1), not the whole window: the rule
    asks only for the nodes it decides, the mismatches."""
    child = np.asarray(greedy_child, np.int64)  # [N+1]
    grand = np.where(child >= 0, child[np.maximum(child, 0)], -1)  # [N+1]
    nodes = np.asarray(nodes, np.int64)  # [M]
    need = max(WINDOW_TOKENS_AFTER[b] for b in blocks if b in WINDOW_TOKENS_AFTER)
    has = (child[nodes] >= 0) & ((grand[nodes] >= 0) if need == 2 else True)  # [M]
    c1n = torch.as_tensor(np.maximum(child[nodes], 0))  # [M]: node index of each node's c1
    c2n = torch.as_tensor(np.maximum(grand[nodes], 0))  # [M]: and of its c2
    tokens = torch.as_tensor(np.concatenate([[0], np.asarray(node_tokens, np.int64)]))  # [N+1]: token of node n
    out = {}
    if "DT1" in blocks:
        out["DT1"] = target_hidden[c1n]
    if "DT2" in blocks:
        out["DT2"] = target_hidden[c2n]
    if "DD1" in blocks:
        if draft_hidden is None:
            raise ValueError("the DD1 block needs the draft's hidden states")
        out["DD1"] = draft_hidden[c1n]
    if "LS" in blocks:
        M = len(nodes)
        rows = target_logits[torch.cat([torch.as_tensor(nodes), c1n])]  # [2M, V]: after each node, then after its c1
        out["LS"] = lookahead_scores(rows, torch.arange(M), M + torch.arange(M), tokens[c1n], tokens[c2n])
    return out, has
