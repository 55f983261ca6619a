"""One step of TensorRT-LLM 1.2's EAGLE engine as the AutoJudgeAccept tree-logits mode reads it, the
rule that rewrites its logits, and the stock exact-match walk that then reads them: the Python
reference of the tree step of ``plugins/include/autojudge/accept_core.h`` (the host core and the CUDA
kernel run that header; ``tests/test_host_core_tree.py`` compares them). Words as in
:mod:`.acceptance`.

Layout (``EagleForCausalLM._eagle_fwd_helper`` hands ``EagleSampleAndAcceptDraftTokens`` these
tensors; ``eagleDecodingKernels.cu`` ``assembleTargetLogitsOffsets`` reads the rows): request b owns
``draft_lens[b] + 1`` consecutive logits rows, from row ``sum over b' < b of (draft_lens[b'] + 1)``:
its root (the last accepted token), then node n at row ``first + n`` (draft token n as the input).
A context request has ``draft_lens = 0``: its one row is its last prompt token. ``draft_tokens [B, N]``,
``paths [B, P, D+1]`` are the stock inputs ``draft_tokens`` and ``draft_paths``.

The step is refused whole (:class:`TreeStepMismatch`) when a ``draft_lens`` entry lies outside
``[0, N]`` or the requests' rows do not add up to the logits rows. A request is refused (its rows copied
unchanged, so the stock walk accepts exact matches only) when its path rows are not one tree of its
nodes: a row starting with neither 0 nor -1 (padding), an index outside ``[-1, draft_lens[b]]``, a node
after a -1, a node with two parents; or when two children of one node carry the same token (the walk
could then follow the twin of a judged node).

The rule, per request that is not refused:

1. ``target_argmax`` of every row; a node n with parent m is JUDGED when its token mismatches
   ``target_argmax[m]``, lies in the vocabulary, its judge logit is finite and below
   ``logit(threshold[b])``, and row m has a finite value above its maximum;
2. :func:`.acceptance.accept_tree` on those rows: the best path and its accepted prefix;
3. for every judged node on that prefix, its parent row's entry for its token becomes the next
   value above the row's maximum (:func:`.packed_step.next_above`): the token becomes the row's
   strict argmax. No other row changes.

The stock walk (:func:`stock_accept`, ``common.cu`` ``acceptDraftTokensByIdsWithPaths`` as
``EagleSampleAndAcceptDraftTokensPlugin::acceptDraftTokens`` calls it: no end ids, every path node
read) then accepts exactly the judge's acceptance of the original logits: its best path is the
longest and, among equally long ones, the lowest row. A rewrite only makes the judge's best path's
nodes exact and breaks the exact matches of their siblings, so no other row can reach as far, and a
lower row as long as the best would have been the judge's choice too (fewer or as many judged
nodes). ``tests/test_host_core_tree.py`` checks it on random trees, ties included.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .acceptance import PAD, accept_tree
from .packed_step import next_above

UNSAMPLED = -2  # stock target ids of rows a request does not own (never equal to a draft token >= -1)


class TreeStepMismatch(ValueError):
    """The requests' rows (``draft_lens + 1`` each) do not add up to the step's logits rows."""


def tree_step_rows(draft_lens: np.ndarray, num_draft_nodes: int, num_rows: int) -> np.ndarray:
    """[B] int64: each request's first row. Raises :class:`TreeStepMismatch` on a draft length outside
    ``[0, num_draft_nodes]`` or rows that do not add up to ``num_rows``."""
    lens = np.asarray(draft_lens, np.int64).reshape(-1)
    if lens.size and (lens.min() < 0 or lens.max() > num_draft_nodes):
        raise TreeStepMismatch(f"draft_lens {lens.tolist()} must lie in [0, {num_draft_nodes}] (draft_tokens columns)")
    ends = np.cumsum(lens + 1)
    total = int(ends[-1]) if len(ends) else 0
    if total != num_rows:
        raise TreeStepMismatch(f"the requests own {total} logits rows (draft_lens + 1 each), the step has {num_rows}")
    return ends - (lens + 1)


def tree_parents(paths: np.ndarray, n_valid: int) -> np.ndarray | None:
    """[n_valid + 1] int64: the parent of each node in one request's path rows ``[P, D+1]`` (-1: the root
    and nodes on no row), or None when the rows are not one tree of nodes ``1..n_valid``."""
    parents = np.full(n_valid + 1, PAD, np.int64)
    for row in np.asarray(paths, np.int64):
        if row[0] == PAD:
            continue
        if row[0] != 0:
            return None
        closed = False
        for j in range(1, len(row)):
            node = int(row[j])
            if node == PAD:
                closed = True
                continue
            if closed or not 1 <= node <= n_valid or parents[node] not in (PAD, row[j - 1]):
                return None
            parents[node] = row[j - 1]
    return parents


def siblings_distinct(parents: np.ndarray, draft_tokens: np.ndarray) -> bool:
    """No two children of one node carry the same token (``parents [n+1]``, ``draft_tokens [>= n]``)."""
    seen = set()
    for n in range(1, len(parents)):
        if parents[n] != PAD:
            key = (int(parents[n]), int(draft_tokens[n - 1]))
            if key in seen:
                return False
            seen.add(key)
    return True


def request_refused(paths: np.ndarray, n_valid: int, draft_tokens: np.ndarray) -> bool:
    """Whether the rule refuses one request (module docstring)."""
    parents = tree_parents(paths, n_valid)
    return parents is None or not siblings_distinct(parents, draft_tokens)


def judged_nodes(
    target_logits: np.ndarray,  # [n+1, V] one request's rows, float32 / float16 / bfloat16 bits as uint16
    target_argmax: np.ndarray,  # [n+1] int
    judge_logit: np.ndarray,  # [n+1] float
    draft_tokens: np.ndarray,  # [n] int
    parents: np.ndarray,  # [n+1] int, -1 for the root and nodes on no row
    threshold: float,
) -> np.ndarray:  # [n+1] bool
    """Step 1 of the rule: the nodes the judge lets through."""
    unsigned = np.uint32 if target_logits.dtype == np.float32 else np.uint16
    V = target_logits.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        cut = np.log(np.float64(threshold)) - np.log1p(-np.float64(threshold))
    relaxed = np.zeros(len(parents), bool)
    for n in range(1, len(parents)):
        m, token, logit = int(parents[n]), int(draft_tokens[n - 1]), np.float64(judge_logit[n])
        if m == PAD or not 0 <= token < V or token == target_argmax[m] or not (np.isfinite(logit) and logit < cut):
            continue
        relaxed[n] = next_above(int(target_logits[m].view(unsigned)[target_argmax[m]]), target_logits.dtype) is not None
    return relaxed


def rewrite_tree_logits(
    target_logits: np.ndarray,  # [L, V] float32 / float16 / bfloat16 bits as uint16
    target_argmax: np.ndarray,  # [L] int: argmax of each row
    judge_logit: np.ndarray,  # [L] float: judge logit of each row's node
    draft_tokens: np.ndarray,  # [B, N] int
    draft_lens: np.ndarray,  # [B] int
    paths: np.ndarray,  # [B, P, D+1] int
    threshold: np.ndarray,  # [B] float
) -> np.ndarray:
    """[L, V] the rewritten logits (module docstring); same dtype as ``target_logits``."""
    logits = np.ascontiguousarray(target_logits)
    draft_tokens, paths = np.asarray(draft_tokens, np.int64), np.asarray(paths, np.int64)
    first_rows = tree_step_rows(draft_lens, draft_tokens.shape[1], len(logits))
    unsigned = np.uint32 if logits.dtype == np.float32 else np.uint16
    out = logits.copy()
    for b, first in enumerate(first_rows.tolist()):
        n = int(draft_lens[b])
        rows = slice(first, first + n + 1)
        if request_refused(paths[b], n, draft_tokens[b]):
            continue
        parents = tree_parents(paths[b], n)
        relaxed = judged_nodes(logits[rows], target_argmax[rows], judge_logit[rows], draft_tokens[b], parents,
                               float(threshold[b]))
        acc = accept_tree(draft_tokens[b, :n][None], np.asarray(target_argmax[rows])[None], paths[b][None], relaxed[None])
        best = paths[b, acc.best_path[0]]
        for j in range(1, int(acc.accepted_len[0]) + 1):
            node, parent = int(best[j]), int(best[j - 1])
            if relaxed[node]:
                row = first + parent
                bits = int(logits[row].view(unsigned)[target_argmax[row]])
                out[row].view(unsigned)[draft_tokens[b, node - 1]] = next_above(bits, logits.dtype)
    return out


@dataclass
class StockAcceptance:
    """The outputs of TensorRT-LLM's ``EagleSampleAndAcceptDraftTokens`` of one step."""

    accepted_tokens: np.ndarray  # [B, D+1] int32: the target's tokens along the best path, -1 after
    accepted_lens: np.ndarray  # [B] int32: tokens accepted, >= 1 (the correction / bonus token included)
    accepted_paths: np.ndarray  # [B] int32: index of the best path row


def target_ids(row_argmax: np.ndarray, draft_lens: np.ndarray, max_decoding_tokens: int) -> np.ndarray:
    """[B, max_decoding_tokens]: the stock top-1 sample of each request's rows (``row_argmax [L]``),
    :data:`UNSAMPLED` past its ``draft_lens[b] + 1`` rows."""
    first_rows = tree_step_rows(draft_lens, max_decoding_tokens - 1, len(row_argmax))
    out = np.full((len(first_rows), max_decoding_tokens), UNSAMPLED, np.int64)
    for b, first in enumerate(first_rows.tolist()):
        n = int(draft_lens[b]) + 1
        out[b, :n] = row_argmax[first:first + n]
    return out


def stock_accept(
    target_ids: np.ndarray,  # [B, M] int: each request's top-1 token per node (M = max_decoding_tokens)
    draft_tokens: np.ndarray,  # [B, M-1] int
    paths: np.ndarray,  # [B, P, D+1] int
) -> StockAcceptance:
    """``acceptDraftTokensByIdsWithPaths`` (no end ids): per path row not starting with -1, walk while
    the node's draft token equals its parent's target token; the length counts the accepted nodes and
    the one target token after them (D + 1 for a full row); the longest row wins, the lowest on ties."""
    B, P, D1 = paths.shape
    accepted = np.full((B, D1), PAD, np.int32)
    lens, best_paths = np.zeros(B, np.int32), np.zeros(B, np.int32)
    for b in range(B):
        best_len, best_p = -1, -1
        for p in range(P):
            row = paths[b, p]
            if row[0] == PAD:
                continue
            length, target = D1, target_ids[b, row[0]]
            for ti in range(1, D1):
                node = int(row[ti])
                if node == PAD or draft_tokens[b, node - 1] != target:
                    length = ti
                    break
                target = target_ids[b, node]
            if length > best_len:
                best_len, best_p = length, p
        lens[b], best_paths[b] = best_len, best_p
        accepted[b, :best_len] = [target_ids[b, int(paths[b, best_p, ti])] for ti in range(best_len)]
    return StockAcceptance(accepted, lens, best_paths)
