"""Random EAGLE engine steps for the tree logits mode tests (tests/test_host_core_tree.py): requests
with their draft trees, laid out as TensorRT-LLM 1.2's EAGLE engine lays them out (request b owns
``draft_lens[b] + 1`` logits rows after the rows of the requests before it; ``draft_paths [B, M, D+1]``
with M = N + 1 rows, one per leaf, -1 padded), and the ways to break one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAD = -1


@dataclass
class TreeStep:
    logits: np.ndarray  # [L, V] float32
    draft_tokens: np.ndarray  # [B, N] int32
    draft_lens: np.ndarray  # [B] int32
    paths: np.ndarray  # [B, N+1, D+1] int32
    broken: str = ""  # what was broken ("" for a well-formed step)


def random_tree(rng: np.random.Generator, n: int, vocab: int) -> list[int]:
    """[n + 1] parents (-1 for the root) of a random tree whose nodes have at most ``vocab`` children each,
    the labels shuffled half the time (a child may then carry a lower index than its parent)."""
    parents, children = [-1], [0]
    for node in range(1, n + 1):
        open_nodes = [m for m in range(node) if children[m] < vocab]
        parent = int(rng.choice(open_nodes))
        parents.append(parent)
        children[parent] += 1
        children.append(0)
    if rng.random() < 0.5:
        label = np.concatenate([[0], 1 + rng.permutation(n)])  # old node -> new label
        relabeled = [-1] * (n + 1)
        for old in range(1, n + 1):
            relabeled[label[old]] = int(label[parents[old]])
        parents = relabeled
    return parents


def leaf_rows(parents: list[int], max_path_len: int, rng: np.random.Generator) -> list[list[int]]:
    """One root-to-leaf row per leaf (-1 padded), in random order, some duplicated."""
    has_child = set(parents[1:])
    rows = []
    for leaf in [n for n in range(1, len(parents)) if n not in has_child] or [0]:
        path, m = [], leaf
        while m > 0:
            path.append(m)
            m = parents[m]
        row = [0] + path[::-1]
        rows.append(row + [PAD] * (max_path_len - len(row)))
    if rng.random() < 0.3:
        rows += [rows[int(rng.integers(len(rows)))]]  # a duplicate row: ties to the lower index
    return [rows[i] for i in rng.permutation(len(rows))]


def random_tree_step(rng: np.random.Generator, vocab: int, max_nodes: int = 12, max_depth: int = 4) -> TreeStep:
    """A well-formed step of 1-5 requests (some context requests, draft_lens 0) whose drafts often follow
    the target's argmax, so that paths are accepted deep and tie."""
    B, N = int(rng.integers(1, 6)), max_nodes
    draft_lens, trees = [], []
    for _ in range(B):
        while True:
            n = int(rng.integers(0, N + 1)) if rng.random() < 0.8 else 0
            parents = random_tree(rng, n, vocab)
            depth = max((len(r) - r.count(PAD) - 1 for r in leaf_rows(parents, N + 1, rng)), default=0)
            if depth <= max_depth:
                break
        draft_lens.append(n)
        trees.append(parents)
    L = sum(n + 1 for n in draft_lens)
    logits = rng.normal(size=(L, vocab)).astype(np.float32)
    if rng.random() < 0.3:
        logits = np.round(logits)  # ties inside rows
    draft_tokens = np.full((B, N), PAD, np.int32)
    paths = np.full((B, N + 1, max_depth + 1), PAD, np.int32)
    first = 0
    for b, (n, parents) in enumerate(zip(draft_lens, trees)):
        argmax = np.argmax(logits[first:first + n + 1], axis=1)
        for m in range(n + 1):
            kids = [c for c in range(1, n + 1) if parents[c] == m]
            if not kids:
                continue
            tokens = [int(t) for t in rng.permutation(vocab)[: len(kids)]]  # distinct siblings
            if rng.random() < 0.7 and argmax[m] not in tokens:
                tokens[int(rng.integers(len(kids)))] = int(argmax[m])  # a child follows the target
            for c, t in zip(kids, tokens):
                draft_tokens[b, c - 1] = t
        rows = leaf_rows(parents, max_depth + 1, rng) if n else [[0] + [PAD] * max_depth]
        paths[b, : len(rows)] = rows
        first += n + 1
    return TreeStep(logits, draft_tokens, np.array(draft_lens, np.int32), paths)


def break_step(step: TreeStep, rng: np.random.Generator) -> TreeStep:
    """The step broken one way: two whole-step breaks (a draft length out of range, rows that do not add
    up) and five per-request ones (a bad first entry, an index past draft_lens, a node after -1, a node
    with two parents, twin siblings)."""
    s = TreeStep(step.logits.copy(), step.draft_tokens.copy(), step.draft_lens.copy(), step.paths.copy())
    N, D1 = s.draft_tokens.shape[1], s.paths.shape[2]
    b = int(rng.integers(len(s.draft_lens)))
    kind = int(rng.integers(7))
    rows = [p for p in range(s.paths.shape[1]) if s.paths[b, p, 0] == 0]
    deep = [p for p in rows if (s.paths[b, p] != PAD).sum() >= 3]
    if kind == 0:
        s.draft_lens[b] = int(rng.choice([-1, N + 1]))
        s.broken = "draft length out of range"
    elif kind == 1:
        s.logits = s.logits[:-1] if rng.random() < 0.5 else np.concatenate([s.logits, s.logits[:1]])
        s.broken = "rows do not add up"
    elif kind == 2:
        s.paths[b, rows[0], 0] = int(rng.choice([1, 2, -7]))
        s.broken = "a path row starts with neither 0 nor -1"
    elif kind == 3:
        s.paths[b, rows[0], 1] = s.draft_lens[b] + int(rng.integers(1, 4))
        s.broken = "an index past draft_lens"
    elif kind == 4 and deep:
        row = s.paths[b, deep[0]]
        row[1], row[2] = PAD, max(int(row[2]), 1)
        s.broken = "a node after -1"
    elif kind == 5 and deep:
        p = deep[0]
        s.paths[b, p, 1], s.paths[b, p, 2] = s.paths[b, p, 2], s.paths[b, p, 1]  # swapped: two parents
        s.broken = "a node with two parents"
    elif kind == 6 and s.draft_lens[b] >= 2:
        parents = {}
        for p in rows:
            r = s.paths[b, p]
            for j in range(1, D1):
                if r[j] != PAD:
                    parents[int(r[j])] = int(r[j - 1])
        twins = [(a, c) for a in parents for c in parents if a < c and parents[a] == parents[c]]
        if twins:
            a, c = twins[int(rng.integers(len(twins)))]
            s.draft_tokens[b, c - 1] = s.draft_tokens[b, a - 1]
            s.broken = "twin siblings"
    return s
