"""Read a chain tree's draft out of a draft engine's outputs (the executor or Triton's
``tensorrt_llm`` model): the greedy chain, the top-W tokens per chain step, the drafted depth, and
for judges with the blocks DD or DD1 the draft's hidden state at every node.

Draft hidden states (:mod:`.draft_spec`): while generating the chain of request b, the engine
returns row 0 for the root and row k for the chain node at depth k, k < drafted depth: the nodes
it took as input. The other valid nodes (the chain's last drafted node and every leaf sibling)
were never an input of the draft; :func:`unfed_nodes` lists them and :func:`node_context` gives
the context whose last token is the node, for one more draft pass.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...decoding.tree import DraftTree


def top_tokens(logits: np.ndarray, width: int) -> np.ndarray:
    """[..., V] -> [..., width] token ids, most likely first (ties: lower id first)."""
    return np.argsort(-np.asarray(logits, np.float32), axis=-1, kind="stable")[..., :width]


def draft_from_outputs(
    prefixes: Sequence[Sequence[int]],
    output_ids: np.ndarray,  # [B, S] prompt + generated tokens (padding after sequence_lengths)
    sequence_lengths: np.ndarray,  # [B] tokens in output_ids, prompt included
    generation_logits: np.ndarray | None,  # [B, >=D, V_padded] draft logits per generated step (W > 1)
    depth: int,
    width: int,
    vocab_size: int,
    end_id: int,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Chain ``[B, D]`` (``end_id`` past the drafted depth), top-W ``[B, D, W]`` (None when W = 1)
    and drafted depth ``[B]`` (the draft engine stops early at ``end_id``)."""
    B = len(prefixes)
    chain = np.full((B, depth), end_id, np.int64)
    valid = np.zeros(B, np.int64)
    for b, p in enumerate(prefixes):
        n = int(min(max(int(sequence_lengths[b]) - len(p), 0), depth))
        chain[b, :n] = output_ids[b, len(p): len(p) + n]
        valid[b] = n
    topk = None
    if width > 1:
        if generation_logits is None:
            raise ValueError(f"a tree of width {width} needs the draft's generation logits: request them")
        topk = top_tokens(np.asarray(generation_logits)[:, :depth, :vocab_size], width)  # [B, D, W]
    return chain, topk, valid


def unfed_nodes(
    tree: DraftTree,
    draft_lens: np.ndarray,  # [B] int: valid nodes per request
    drafted: np.ndarray,  # [B] int: chain steps the draft engine generated
) -> list[tuple[int, int]]:
    """``(b, n)`` of every valid node the chain generation did not take as input."""
    return [(b, n) for b in range(len(draft_lens)) for n in range(1, int(draft_lens[b]) + 1)
            if tree.ranks[n] != 0 or tree.depths[n] >= drafted[b]]


def node_context(prefix: Sequence[int], tree: DraftTree, node_tokens: np.ndarray, n: int) -> list[int]:
    """``prefix`` followed by the tokens on the path from the root to node n (``node_tokens`` [N])."""
    return [int(t) for t in prefix] + [int(node_tokens[m - 1]) for m in tree.path_to(n)]


def assemble_draft_hidden(
    tree: DraftTree,
    chain_hidden: np.ndarray,  # [B, >=D, Hd]: the chain generation's hidden rows (row k: chain depth k)
    drafted: np.ndarray,  # [B] int
    leaves: Sequence[tuple[int, int]],  # unfed_nodes(...)
    leaf_hidden: np.ndarray,  # [len(leaves), Hd]: hidden state with that node as the last input token
) -> np.ndarray:
    """[B, N+1, Hd] draft hidden state per node; nodes past ``draft_lens`` stay zero."""
    chain_hidden = np.asarray(chain_hidden)
    B, Hd = chain_hidden.shape[0], chain_hidden.shape[2]
    if len(leaves) != len(leaf_hidden):
        raise ValueError(f"{len(leaves)} unfed nodes but {len(leaf_hidden)} hidden rows for them")
    out = np.zeros((B, tree.num_nodes + 1, Hd), chain_hidden.dtype)
    for b in range(B):
        out[b, 0] = chain_hidden[b, 0]  # the root: the last prompt token
        for n in range(1, tree.num_nodes + 1):
            if tree.ranks[n] == 0 and tree.depths[n] < drafted[b]:
                out[b, n] = chain_hidden[b, tree.depths[n]]
    for (b, n), row in zip(leaves, leaf_hidden):
        out[b, n] = row
    return out
