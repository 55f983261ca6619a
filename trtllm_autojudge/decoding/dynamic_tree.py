"""EAGLE-2 dynamic draft trees: the tree is chosen each cycle from the drafter's scores.

The rule (TensorRT-LLM 1.2 ``EagleDecodeDraftTokensPlugin``, Eagle-2 branch; EAGLE-2 paper): every
candidate node carries its SCORE, the cumulative draft log-probability of its path (its parent's
score + log p(its token | its parent)).

1. layer 1: the root's top-K tokens are the candidates of depth 1; all K are expanded;
2. layer d = 2..D: each expanded node of depth d - 1 gets its top-K tokens as candidates of depth d
   (K * K of them); the K best of those by score are expanded next;
3. the tree: the N best of all K + (D - 1) K^2 candidates.

Order (ties included): higher score first, then the shallower node, then the earlier candidate
(the root's children in rank order, then layer by layer, parents in expansion order and each
parent's children in rank order). A child's score is at most its parent's and its depth larger, so
the N best always include every chosen node's parent: the selection is a tree. Nodes are numbered
in that order, so a parent precedes its children (:class:`.tree.DraftTree`), and ``ranks[n]`` is the
node's rank among its parent's top-K (0: the drafter's greedy token, a lookahead judge's greedy child).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .tree import DraftTree


@dataclass(frozen=True)
class DynamicTree:
    """How a dynamic tree is chosen: ``depth`` D layers, ``top_k`` K tokens per expanded node and K
    expanded nodes per layer, ``num_nodes`` N draft nodes kept (TensorRT-LLM: ``num_eagle_layers``,
    ``dynamic_tree_max_topK``, ``max_draft_len``)."""

    depth: int
    top_k: int
    num_nodes: int

    def __post_init__(self):
        if self.depth < 1 or self.top_k < 1:
            raise ValueError(f"a dynamic tree needs depth >= 1 and top_k >= 1, got depth {self.depth}, top_k {self.top_k}")
        if self.num_nodes < self.top_k:
            raise ValueError(f"a dynamic tree keeps num_nodes >= top_k nodes (TensorRT-LLM requires max_draft_len >= "
                             f"dynamic_tree_max_topK), got num_nodes {self.num_nodes} < top_k {self.top_k}")

    @property
    def max_candidates(self) -> int:
        """K + (D - 1) K^2: the candidates the rule scores."""
        return self.top_k + (self.depth - 1) * self.top_k ** 2


def top_tokens(scores: torch.Tensor, k: int) -> torch.Tensor:
    """[V] -> [k] token ids, best first; equal scores: the lower id first."""
    return torch.sort(scores, descending=True, stable=True).indices[:k]


@dataclass
class Candidates:
    """The scored candidates of one cycle, in creation order (index i: candidate i)."""

    parent: list[int]  # candidate index of the parent, -1 for the root
    token: list[int]
    rank: list[int]  # rank among the parent's top-K
    score: list[float]  # cumulative draft log-probability
    depth: list[int]

    def add_children(self, parent: int, parent_score: float, depth: int, log_probs: torch.Tensor, k: int) -> list[int]:
        """Candidates for ``parent``'s top-``k`` tokens under ``log_probs [V]`` (float64); their indices."""
        first = len(self.token)
        for r, t in enumerate(top_tokens(log_probs, k).tolist()):
            self.parent.append(parent)
            self.token.append(int(t))
            self.rank.append(r)
            self.score.append(parent_score + float(log_probs[t]))
            self.depth.append(depth)
        return list(range(first, len(self.token)))

    def best(self, indices: list[int], k: int) -> list[int]:
        """The ``k`` best of ``indices`` (module order), best first."""
        return sorted(indices, key=lambda i: (-self.score[i], self.depth[i], i))[:k]

    def tree(self, num_nodes: int) -> tuple[DraftTree, np.ndarray]:
        """The tree of the ``num_nodes`` best candidates and its node tokens ``[N]``."""
        chosen = self.best(list(range(len(self.token))), num_nodes)
        node_of = {c: n for n, c in enumerate(chosen, start=1)}
        parents = [-1] + [0 if self.parent[c] < 0 else node_of[self.parent[c]] for c in chosen]
        ranks = [0] + [self.rank[c] for c in chosen]
        return DraftTree(tuple(parents), tuple(ranks)), np.array([self.token[c] for c in chosen], np.int64)
