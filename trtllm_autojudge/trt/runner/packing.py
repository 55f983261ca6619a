"""Pack one verification cycle into the AutoJudge target engine's inputs (pure NumPy).

Words as in :mod:`trtllm_autojudge.spec.acceptance`. A cycle of ``B`` requests with the draft
tree ``tree`` (``N`` nodes, ``P`` paths, longest ``D``) becomes:

- context ROWS: per request, one row ``prefix + tokens of one root-to-leaf path`` (paths cut at
  the first invalid node; a row that is a prefix of another row is dropped);
- ``node_rows [B*(N+1)]``: the packed token position where node n of request b is the LAST input
  token (node 0, the root, is the prefix's last token). Invalid nodes point at the root;
- for a lookahead judge, ``greedy_child [B, N+1]``: the tree's rank-0 child of each node, -1 for
  none (the plugin, like :class:`.reference_engine.ReferenceTargetEngine`, counts a child past
  ``draft_lens[b]`` as none).

Drafting with a stock draft engine gives the greedy chain and the draft's logits at each chain
step, so the trees it can fill are CHAIN TREES: every node off the greedy chain is a leaf (the
chain plus top-W siblings at each depth). :func:`check_chain_tree` says whether a tree is one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...decoding.tree import DraftTree
from ...spec.acceptance import PAD


@dataclass
class PackedCycle:
    """Engine inputs of one cycle (``T`` packed tokens, ``R`` rows, ``B`` requests)."""

    input_ids: np.ndarray  # [T] int32: all rows, back to back
    position_ids: np.ndarray  # [T] int32: 0..len(row)-1 per row
    context_lengths: np.ndarray  # [R] int32
    row_request: np.ndarray  # [R] int32: request of each row
    node_rows: np.ndarray  # [B*(N+1)] int32: packed position of each node as the last input token
    draft_tokens: np.ndarray  # [B, N] int32
    draft_lens: np.ndarray  # [B] int32
    paths: np.ndarray  # [B, P, D+1] int32, -1 padded
    threshold: np.ndarray  # [B] float32
    draft_hidden: np.ndarray | None = None  # [B*(N+1), Hd] float32 (blocks DD, DD1)
    greedy_child: np.ndarray | None = None  # [B, N+1] int32: rank-0 child of each node, -1 none (lookahead blocks)

    @property
    def batch(self) -> int:
        return int(self.draft_tokens.shape[0])


def check_chain_tree(tree: DraftTree) -> None:
    """Raise ValueError unless ``tree`` is a chain tree (see the module docstring)."""
    children: dict[int, list[int]] = {}
    for n, m in enumerate(tree.parents[1:], start=1):
        children.setdefault(m, []).append(n)
    for m, kids in children.items():
        ranks = [tree.ranks[k] for k in kids]
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"node {m} has two children with the same draft rank {ranks}: they would carry one token")
        if m != 0 and tree.ranks[m] != 0:
            raise ValueError(f"node {m} (draft rank {tree.ranks[m]}) has children, but a stock draft engine only "
                             f"continues its greedy chain: give children to rank-0 nodes only (chain + top-W siblings)")
    if tree.num_nodes and 0 not in [tree.ranks[k] for k in children.get(0, [])]:
        raise ValueError("the root needs a rank-0 child (the draft's greedy token)")


def chain_tree(depth: int, width: int = 1) -> DraftTree:
    """The greedy chain of ``depth`` tokens with ``width - 1`` leaf siblings (the draft's next
    best tokens) at every depth; ``width = 1`` is :meth:`DraftTree.chain`."""
    if depth < 1 or width < 1:
        raise ValueError(f"a chain tree needs depth >= 1 and width >= 1, got depth {depth}, width {width}")
    parents, ranks, chain_node = [-1], [0], 0
    for _ in range(depth):
        first = len(parents)
        for r in range(width):
            parents.append(chain_node)
            ranks.append(r)
        chain_node = first
    return DraftTree(tuple(parents), tuple(ranks))


def chain_width(tree: DraftTree) -> int:
    """W: how many of the draft's top tokens per chain step the tree uses."""
    return max(tree.ranks[1:], default=0) + 1


def tree_from_chain(
    chain: np.ndarray,  # [B, D] int: the draft's greedy tokens, depth 1..D
    topk: np.ndarray | None,  # [B, D, W] int: the draft's top-W tokens at each chain step (None when W = 1)
    valid_depth: np.ndarray,  # [B] int: chain steps actually drafted (the draft may stop at EOS)
    tree: DraftTree,
) -> tuple[np.ndarray, np.ndarray]:
    """Node tokens ``[B, N]`` and draft lengths ``[B]`` of a chain tree."""
    check_chain_tree(tree)
    chain, valid_depth = np.asarray(chain), np.asarray(valid_depth)
    B, D = chain.shape[0], tree.max_depth
    W = chain_width(tree)
    if chain.ndim != 2 or chain.shape[1] < D:
        raise ValueError(f"chain must be [B, D>={D}] for a tree of depth {D}, got {chain.shape}")
    if W > 1 and (topk is None or topk.shape[:2] != (B, chain.shape[1]) or topk.shape[2] < W):
        raise ValueError(f"the tree uses the draft's top-{W} tokens: topk must be [B, D, >={W}], "
                         f"got {None if topk is None else topk.shape}")
    node_tokens = np.zeros((B, tree.num_nodes), np.int64)
    for n in range(1, tree.num_nodes + 1):
        step, rank = int(tree.depths[n]) - 1, tree.ranks[n]
        node_tokens[:, n - 1] = chain[:, step] if rank == 0 else topk[:, step, rank]
    depths = tree.depths[1:]  # [N]; nodes are numbered level by level, so valid ones come first
    draft_lens = np.array([int(np.sum(depths <= min(int(v), D))) for v in valid_depth], np.int32)
    return node_tokens, draft_lens


def _request_rows(tree: DraftTree, n_valid: int) -> list[list[int]]:
    """Node lists of the rows of one request: paths cut at invalid nodes, prefixes dropped."""
    rows = []
    for path in tree.paths:
        nodes = []
        for n in path[1:]:
            if n == PAD or n > n_valid:
                break
            nodes.append(int(n))
        rows.append(nodes)
    keep = []
    for r in rows:
        if r in keep or any(len(o) > len(r) and o[: len(r)] == r for o in rows):
            continue
        keep.append(r)
    return keep


def pack_cycle(
    prefixes: Sequence[Sequence[int]],
    tree: DraftTree,
    node_tokens: np.ndarray,  # [B, N] int
    draft_lens: np.ndarray,  # [B] int
    threshold: np.ndarray,  # [B] float in [0, 1]
    draft_hidden: np.ndarray | None = None,  # [B, N+1, Hd]
    greedy_child: bool = False,  # pack the tree's greedy children (a lookahead judge reads them)
) -> PackedCycle:
    node_tokens, draft_lens = np.asarray(node_tokens), np.asarray(draft_lens)
    threshold = np.asarray(threshold, np.float32).reshape(-1)
    B, N = len(prefixes), tree.num_nodes
    if node_tokens.shape != (B, N) or draft_lens.shape != (B,) or threshold.shape != (B,):
        raise ValueError(f"expected node_tokens [B, N] = [{B}, {N}], draft_lens [{B}], threshold [{B}]; got "
                         f"{node_tokens.shape}, {draft_lens.shape}, {threshold.shape}")
    if any(len(p) == 0 for p in prefixes):
        raise ValueError("every prefix needs at least one token (the root)")
    if draft_hidden is not None and np.asarray(draft_hidden).shape[:2] != (B, N + 1):
        raise ValueError(f"draft_hidden must be [B, N+1, Hd] = [{B}, {N + 1}, Hd], got {np.asarray(draft_hidden).shape}")
    tokens: list[int] = []
    positions: list[int] = []
    lengths: list[int] = []
    row_request: list[int] = []
    node_rows = np.zeros(B * (N + 1), np.int32)
    for b, prefix in enumerate(prefixes):
        L = len(prefix)
        node_rows[b * (N + 1)] = len(tokens) + L - 1
        seen: set[int] = set()
        for nodes in _request_rows(tree, int(draft_lens[b])):
            start = len(tokens)
            row = [int(t) for t in prefix] + [int(node_tokens[b, n - 1]) for n in nodes]
            tokens += row
            positions += list(range(len(row)))
            lengths.append(len(row))
            row_request.append(b)
            for j, n in enumerate(nodes, start=1):
                if n not in seen:
                    seen.add(n)
                    node_rows[b * (N + 1) + n] = start + L - 1 + j
        for n in range(1, N + 1):
            if n not in seen:
                node_rows[b * (N + 1) + n] = node_rows[b * (N + 1)]
    return PackedCycle(
        input_ids=np.asarray(tokens, np.int32),
        position_ids=np.asarray(positions, np.int32),
        context_lengths=np.asarray(lengths, np.int32),
        row_request=np.asarray(row_request, np.int32),
        node_rows=node_rows,
        draft_tokens=node_tokens.astype(np.int32),
        draft_lens=draft_lens.astype(np.int32),
        paths=np.repeat(tree.paths[None].astype(np.int32), B, axis=0),
        threshold=threshold,
        draft_hidden=None if draft_hidden is None else np.asarray(draft_hidden, np.float32).reshape(B * (N + 1), -1),
        greedy_child=np.repeat(tree.greedy_child[None].astype(np.int32), B, axis=0) if greedy_child else None,
    )


def engine_feed(cycle: PackedCycle, num_layers: int, max_input_len: int, max_seq_len: int
                ) -> dict[str, tuple[np.ndarray, bool]]:
    """Every input of a context-only TensorRT-LLM 1.2 engine with the AutoJudge inputs.

    Returns ``name -> (array, on_host)``. The base names and values follow what TensorRT-LLM's
    Python runtime binds for a gpt-attention-plugin engine with the KV cache disabled and input
    padding removed (``runtime/generation.py``, context phase; ``examples/models/contrib/stdit``
    drives such an engine through ``Session``): request type 0 = context, ``last_token_ids`` is
    the cumulative row length, perf knobs -1 (defaults).
    """
    from ..engine import io_spec

    R = cycle.context_lengths.shape[0]
    feed = {
        "input_ids": (cycle.input_ids, False),  # [T]
        "position_ids": (cycle.position_ids, False),  # [T]
        "last_token_ids": (np.cumsum(cycle.context_lengths).astype(np.int32), False),  # [R]
        "context_lengths": (cycle.context_lengths, False),  # [R]
        "host_context_lengths": (cycle.context_lengths.copy(), True),  # [R]
        "host_request_types": (np.zeros(R, np.int32), True),  # [R]
        "host_max_attention_window_sizes": (np.full(num_layers, max_seq_len, np.int32), True),  # [layers]
        "host_sink_token_length": (np.zeros(1, np.int32), True),  # [1]
        "host_runtime_perf_knobs": (np.full(16, -1, np.int64), True),  # [16]
        "host_context_progress": (np.zeros(1, np.int64), True),  # [1]
        io_spec.NODE_ROWS: (cycle.node_rows, False),  # [B*(N+1)]
        io_spec.DRAFT_TOKENS: (cycle.draft_tokens, False),  # [B, N]
        io_spec.DRAFT_LENS: (cycle.draft_lens, False),  # [B]
        io_spec.PATHS: (cycle.paths, False),  # [B, P, D+1]
        io_spec.THRESHOLD: (cycle.threshold, False),  # [B]
    }
    if cycle.draft_hidden is not None:
        feed[io_spec.DRAFT_HIDDEN] = (cycle.draft_hidden, False)  # [B*(N+1), Hd]
    if cycle.greedy_child is not None:
        feed[io_spec.GREEDY_CHILD] = (cycle.greedy_child, False)  # [B, N+1]
    if int(cycle.context_lengths.max()) > max_input_len:
        raise ValueError(f"a context row has {int(cycle.context_lengths.max())} tokens, the engine's max_input_len is "
                         f"{max_input_len}: rebuild with a larger --max_input_len or lower max_new_tokens")
    return feed
