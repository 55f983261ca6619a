"""Static draft trees (EAGLE/Medusa style) and the path / parent / mask views of them.

A tree has nodes ``0..N``; node 0 is the root (see :mod:`..spec.acceptance` for the vocabulary). Nodes
are numbered level by level, so a parent always has a lower index than its children, and the
tree of ``K`` nodes in a line is the chain ``[0, 1, ..., K]``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from ..spec.acceptance import PAD


def attention_mask(visible: int, cached: int, attend: list[list[int]]) -> torch.Tensor:
    """[T, cached + T] bool: every new token sees cache entries [0, visible) plus its own list."""
    mask = torch.zeros(len(attend), cached + len(attend), dtype=torch.bool)
    mask[:, :visible] = True
    for i, cols in enumerate(attend):
        mask[i, cols] = True
    return mask


@dataclass(frozen=True)
class DraftTree:
    """Shape of a draft tree: who is whose parent, and which draft candidate each node takes.

    ``parents[n]`` is node n's parent (``parents[0] == -1``); ``ranks[n]`` says that node n
    carries the draft's ``ranks[n]``-th most likely token after its parent (0 = greedy).
    """

    parents: tuple[int, ...]
    ranks: tuple[int, ...]

    def __post_init__(self):
        if len(self.parents) != len(self.ranks) or not self.parents or self.parents[0] != -1:
            raise ValueError("a DraftTree needs parents[0] == -1 and one rank per node")
        for n, m in enumerate(self.parents[1:], start=1):
            if not 0 <= m < n:
                raise ValueError(f"node {n} has parent {m}: parents must precede their children")

    @classmethod
    def chain(cls, k: int) -> "DraftTree":
        """K draft tokens in a line: the draft's greedy continuation."""
        if k < 0:
            raise ValueError(f"draft length K must be >= 0, got {k}")
        return cls(tuple(range(-1, k)), (0,) * (k + 1))

    @classmethod
    def static(cls, branching: list[int] | tuple[int, ...]) -> "DraftTree":
        """Every node at depth d gets ``branching[d]`` children: the draft's top candidates."""
        if not branching or any(int(w) < 1 for w in branching):
            raise ValueError(f"branching must be a non-empty list of widths >= 1, got {branching}")
        parents, ranks, frontier = [-1], [0], [0]
        for width in branching:
            nxt = []
            for m in frontier:
                for r in range(int(width)):
                    parents.append(m)
                    ranks.append(r)
                    nxt.append(len(parents) - 1)
            frontier = nxt
        return cls(tuple(parents), tuple(ranks))

    @classmethod
    def from_choices(cls, choices) -> "DraftTree":
        """The tree of ``eagle_choices`` (TensorRT-LLM's EAGLE-1 static trees): each choice is the list of
        draft ranks from the root to a node ([1, 0]: the greedy child of the root's second-best child).
        Duplicates are dropped and the choices sorted by (length, choice), so node i + 1 is choice i, as
        TensorRT-LLM numbers them; every prefix of a choice must be a choice too (prefix-closed)."""
        nodes = sorted({tuple(int(r) for r in c) for c in choices}, key=lambda c: (len(c), c))
        if not nodes or any(len(c) == 0 or min(c) < 0 for c in nodes):
            raise ValueError(f"eagle_choices must be non-empty lists of ranks >= 0, got {choices}")
        index = {c: n for n, c in enumerate(nodes, start=1)}
        missing = sorted({c[:k] for c in nodes for k in range(1, len(c)) if c[:k] not in index}, key=lambda c: (len(c), c))
        if missing:
            raise ValueError(f"eagle_choices is not prefix-closed: {[list(c) for c in missing]} missing (every prefix of a "
                             f"choice is a node on its path); add them")
        return cls(tuple([-1] + [index.get(c[:-1], 0) for c in nodes]), tuple([0] + [c[-1] for c in nodes]))

    def choices(self) -> list[list[int]]:
        """The ``eagle_choices`` of this tree: per node, the ranks from the root down to it."""
        return [[self.ranks[m] for m in self.path_to(n)] for n in range(1, self.num_nodes + 1)]

    @property
    def num_nodes(self) -> int:
        """N: draft nodes, root excluded."""
        return len(self.parents) - 1

    @cached_property
    def depths(self) -> np.ndarray:  # [N+1] int: root has depth 0
        d = np.zeros(len(self.parents), np.int64)
        for n in range(1, len(self.parents)):
            d[n] = d[self.parents[n]] + 1
        return d

    @property
    def is_chain(self) -> bool:
        """Whether the nodes form one line (``chain(K)``'s shape)."""
        return self.parents == tuple(range(-1, self.num_nodes))

    @property
    def max_depth(self) -> int:
        """D: the longest path's number of draft nodes."""
        return int(self.depths.max())

    @cached_property
    def levels(self) -> list[list[int]]:
        """Nodes at depth 1, 2, ..., D (root excluded)."""
        return [[n for n in range(1, len(self.parents)) if self.depths[n] == d] for d in range(1, self.max_depth + 1)]

    def path_to(self, n: int) -> list[int]:
        """The draft nodes from the root's child down to node n (root excluded, n included; [] for the root)."""
        path = []
        while n > 0:
            path.append(n)
            n = self.parents[n]
        return path[::-1]

    @cached_property
    def paths(self) -> np.ndarray:  # [P, D+1] int32: one row per leaf, -1 padded
        """Root-to-leaf node rows in depth-first order, children by ascending index (the order of
        TensorRT-LLM's ``computePathsAndMask``, whose lowest row wins a tie of equally long paths)."""
        children = {m for m in self.parents[1:]}
        leaves = sorted((n for n in range(len(self.parents)) if n not in children), key=self.path_to)
        rows = np.full((len(leaves), self.max_depth + 1), PAD, np.int32)
        for p, leaf in enumerate(leaves):
            chain = [0] + self.path_to(leaf)
            rows[p, : len(chain)] = chain
        return rows

    @cached_property
    def greedy_child(self) -> np.ndarray:  # [N+1] int64: the rank-0 child of each node, -1 for none
        """The node carrying the draft's greedy token after each node (its continuation in the tree),
        which a lookahead judge reads (:mod:`..judge.lookahead`)."""
        child = np.full(len(self.parents), PAD, np.int64)
        for n in range(1, len(self.parents)):
            if self.ranks[n] == 0:
                child[self.parents[n]] = n
        return child

    @cached_property
    def ancestor_mask(self) -> np.ndarray:  # [N+1, N+1] bool: mask[i, j] = j is i or an ancestor of i
        n1 = len(self.parents)
        mask = np.zeros((n1, n1), bool)
        for i in range(n1):
            mask[i, [0] + self.path_to(i)] = True
        return mask


def node_parents(paths: np.ndarray) -> np.ndarray:
    """Parent of every node from the path rows.

    Args:
        paths: [B, P, D+1] int, -1 padded (see :mod:`..spec.acceptance`).
    Returns:
        [B, N'+1] int32 with N' the largest node index seen; -1 for the root and unused nodes.
    Raises:
        ValueError if one node has two different parents (the rows do not describe a tree).
    """
    paths = np.asarray(paths)
    B = paths.shape[0]
    n1 = int(max(paths.max(initial=0), 0)) + 1
    parents = np.full((B, n1), PAD, np.int32)
    for b, p, j in zip(*np.nonzero(paths[:, :, 1:] >= 0)):
        node, parent = paths[b, p, j + 1], paths[b, p, j]
        if parent == PAD:
            raise ValueError(f"paths[{b}, {p}] has node {node} after a -1 pad: pads must close a path")
        if parents[b, node] not in (PAD, parent):
            raise ValueError(f"node {node} of sequence {b} has two parents ({parents[b, node]} and {parent}) in paths")
        parents[b, node] = parent
    return parents
