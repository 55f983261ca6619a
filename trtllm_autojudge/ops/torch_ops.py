"""``torch.ops.autojudge``: the acceptance rule as torch custom ops, one code path for CPU and GPU.

- ``torch.ops.autojudge.accept``: accept mode (``spec/acceptance.py``) from the target logits and
  hidden states of every node: the judge logit, the path walk and the best path in one call.
- ``torch.ops.autojudge.rewrite_logits``: logits mode (``plugins/README.md``): the target logits
  with the judge-accepted draft tokens made the row's argmax.
- ``torch.ops.autojudge.rewrite_tree_logits``: tree logits mode, one step of TensorRT-LLM's EAGLE
  engine (:mod:`trtllm_autojudge.spec.tree_step`): each request's judged best-path nodes made their
  parent rows' argmax, for the stock exact-match walk.

The judge may be any setup of the blocks of :mod:`trtllm_autojudge.spec.judge_blocks` (DT, DD,
DT1, DT2, DD1, LS), as :class:`trtllm_autojudge.decoding.modes.JudgeRule` scores it. CPU tensors run
the C++ host core (:mod:`.host_library`); CUDA tensors run the CUDA kernels through the extension of
:mod:`.cuda_extension` (built on first use, GPU hosts only). Both run the functions of
``plugins/include/autojudge/accept_core.h``. Words as in :mod:`trtllm_autojudge.spec.acceptance`.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

from ..spec.judge_blocks import block_codes, feature_size, reads_draft, window_tokens
from .cuda_extension import cuda_extension
from .host_library import host_core

FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16)


class AcceptedDraft(NamedTuple):
    accepted_tokens: Tensor  # [B, D+1] int32: accepted draft tokens, the correction token, -1 padding
    accepted_lens: Tensor  # [B] int32: accepted draft tokens (correction token excluded)
    best_path: Tensor  # [B] int32: index of the chosen path row
    judged_count: Tensor  # [B] int32: accepted mismatches let through by the judge


def _check(t: Tensor, name: str, shape: str, sizes: tuple, dtypes: tuple, device: torch.device) -> None:
    if t.device != device:
        raise ValueError(f"{name} must be on {device} like target_logits, got {t.device}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} must have dtype in {[str(d) for d in dtypes]}, got {t.dtype}")
    if t.dim() != len(sizes) or any(s is not None and t.shape[i] != s for i, s in enumerate(sizes)):
        raise ValueError(f"{name} must be {shape}, got {tuple(t.shape)}")


def _check_rows(target_logits: Tensor, target_hidden: Tensor, judge_weight: Tensor, setup: str,
                draft_hidden: Optional[Tensor]) -> None:
    device = target_logits.device
    _check(target_logits, "target_logits", "[rows, V]", (None, None), FLOAT_TYPES, device)
    if target_logits.shape[1] < 1:
        raise ValueError("target_logits needs a vocabulary of at least one entry")
    rows = target_logits.shape[0]
    _check(target_hidden, "target_hidden", "[rows, Ht]", (rows, None), FLOAT_TYPES, device)
    if reads_draft(setup) != (draft_hidden is not None):
        raise ValueError(f"setup {setup} {'reads' if reads_draft(setup) else 'reads no'} draft hidden states: "
                         f"{'give' if reads_draft(setup) else 'do not give'} draft_hidden [rows, Hd]")
    if draft_hidden is not None:
        _check(draft_hidden, "draft_hidden", "[rows, Hd]", (rows, None), (target_hidden.dtype,), device)
    features = feature_size(setup, target_hidden.shape[1], 0 if draft_hidden is None else draft_hidden.shape[1])
    _check(judge_weight, "judge_weight", f"[{features}] (the features of setup {setup}, in its order)", (features,),
           (torch.float32,), device)


def _check_tree_inputs(draft_tokens, draft_lens, paths, threshold, setup, greedy_child, device) -> tuple[int, int]:
    """The tree inputs of accept mode and tree logits mode; returns (B, N)."""
    _check(draft_tokens, "draft_tokens", "[B, N]", (None, None), (torch.int32,), device)
    B, N = draft_tokens.shape
    _check(draft_lens, "draft_lens", "[B]", (B,), (torch.int32,), device)
    _check(paths, "paths", "[B, P, D + 1]", (B, None, None), (torch.int32,), device)
    if paths.shape[2] < 1:
        raise ValueError("paths must be [B, P, D + 1] with D + 1 >= 1 (the root column)")
    _check(threshold, "threshold", "[B]", (B,), (torch.float32,), device)
    if (window_tokens(setup) > 0) != (greedy_child is not None):
        raise ValueError(f"setup {setup} {'looks' if window_tokens(setup) else 'does not look'} ahead: "
                         f"{'give' if window_tokens(setup) else 'do not give'} greedy_child [B, N + 1]")
    if greedy_child is not None:
        _check(greedy_child, "greedy_child", "[B, N + 1]", (B, N + 1), (torch.int32,), device)
    return B, N


def _check_accept(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight, setup,
                  draft_hidden, greedy_child) -> None:
    _check_rows(target_logits, target_hidden, judge_weight, setup, draft_hidden)
    B, N = _check_tree_inputs(draft_tokens, draft_lens, paths, threshold, setup, greedy_child, target_logits.device)
    if target_logits.shape[0] != B * (N + 1):
        raise ValueError(f"target_logits must have B * (N + 1) = {B * (N + 1)} rows (one per node, root included) "
                         f"for draft_tokens [B, N] = {tuple(draft_tokens.shape)}, got {target_logits.shape[0]}")


def _check_rewrite(target_logits, target_hidden, input_ids, last_token_ids, request_types, host_context_lengths,
                   judge_weight, setup, draft_hidden) -> None:
    _check_rows(target_logits, target_hidden, judge_weight, setup, draft_hidden)
    device = target_logits.device
    _check(input_ids, "input_ids", "[T]", (None,), (torch.int32,), device)
    _check(last_token_ids, "last_token_ids", "[L]", (target_logits.shape[0],), (torch.int32,), device)
    host = torch.device("cpu")  # TensorRT-LLM keeps both in host memory
    _check(request_types, "request_types", "[S] (CPU)", (None,), (torch.int32,), host)
    _check(host_context_lengths, "host_context_lengths", "[S] (CPU)", (request_types.shape[0],), (torch.int32,), host)


def _numpy(t: Tensor) -> np.ndarray:
    """A CPU tensor as a NumPy array (bfloat16 as its raw bits in uint16), without a copy when contiguous."""
    t = t.detach().contiguous()
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()


@torch.library.custom_op("autojudge::accept", mutates_args=(), device_types="cpu")
def _accept_op(target_logits: Tensor, target_hidden: Tensor, draft_tokens: Tensor, draft_lens: Tensor, paths: Tensor,
               threshold: Tensor, judge_weight: Tensor, judge_bias: float, setup: str, min_run: int,
               draft_hidden: Optional[Tensor], greedy_child: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    _check_accept(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight, setup,
                  draft_hidden, greedy_child)
    core = host_core()
    optional = lambda t: None if t is None else _numpy(t)  # noqa: E731
    argmax, judge_logit = core.judge_nodes(_numpy(target_logits), _numpy(target_hidden), _numpy(draft_tokens),
                                           _numpy(paths), _numpy(judge_weight), judge_bias, setup,
                                           optional(draft_hidden), optional(greedy_child), _numpy(draft_lens), min_run)
    out = core.accept_tree(_numpy(draft_tokens), argmax, _numpy(paths), judge_logit, _numpy(threshold),
                           _numpy(draft_lens), min_run)
    return (torch.from_numpy(out.accepted_tokens), torch.from_numpy(out.accepted_len),
            torch.from_numpy(out.best_path), torch.from_numpy(out.judged_count))


@_accept_op.register_kernel("cuda")
def _accept_cuda(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight, judge_bias,
                 setup, min_run, draft_hidden, greedy_child):
    _check_accept(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight, setup,
                  draft_hidden, greedy_child)
    return tuple(cuda_extension().accept(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold,
                                         judge_weight, judge_bias, block_codes(setup).tolist(), min_run,
                                         draft_hidden, greedy_child))


@_accept_op.register_fake
def _accept_fake(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight, judge_bias,
                 setup, min_run, draft_hidden, greedy_child):
    B, D1 = draft_tokens.shape[0], paths.shape[2]
    new = lambda *shape: target_logits.new_empty(shape, dtype=torch.int32)  # noqa: E731
    return new(B, D1), new(B), new(B), new(B)


@torch.library.custom_op("autojudge::rewrite_logits", mutates_args=(), device_types="cpu")
def _rewrite_op(target_logits: Tensor, target_hidden: Tensor, input_ids: Tensor, last_token_ids: Tensor,
                request_types: Tensor, host_context_lengths: Tensor, threshold: float, judge_weight: Tensor,
                judge_bias: float, setup: str, min_run: int, draft_hidden: Optional[Tensor]) -> Tensor:
    _check_rewrite(target_logits, target_hidden, input_ids, last_token_ids, request_types, host_context_lengths,
                   judge_weight, setup, draft_hidden)
    core = host_core()
    logits = _numpy(target_logits)
    sequences = (_numpy(input_ids), _numpy(last_token_ids), _numpy(request_types), _numpy(host_context_lengths))
    argmax, judge_logit = core.judge_rows(logits, _numpy(target_hidden), *sequences, _numpy(judge_weight), judge_bias,
                                          setup, None if draft_hidden is None else _numpy(draft_hidden), min_run)
    out = torch.from_numpy(core.rewrite_logits(logits, argmax, judge_logit, *sequences, threshold, min_run))
    return out.view(torch.int16).view(torch.bfloat16) if target_logits.dtype == torch.bfloat16 else out


@_rewrite_op.register_kernel("cuda")
def _rewrite_cuda(target_logits, target_hidden, input_ids, last_token_ids, request_types, host_context_lengths,
                  threshold, judge_weight, judge_bias, setup, min_run, draft_hidden):
    _check_rewrite(target_logits, target_hidden, input_ids, last_token_ids, request_types, host_context_lengths,
                   judge_weight, setup, draft_hidden)
    return cuda_extension().rewrite_logits(target_logits, target_hidden, input_ids, last_token_ids, request_types,
                                           host_context_lengths, threshold, judge_weight, judge_bias,
                                           block_codes(setup).tolist(), min_run, draft_hidden)


@_rewrite_op.register_fake
def _rewrite_fake(target_logits, target_hidden, input_ids, last_token_ids, request_types, host_context_lengths,
                  threshold, judge_weight, judge_bias, setup, min_run, draft_hidden):
    return torch.empty_like(target_logits)


def _check_rewrite_tree(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight, setup,
                        greedy_child) -> None:
    if reads_draft(setup):
        raise ValueError(f"setup {setup} reads the draft's hidden states, which an EAGLE engine step does not have: "
                         f"tree logits mode runs target-only judges")
    _check_rows(target_logits, target_hidden, judge_weight, setup, None)
    _check_tree_inputs(draft_tokens, draft_lens, paths, threshold, setup, greedy_child, target_logits.device)


@torch.library.custom_op("autojudge::rewrite_tree_logits", mutates_args=(), device_types="cpu")
def _rewrite_tree_op(target_logits: Tensor, target_hidden: Tensor, draft_tokens: Tensor, draft_lens: Tensor,
                     paths: Tensor, threshold: Tensor, judge_weight: Tensor, judge_bias: float, setup: str,
                     min_run: int, greedy_child: Optional[Tensor]) -> Tensor:
    _check_rewrite_tree(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight, setup,
                        greedy_child)
    core = host_core()
    logits = _numpy(target_logits)
    tree = (_numpy(draft_tokens), _numpy(draft_lens), _numpy(paths))
    argmax, judge_logit = core.judge_tree_rows(logits, _numpy(target_hidden), *tree, _numpy(judge_weight), judge_bias,
                                               setup, None if greedy_child is None else _numpy(greedy_child), min_run)
    out = torch.from_numpy(core.rewrite_tree_logits(logits, argmax, judge_logit, *tree, _numpy(threshold), min_run))
    return out.view(torch.int16).view(torch.bfloat16) if target_logits.dtype == torch.bfloat16 else out


@_rewrite_tree_op.register_kernel("cuda")
def _rewrite_tree_cuda(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight,
                       judge_bias, setup, min_run, greedy_child):
    _check_rewrite_tree(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight, setup,
                        greedy_child)
    return cuda_extension().rewrite_tree_logits(target_logits, target_hidden, draft_tokens, draft_lens, paths,
                                                threshold, judge_weight, judge_bias, block_codes(setup).tolist(),
                                                min_run, greedy_child)


@_rewrite_tree_op.register_fake
def _rewrite_tree_fake(target_logits, target_hidden, draft_tokens, draft_lens, paths, threshold, judge_weight,
                       judge_bias, setup, min_run, greedy_child):
    return torch.empty_like(target_logits)


def _setup(setup: Optional[str], draft_hidden: Optional[Tensor]) -> str:
    """The judge's setup; by default DT, or DD-DT when the draft's hidden states are given."""
    return setup if setup is not None else ("DT" if draft_hidden is None else "DD-DT")


def accept(target_logits: Tensor, target_hidden: Tensor, draft_tokens: Tensor, draft_lens: Tensor, paths: Tensor,
           threshold: Tensor | float, judge_weight: Tensor, judge_bias: float,
           draft_hidden: Optional[Tensor] = None, setup: Optional[str] = None,
           greedy_child: Optional[Tensor] = None, min_run: int = 1) -> AcceptedDraft:
    """Judge-gated acceptance of a batch of draft trees (``torch.ops.autojudge.accept``).

    Node ``n`` of sequence ``b`` (node 0 is the root) owns row ``b * (N + 1) + n`` of the logits and
    hidden states. A node is accepted when its draft token equals the target argmax of its parent,
    or when its judge logit ``judge_bias + judge_weight . x`` is finite and below
    ``logit(threshold[b])``; each sequence keeps the longest accepted prefix of its best path,
    then the correction token. A mismatching node whose exact run (1 + the exact matches below it,
    ``accept_core.h``) is shorter than ``min_run`` is never judged. Only mismatching nodes that can
    be judged are scored; a node without the draft tokens its lookahead blocks need after it (its
    greedy child, and grandchild) has no verdict (rejected).
    Paths too short for any verdict are said once, as a warning.

    Parameters
    ----------
    target_logits : Tensor
        Shape: ``[B * (N + 1), V]``, float32/float16/bfloat16. Row of node n: the target's
        prediction for node n's child.
    target_hidden : Tensor
        Shape: ``[B * (N + 1), Ht]``, float32/float16/bfloat16: final-norm hidden state with node n's
        token as the input.
    draft_tokens : Tensor
        Shape: ``[B, N]``; token of node n at column n - 1 (cast to int32).
    draft_lens : Tensor
        Shape: ``[B]``; nodes 1..draft_lens[b] may be accepted (cast to int32).
    paths : Tensor
        Shape: ``[B, P, D + 1]``; root-to-leaf node indices, -1 padded (cast to int32).
    threshold : Tensor or float
        Shape: ``[B]`` (or a scalar for every sequence), in [0, 1].
    judge_weight : Tensor
        Shape: ``[F]`` float32, the folded weights of ``setup``'s blocks in its order (DD-DT: Hd + Ht).
    judge_bias : float
        The folded bias.
    draft_hidden : Tensor, optional
        Shape: ``[B * (N + 1), Hd]``, ``target_hidden``'s dtype; given when a block reads the draft
        (DD, DD1).
    setup : str, optional
        The judge's blocks, '-'-joined, from :data:`trtllm_autojudge.spec.judge_blocks.BLOCK_CODES`
        (the judge file's setup); default DT, or DD-DT when ``draft_hidden`` is given.
    greedy_child : Tensor, optional
        Shape: ``[B, N + 1]``; the rank-0 child of each node, -1 for none (a chain: n + 1, then -1;
        cast to int32); given when a block looks ahead (DT1, DT2, DD1, LS).
    min_run : int
        The judge's minimum run (``JudgeHead.min_run``; 1: none).

    Returns
    -------
    AcceptedDraft
        ``accepted_tokens [B, D + 1]``, ``accepted_lens [B]``, ``best_path [B]``,
        ``judged_count [B]`` (int32, on the input's device).

    Examples
    --------
    >>> import torch
    >>> from trtllm_autojudge.ops.torch_ops import accept
    >>> logits = torch.zeros(4, 8); logits[0, 5] = logits[1, 6] = logits[2, 1] = logits[3, 2] = 1
    >>> out = accept(logits, torch.zeros(4, 2), torch.tensor([[5, 6, 7]]), torch.tensor([3]),
    ...              torch.tensor([[[0, 1, 2, 3]]]), 0.5, torch.ones(2), -1.0)
    >>> out.accepted_tokens.tolist(), out.accepted_lens.tolist(), out.judged_count.tolist()
    ([[5, 6, 7, 2]], [3], [1])
    """
    B = draft_tokens.shape[0]
    device = target_logits.device
    setup = _setup(setup, draft_hidden)
    if not isinstance(threshold, Tensor):
        threshold = torch.full((B,), float(threshold), dtype=torch.float32, device=device)
    result = torch.ops.autojudge.accept(
        target_logits, target_hidden, draft_tokens.to(torch.int32), draft_lens.to(torch.int32),
        paths.to(torch.int32), threshold.to(torch.float32), judge_weight.to(torch.float32), float(judge_bias), setup,
        int(min_run), draft_hidden, None if greedy_child is None else greedy_child.to(torch.int32))
    window, depth = window_tokens(setup), paths.shape[-1] - 1
    if window and 0 < depth <= window:  # a step without drafts has nothing to judge; shown once per calling line
        warnings.warn(f"judge setup {setup} needs {window} draft tokens after a node for a verdict, and paths of at "
                      f"most {depth} draft tokens leave no node any: the judge gives no verdict, only exact matches "
                      f"are accepted; draft at least {window + 1} tokens per path", stacklevel=2)
    return AcceptedDraft(*result)


def rewrite_logits(target_logits: Tensor, target_hidden: Tensor, input_ids: Tensor, last_token_ids: Tensor,
                   request_types: Tensor, host_context_lengths: Tensor, threshold: float, judge_weight: Tensor,
                   judge_bias: float, draft_hidden: Optional[Tensor] = None, setup: Optional[str] = None,
                   min_run: int = 1) -> Tensor:
    """The target logits of a packed TensorRT-LLM step, rewritten for an exact-match decoder.

    ``torch.ops.autojudge.rewrite_logits``: the step is segmented into sequences by
    ``request_types`` / ``host_context_lengths`` (:mod:`trtllm_autojudge.spec.packed_step`);
    in each row whose draft child (the next row of the same sequence) mismatches the row's argmax
    opens at least ``min_run`` tokens through the exact rows after it, and passes the judge, the draft
    token becomes the row's strict argmax; every other entry is
    copied (``plugins/README.md``, "Logits mode"). A sequence's draft rows are a chain: the
    lookahead blocks of a draft row read the sequence's next draft rows.

    Parameters
    ----------
    target_logits : Tensor
        Shape: ``[L, V]``, float32/float16/bfloat16: the gathered logits rows of the step.
    target_hidden : Tensor
        Shape: ``[L, Ht]``: the LM head's input rows.
    input_ids : Tensor
        Shape: ``[T]``: the step's packed input ids (cast to int32).
    last_token_ids : Tensor
        Shape: ``[L]``: ascending 1-based position in ``input_ids`` of each row's input token.
    request_types, host_context_lengths : Tensor
        Shape: ``[S]`` each, on the CPU: the engine's ``host_request_types`` (0 context, 1
        generation) and ``host_context_lengths`` (cast to int32).
    threshold : float
        In [0, 1].
    judge_weight : Tensor
        Shape: ``[F]`` float32, the folded weights of ``setup``'s blocks in its order.
    judge_bias : float
    draft_hidden : Tensor, optional
        Shape: ``[L, Hd]``; given when a block reads the draft (DD, DD1).
    setup : str, optional
        As :func:`accept`.
    min_run : int
        As :func:`accept`.

    Returns
    -------
    Tensor
        Shape: ``[L, V]``, ``target_logits``' dtype and device.
    """
    return torch.ops.autojudge.rewrite_logits(
        target_logits, target_hidden, input_ids.to(torch.int32), last_token_ids.to(torch.int32),
        request_types.to(torch.int32), host_context_lengths.to(torch.int32), float(threshold),
        judge_weight.to(torch.float32), float(judge_bias), _setup(setup, draft_hidden), int(min_run), draft_hidden)


def rewrite_tree_logits(target_logits: Tensor, target_hidden: Tensor, draft_tokens: Tensor, draft_lens: Tensor,
                        paths: Tensor, threshold: Tensor | float, judge_weight: Tensor, judge_bias: float,
                        setup: str = "DT", greedy_child: Optional[Tensor] = None, min_run: int = 1) -> Tensor:
    """The target logits of one TensorRT-LLM EAGLE engine step, rewritten for its exact-match walk.

    ``torch.ops.autojudge.rewrite_tree_logits`` (:mod:`trtllm_autojudge.spec.tree_step`): request b
    owns ``draft_lens[b] + 1`` rows after those of the requests before it (its root, then node n at
    its row n); per request whose paths are one tree with distinct sibling tokens, the judge decides
    the mismatching nodes whose exact run reaches ``min_run``, the paths are walked, and every judged
    node on the best accepted path becomes its parent row's strict argmax; every other entry is
    copied. The stock walk (``acceptDraftTokensByIdsWithPaths``) then accepts what the judge
    accepted.

    Parameters
    ----------
    target_logits : Tensor
        Shape: ``[L, V]``, float32/float16/bfloat16: the step's ``lm_logits``.
    target_hidden : Tensor
        Shape: ``[L, Ht]``: the LM head's input rows.
    draft_tokens, draft_lens, paths : Tensor
        Shapes ``[B, N]``, ``[B]``, ``[B, P, D + 1]``: the engine inputs ``draft_tokens``,
        ``draft_lens``, ``draft_paths`` (cast to int32).
    threshold : Tensor or float
        Shape: ``[B]`` (or a scalar), in [0, 1]: per request (the engine's ``posterior_threshold``).
    judge_weight : Tensor
        Shape: ``[F]`` float32, the folded weights of ``setup``'s blocks in its order (no block reads the draft).
    judge_bias : float
    setup : str
        The judge's blocks, '-'-joined; target-only (DT, DT1, DT2, LS).
    greedy_child : Tensor, optional
        Shape: ``[B, N + 1]``; given when a block looks ahead.
    min_run : int
        As :func:`accept`.

    Returns
    -------
    Tensor
        Shape: ``[L, V]``, ``target_logits``' dtype and device.
    """
    B = draft_tokens.shape[0]
    if not isinstance(threshold, Tensor):
        threshold = torch.full((B,), float(threshold), dtype=torch.float32, device=target_logits.device)
    return torch.ops.autojudge.rewrite_tree_logits(
        target_logits, target_hidden, draft_tokens.to(torch.int32), draft_lens.to(torch.int32), paths.to(torch.int32),
        threshold.to(torch.float32), judge_weight.to(torch.float32), float(judge_bias), setup, int(min_run),
        None if greedy_child is None else greedy_child.to(torch.int32))
