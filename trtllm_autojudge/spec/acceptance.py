"""Greedy acceptance of a draft tree, with relaxed (lossy) acceptance of mismatches.

This module is the SPECIFICATION of the acceptance rule. The C++ host core,
the CUDA kernel and the TensorRT plugin in ``plugins/`` implement the same rule and are tested
against :func:`accept_tree` token for token.

Vocabulary (the same words are used in ``plugins/`` and ``docs/``):

node
    One token of the draft tree. Node 0 is the ROOT: the last token already in the output, which
    the target has not consumed yet. Nodes ``1..N`` are draft tokens: node ``n`` carries
    ``draft_tokens[b, n - 1]``.
path
    Node indices of one root-to-leaf path, ``paths[b, p, 0] == 0``, padded with -1. A chain of
    ``K`` draft tokens is the single path ``[0, 1, ..., K]``. A path row that starts with -1 is
    padding.
target_argmax
    ``target_argmax[b, n]``: the target's greedy token for the CHILD of node ``n`` (computed with
    node ``n`` as the last input token).
exact
    Node ``n`` with parent ``m`` (its predecessor on the path) is exact when
    ``draft_tokens[b, n - 1] == target_argmax[b, m]``.
judged
    A mismatching node that the relaxed rule lets through (``relaxed[b, n]``): the AutoJudge
    judge, or a baseline such as top-K.
accepted
    Exact or judged. The accepted length of a path is the length of its longest accepted prefix,
    root excluded. Nodes past ``draft_lens[b]`` are never accepted.
best path
    The path with the longest accepted length; ties go to fewer judged nodes, then to the lower
    path index. A sequence with no path row accepts nothing (best path 0, length 0).
correction token
    ``target_argmax`` at the last accepted node of the best path: the target's own token at the
    first rejected node, or the BONUS token when the whole path was accepted. Exactly one is
    emitted per cycle.
accepted tokens
    The accepted draft tokens of the best path, then the correction token, then -1 padding.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAD = -1  # padding value of paths and accepted_tokens


@dataclass
class Acceptance:
    """Result of one verification cycle for a batch of sequences."""

    accepted_len: np.ndarray  # [B] int32: accepted draft tokens (correction token excluded)
    best_path: np.ndarray  # [B] int32: index p of the chosen path
    accepted_tokens: np.ndarray  # [B, D+1] int32: accepted draft tokens, correction token, -1 pad
    judged_count: np.ndarray  # [B] int32: accepted mismatches (let through by the relaxed rule)

    def tokens(self, b: int) -> list[int]:
        """Tokens to append to sequence b: the accepted draft tokens and the correction token."""
        return [int(t) for t in self.accepted_tokens[b, : int(self.accepted_len[b]) + 1]]


def check_tree_inputs(
    draft_tokens: np.ndarray,  # [B, N] int
    target_argmax: np.ndarray,  # [B, N+1] int
    paths: np.ndarray,  # [B, P, D+1] int, -1 padded
    relaxed: np.ndarray | None,  # [B, N+1] bool
    draft_lens: np.ndarray | None,  # [B] int
) -> None:
    """Raise ValueError naming the argument whose shape or values break the contract."""
    if draft_tokens.ndim != 2:
        raise ValueError(f"draft_tokens must be [B, N], got shape {draft_tokens.shape}")
    B, N = draft_tokens.shape
    if target_argmax.shape != (B, N + 1):
        raise ValueError(
            f"target_argmax must be [B, N+1] = [{B}, {N + 1}] (one row per node, root included), "
            f"got {target_argmax.shape}"
        )
    if paths.ndim != 3 or paths.shape[0] != B or paths.shape[2] < 1:
        raise ValueError(f"paths must be [B, P, D+1] with B = {B}, got shape {paths.shape}")
    if paths.size and (paths.min() < PAD or paths.max() > N):
        bad = paths[(paths < PAD) | (paths > N)][0]
        raise ValueError(f"paths holds node index {bad}: valid node indices are 0..{N}, and -1 pads")
    if paths.size and not np.all((paths[:, :, 0] == 0) | (paths[:, :, 0] == PAD)):
        raise ValueError("paths[b, p, 0] must be the root (0), or -1 for a padding path row")
    if relaxed is not None and relaxed.shape != (B, N + 1):
        raise ValueError(f"relaxed must be [B, N+1] = [{B}, {N + 1}], got {relaxed.shape}")
    if draft_lens is not None:
        if draft_lens.shape != (B,):
            raise ValueError(f"draft_lens must be [B] = [{B}], got {draft_lens.shape}")
        if draft_lens.size and (draft_lens.min() < 0 or draft_lens.max() > N):
            raise ValueError(f"draft_lens must lie in 0..{N} (the number of draft nodes), got {draft_lens}")


def accept_tree(
    draft_tokens: np.ndarray,  # [B, N] int: token of node n at column n-1
    target_argmax: np.ndarray,  # [B, N+1] int: target's greedy child of each node
    paths: np.ndarray,  # [B, P, D+1] int: root-to-leaf node indices, -1 padded
    relaxed: np.ndarray | None = None,  # [B, N+1] bool: a mismatch at node n may be accepted
    draft_lens: np.ndarray | None = None,  # [B] int: nodes 1..draft_lens[b] are valid (default N)
) -> Acceptance:
    """Accept the longest prefix of the best path; see the module docstring for the words."""
    draft_tokens = np.asarray(draft_tokens)
    target_argmax = np.asarray(target_argmax)
    paths = np.asarray(paths)
    relaxed = None if relaxed is None else np.asarray(relaxed, dtype=bool)
    draft_lens = None if draft_lens is None else np.asarray(draft_lens)
    check_tree_inputs(draft_tokens, target_argmax, paths, relaxed, draft_lens)
    B, N = draft_tokens.shape
    P, D1 = paths.shape[1], paths.shape[2]

    accepted_len = np.zeros(B, np.int32)
    best_path = np.zeros(B, np.int32)
    judged_count = np.zeros(B, np.int32)
    accepted_tokens = np.full((B, D1), PAD, np.int32)
    for b in range(B):
        n_valid = N if draft_lens is None else int(draft_lens[b])
        best = (-1, 0, 0)  # (accepted length, judged, path index)
        for p in range(P):
            if paths[b, p, 0] != 0:
                continue  # padding row
            length = judged = 0
            for j in range(1, D1):
                node, parent = int(paths[b, p, j]), int(paths[b, p, j - 1])
                if node == PAD or node > n_valid:
                    break
                if draft_tokens[b, node - 1] != target_argmax[b, parent]:
                    if relaxed is None or not relaxed[b, node]:
                        break
                    judged += 1
                length += 1
            if length > best[0] or (length == best[0] and judged < best[1]):
                best = (length, judged, p)
        length, judged, p = best if best[0] >= 0 else (0, 0, 0)
        nodes = [int(n) for n in paths[b, p, 1 : length + 1]] if best[0] >= 0 else []
        last = nodes[-1] if nodes else 0
        accepted_tokens[b, :length] = [draft_tokens[b, n - 1] for n in nodes]
        accepted_tokens[b, length] = target_argmax[b, last]
        accepted_len[b], best_path[b], judged_count[b] = length, p, judged
    return Acceptance(accepted_len, best_path, accepted_tokens, judged_count)
