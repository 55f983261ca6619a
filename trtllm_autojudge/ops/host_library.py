"""ctypes binding of ``libautojudge_host.so``: the C++ host core of the acceptance rule.

The host core runs the functions of ``plugins/include/autojudge/accept_core.h`` that the CUDA
kernels run, so it is the CPU twin of the kernels and is tested against the Python reference
(:mod:`trtllm_autojudge.spec.acceptance`). Words as defined there: node, path, target argmax,
judged, accepted, correction token.

Element types: float32 and float16 arrays as they are; bfloat16 as its raw bits in a uint16 array
(NumPy has no bfloat16).
"""
from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..spec.acceptance import Acceptance
from ..spec.judge_blocks import block_codes, feature_size, reads_draft, window_tokens
from ..spec.packed_step import StepMismatch
from ..spec.tree_step import TreeStepMismatch
from .build import cuda_toolchain_available, ensure_built

ABI_VERSION = 5  # AUTOJUDGE_HOST_ABI_VERSION in plugins/include/autojudge/host_api.h
ENV_VAR = "AUTOJUDGE_HOST_LIBRARY"
# dtype code of the C ABI per array dtype; uint16 carries bfloat16 bits.
DTYPE_CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint16): 2}
STEP_MISMATCH = 2  # AUTOJUDGE_HOST_STEP_MISMATCH: the sequences' tokens do not add up to input_ids

_i32, _f32, _vp = ctypes.c_int32, ctypes.c_float, ctypes.c_void_p


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.ctypes.data


def _sequences(request_types, host_context_lengths) -> tuple[np.ndarray, np.ndarray]:
    """The stock per-sequence inputs as int32, both [S]."""
    request_types = _int32(request_types, "request_types", 1)
    host_context_lengths = _int32(host_context_lengths, "host_context_lengths", 1)
    if request_types.shape != host_context_lengths.shape:
        raise ValueError(f"request_types {request_types.shape} and host_context_lengths "
                         f"{host_context_lengths.shape} must both be [S]")
    return request_types, host_context_lengths


def _int32(a, name: str, ndim: int) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int32)


def _elements(a, name: str) -> tuple[np.ndarray, int]:
    a = np.ascontiguousarray(a)
    if a.dtype not in DTYPE_CODES:
        raise ValueError(f"{name} must be float32, float16 or bfloat16 bits in uint16, got dtype {a.dtype}")
    return a, DTYPE_CODES[a.dtype]


class _Judge(NamedTuple):
    """The judge arguments the C ABI shares (``host_api.h``), checked; the arrays stay alive with it."""

    rows: int  # R
    arrays: tuple  # the contiguous arrays the pointers of ``arguments`` point into
    arguments: tuple  # vocab_size .. judge_bias


def _min_run(min_run) -> int:
    """The judge's minimum run (``accept_core.h`` "minimum run"), checked: a whole number >= 1 (1: none)."""
    if isinstance(min_run, bool) or int(min_run) != min_run or min_run < 1:
        raise ValueError(f"min_run must be a whole number >= 1 (1: no minimum run), got {min_run!r}")
    return int(min_run)


def _greedy_child(greedy_child, setup: str, B: int, N: int) -> np.ndarray | None:
    """``greedy_child`` as int32 ``[B, N+1]``, given exactly when the setup looks ahead."""
    looks_ahead = window_tokens(setup) > 0
    if looks_ahead != (greedy_child is not None):
        raise ValueError(f"setup {setup} {'looks' if looks_ahead else 'does not look'} ahead: "
                         f"{'give' if looks_ahead else 'do not give'} greedy_child [B, N+1]")
    if greedy_child is None:
        return None
    greedy_child = _int32(greedy_child, "greedy_child", 2)
    if greedy_child.shape != (B, N + 1):
        raise ValueError(f"greedy_child must be [B, N+1] = [{B}, {N + 1}], got {greedy_child.shape}")
    return greedy_child


def _judge(target_logits, target_hidden, judge_weight, judge_bias: float, setup: str, draft_hidden) -> _Judge:
    logits, logits_code = _elements(target_logits, "target_logits")
    hidden, hidden_code = _elements(target_hidden, "target_hidden")
    if logits.ndim != 2 or hidden.ndim != 2 or hidden.shape[0] != logits.shape[0] or logits.shape[1] < 1:
        raise ValueError(f"target_logits must be [R, V] with V >= 1 and target_hidden [R, Ht], got "
                         f"{logits.shape} and {hidden.shape}")
    codes = block_codes(setup)
    if reads_draft(setup) != (draft_hidden is not None):
        raise ValueError(f"setup {setup} {'reads' if reads_draft(setup) else 'reads no'} draft hidden states: "
                         f"{'give' if reads_draft(setup) else 'do not give'} draft_hidden")
    draft, draft_size = None, 0
    if draft_hidden is not None:
        draft, draft_code = _elements(draft_hidden, "draft_hidden")
        if draft_code != hidden_code or draft.ndim != 2 or draft.shape[0] != logits.shape[0]:
            raise ValueError(f"draft_hidden must be [R, Hd] of target_hidden's type ({hidden.dtype}), got "
                             f"{draft.shape} {draft.dtype}")
        draft_size = draft.shape[1]
    features = feature_size(setup, hidden.shape[1], draft_size)
    weight = np.ascontiguousarray(judge_weight, dtype=np.float32).reshape(-1)
    if weight.size != features:
        raise ValueError(f"judge_weight has {weight.size} values, setup {setup} with these hidden states has "
                         f"{features} features")
    return _Judge(logits.shape[0], (logits, hidden, draft, codes, weight),
                  (logits.shape[1], logits_code, _ptr(logits), hidden_code, _ptr(hidden), hidden.shape[1], _ptr(draft),
                   draft_size, codes.size, _ptr(codes), _ptr(weight), float(judge_bias)))


class HostCore:
    """The loaded host library. Use :func:`host_core` for the process-wide instance."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        lib = ctypes.CDLL(str(self.path))
        lib.autojudge_host_abi_version.restype = _i32
        abi = lib.autojudge_host_abi_version()
        if abi != ABI_VERSION:
            raise ImportError(f"{self.path} has host ABI {abi}, this package needs {ABI_VERSION}: rebuild it with "
                              f"`trtllm-autojudge build-plugin`")
        judge = [_i32, _i32, _vp, _i32, _vp, _i32, _vp, _i32, _i32, _vp, _vp, _f32]  # vocab_size .. judge_bias
        lib.autojudge_host_feature_block_name.argtypes = [_i32]
        lib.autojudge_host_feature_block_name.restype = ctypes.c_char_p
        lib.autojudge_host_feature_block_window.argtypes = [_i32]
        lib.autojudge_host_feature_block_window.restype = _i32
        lib.autojudge_host_judge_nodes.argtypes = [_i32, _i32] + judge + [_vp, _i32, _i32, _vp, _vp, _vp, _i32, _vp,
                                                                            _vp]
        lib.autojudge_host_judge_rows.argtypes = [_i32] + judge + [_i32, _vp, _vp, _i32, _vp, _vp, _i32, _vp, _vp]
        lib.autojudge_host_accept_tree.argtypes = [_i32, _i32, _i32, _i32] + [_vp] * 6 + [_i32] + [_vp] * 4
        lib.autojudge_host_segment_step.argtypes = [_i32, _vp, _i32, _i32, _vp, _vp, _vp, _vp]
        lib.autojudge_host_rewrite_logits.argtypes = [_i32, _i32, _i32, _vp, _vp, _vp, _i32, _vp, _vp, _i32, _vp, _vp,
                                                      _f32, _i32, _vp]
        tree = [_i32, _i32, _vp, _vp, _i32, _i32, _vp]  # batch_size .. paths
        lib.autojudge_host_segment_tree_step.argtypes = [_i32] + tree + [_vp, _vp]
        lib.autojudge_host_judge_tree_rows.argtypes = [_i32] + judge + tree + [_vp, _i32, _vp, _vp]
        lib.autojudge_host_rewrite_tree_logits.argtypes = [_i32, _i32, _i32, _vp, _vp, _vp] + tree + [_vp, _i32, _vp]
        for f in (lib.autojudge_host_judge_nodes, lib.autojudge_host_judge_rows, lib.autojudge_host_accept_tree,
                  lib.autojudge_host_segment_step, lib.autojudge_host_rewrite_logits, lib.autojudge_host_segment_tree_step,
                  lib.autojudge_host_judge_tree_rows, lib.autojudge_host_rewrite_tree_logits):
            f.restype = _i32
        self._lib = lib

    def _call(self, function, *args) -> None:
        status = function(*args)
        if status == STEP_MISMATCH and "tree" in function.__name__:
            raise TreeStepMismatch(f"{function.__name__}: a draft length lies outside [0, N], or the requests' rows "
                                   f"(draft_lens + 1 each) do not add up to the logits rows; the step is refused")
        if status == STEP_MISMATCH:
            raise StepMismatch(f"{function.__name__}: the sequences' tokens (host_request_types, host_context_lengths) "
                               f"do not add up to input_ids; the step is refused")
        if status != 0:
            raise ValueError(f"{function.__name__} refused its arguments (status {status}): a size, dtype or "
                             f"pointer is invalid")

    def feature_block(self, code: int) -> tuple[str, int] | None:
        """(name, draft tokens a node needs after it) of the compiled core's feature block ``code``
        (``accept_core.h`` FeatureBlock), None for an unknown code."""
        name = self._lib.autojudge_host_feature_block_name(int(code))
        return None if name is None else (name.decode(), self._lib.autojudge_host_feature_block_window(int(code)))

    def judge_nodes(self, target_logits, target_hidden, draft_tokens, paths, judge_weight, judge_bias: float,
                    setup: str, draft_hidden=None, greedy_child=None, draft_lens=None, min_run: int = 1
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Accept mode: the target argmax of every node and the judge logit of the nodes the rule scores
        (kernel 2 before its path walk, ``host_api.h`` ``autojudge_host_judge_nodes``).

        Parameters
        ----------
        target_logits : array
            Shape: ``[B * (N + 1), V]`` (float32, float16, or bfloat16 bits as uint16); node n of
            sequence b at row ``b * (N + 1) + n``.
        target_hidden : array
            Shape: ``[B * (N + 1), Ht]``, element type as ``draft_hidden``.
        draft_tokens : array
            Shape: ``[B, N]`` int, token of node n at column n - 1.
        paths : array
            Shape: ``[B, P, D + 1]`` int, root-to-leaf node indices, -1 padded.
        judge_weight : array
            Shape: ``[F]`` float32: the folded weights of ``setup``'s blocks, in its order.
        judge_bias : float
        setup : str
            The judge's blocks, '-'-joined (:data:`trtllm_autojudge.spec.judge_blocks.BLOCK_CODES`).
        draft_hidden : array, optional
            Shape: ``[B * (N + 1), Hd]``; given when a block reads the draft (DD, DD1).
        greedy_child : array, optional
            Shape: ``[B, N + 1]`` int, the rank-0 child of each node (-1 none); given when a block
            looks ahead (DT1, DT2, DD1, LS).
        draft_lens : array, optional
            Shape: ``[B]`` int; nodes 1..draft_lens[b] may be accepted (default N).
        min_run : int
            The judge's minimum run (1: none): a mismatching node whose exact run (``accept_core.h``)
            is shorter is not scored.

        Returns
        -------
        (target_argmax, judge_logit)
            Shapes ``[B, N + 1]`` int32 (first maximum; NaN ranks above numbers) and ``[B, N + 1]``
            float32: the judge logit (accumulated in float32) of each node that mismatches its parent
            on a path row within ``draft_lens``, whose exact run reaches ``min_run``, and that has the
            draft tokens its blocks need after it; +inf at every other node.
        """
        judge = _judge(target_logits, target_hidden, judge_weight, judge_bias, setup, draft_hidden)
        draft_tokens = _int32(draft_tokens, "draft_tokens", 2)
        B, N = draft_tokens.shape
        paths = _int32(paths, "paths", 3)
        if judge.rows != B * (N + 1) or paths.shape[0] != B or paths.shape[2] < 1:
            raise ValueError(f"with draft_tokens [B, N] = {draft_tokens.shape}, target_logits must have B * (N + 1) "
                             f"rows and paths be [B, P, D+1]; got {judge.rows} rows and paths {paths.shape}")
        draft_lens = np.full(B, N, np.int32) if draft_lens is None else _int32(draft_lens, "draft_lens", 1)
        if draft_lens.shape != (B,):
            raise ValueError(f"draft_lens must be [B] = [{B}], got {draft_lens.shape}")
        greedy_child = _greedy_child(greedy_child, setup, B, N)
        argmax, judge_logit = np.empty((B, N + 1), np.int32), np.empty((B, N + 1), np.float32)
        self._call(self._lib.autojudge_host_judge_nodes, B, N, *judge.arguments,
                   _ptr(draft_tokens), paths.shape[1], paths.shape[2], _ptr(paths), _ptr(draft_lens),
                   _ptr(greedy_child), _min_run(min_run), _ptr(argmax), _ptr(judge_logit))
        return argmax, judge_logit

    def judge_rows(self, target_logits, target_hidden, input_ids, last_token_ids, request_types, host_context_lengths,
                   judge_weight, judge_bias: float, setup: str, draft_hidden=None, min_run: int = 1
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Logits mode: the target argmax of every gathered row and the judge logit of the draft rows
        the rule scores (``host_api.h`` ``autojudge_host_judge_rows``).

        Parameters
        ----------
        target_logits, input_ids, last_token_ids, request_types, host_context_lengths : array
            As :meth:`rewrite_logits` (``target_logits`` ``[L, V]``).
        target_hidden : array
            Shape: ``[L, Ht]``: the LM head's input rows.
        judge_weight, judge_bias, setup, draft_hidden, min_run
            As :meth:`judge_nodes` (``draft_hidden``: ``[L, Hd]``).

        Returns
        -------
        (target_argmax, judge_logit)
            Shapes ``[L]`` int32 and ``[L]`` float32: the judge logit of each draft row of a segmented
            sequence whose token mismatches the argmax of the row before it, whose exact run (through
            the sequence's next draft rows) reaches ``min_run``, and that has the draft rows its blocks
            need after it (the sequence's next ones); +inf at every other row.

        Raises
        ------
        StepMismatch
            When the sequences' tokens do not add up to ``input_ids``.
        """
        judge = _judge(target_logits, target_hidden, judge_weight, judge_bias, setup, draft_hidden)
        L = judge.rows
        last_token_ids = _int32(last_token_ids, "last_token_ids", 1)
        if last_token_ids.shape != (L,):
            raise ValueError(f"last_token_ids must be [L] = [{L}], got {last_token_ids.shape}")
        input_ids = _int32(input_ids, "input_ids", 1)
        request_types, host_context_lengths = _sequences(request_types, host_context_lengths)
        argmax, judge_logit = np.empty(L, np.int32), np.empty(L, np.float32)
        self._call(self._lib.autojudge_host_judge_rows, L, *judge.arguments,
                   input_ids.size, _ptr(input_ids), _ptr(last_token_ids), request_types.size, _ptr(request_types),
                   _ptr(host_context_lengths), _min_run(min_run), _ptr(argmax), _ptr(judge_logit))
        return argmax, judge_logit

    def accept_tree(self, draft_tokens, target_argmax, paths, judge_logit=None, threshold=None, draft_lens=None,
                    min_run: int = 1) -> Acceptance:
        """Accept mode given each node's target argmax and judge logit (``None``: lossless).

        Parameters
        ----------
        draft_tokens : array
            Shape: ``[B, N]`` int, token of node n at column n - 1.
        target_argmax : array
            Shape: ``[B, N + 1]`` int.
        paths : array
            Shape: ``[B, P, D + 1]`` int, root-to-leaf node indices, -1 padded.
        judge_logit : array, optional
            Shape: ``[B, N + 1]`` float32.
        threshold : array or float, optional
            Shape: ``[B]`` (or a scalar), in [0, 1]; required with ``judge_logit``.
        draft_lens : array, optional
            Shape: ``[B]`` int; nodes 1..draft_lens[b] may be accepted (default N).
        min_run : int
            The judge's minimum run (1: none): a mismatching node whose exact run (``accept_core.h``)
            is shorter is never judged, whatever its judge logit.
        """
        draft_tokens = _int32(draft_tokens, "draft_tokens", 2)
        B, N = draft_tokens.shape
        target_argmax = _int32(target_argmax, "target_argmax", 2)
        paths = _int32(paths, "paths", 3)
        if target_argmax.shape != (B, N + 1) or paths.shape[0] != B or paths.shape[2] < 1:
            raise ValueError(f"with draft_tokens [B, N] = {draft_tokens.shape}, target_argmax must be [B, N+1] and "
                             f"paths [B, P, D+1]; got {target_argmax.shape} and {paths.shape}")
        draft_lens = np.full(B, N, np.int32) if draft_lens is None else _int32(draft_lens, "draft_lens", 1)
        if draft_lens.shape != (B,):
            raise ValueError(f"draft_lens must be [B] = [{B}], got {draft_lens.shape}")
        if judge_logit is not None:
            judge_logit = np.ascontiguousarray(judge_logit, dtype=np.float32)
            if judge_logit.shape != (B, N + 1):
                raise ValueError(f"judge_logit must be [B, N+1] = [{B}, {N + 1}], got {judge_logit.shape}")
            if threshold is None:
                raise ValueError("judge_logit needs a threshold ([B] or a scalar in [0, 1])")
            threshold = np.ascontiguousarray(np.broadcast_to(np.asarray(threshold, np.float32), (B,)))
        D1 = paths.shape[2]
        out = Acceptance(np.empty(B, np.int32), np.empty(B, np.int32), np.empty((B, D1), np.int32),
                         np.empty(B, np.int32))
        self._call(self._lib.autojudge_host_accept_tree, B, N, paths.shape[1], D1, _ptr(draft_tokens),
                   _ptr(target_argmax), _ptr(paths), _ptr(judge_logit), _ptr(threshold), _ptr(draft_lens),
                   _min_run(min_run), _ptr(out.accepted_tokens), _ptr(out.accepted_len), _ptr(out.best_path),
                   _ptr(out.judged_count))
        return out

    def segment_step(self, last_token_ids, num_tokens: int, request_types, host_context_lengths
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Logits mode: each sequence's first row and draft count (-1: refused), as
        :func:`trtllm_autojudge.spec.packed_step.segment_step`.

        Parameters
        ----------
        last_token_ids : array
            Shape: ``[L]`` int, 1-based positions in the step's ``input_ids``.
        num_tokens : int
            T, the length of ``input_ids``.
        request_types, host_context_lengths : array
            Shape: ``[S]`` int each (the engine's host inputs).

        Raises
        ------
        StepMismatch
            When the sequences' tokens do not add up to ``num_tokens``.
        """
        last_token_ids = _int32(last_token_ids, "last_token_ids", 1)
        request_types, host_context_lengths = _sequences(request_types, host_context_lengths)
        S = request_types.size
        first_row, num_drafts = np.empty(S, np.int32), np.empty(S, np.int32)
        self._call(self._lib.autojudge_host_segment_step, last_token_ids.size, _ptr(last_token_ids), int(num_tokens), S,
                   _ptr(request_types), _ptr(host_context_lengths), _ptr(first_row), _ptr(num_drafts))
        return first_row, num_drafts

    def rewrite_logits(self, target_logits, target_argmax, judge_logit, input_ids, last_token_ids, request_types,
                       host_context_lengths, threshold: float, min_run: int = 1) -> np.ndarray:
        """Logits mode: the target logits with judge-accepted draft tokens made the row's argmax.

        Parameters
        ----------
        target_logits : array
            Shape: ``[L, V]`` (float32, float16, or bfloat16 bits as uint16).
        target_argmax, judge_logit : array
            Shape: ``[L]`` each (from :meth:`judge_rows`).
        input_ids : array
            Shape: ``[T]`` int, the step's packed input ids.
        last_token_ids : array
            Shape: ``[L]`` int, ascending 1-based position in ``input_ids`` of each row's token.
        request_types, host_context_lengths : array
            Shape: ``[S]`` int each: the step's ``host_request_types`` and ``host_context_lengths``.
        threshold : float
            In [0, 1].
        min_run : int
            The judge's minimum run (1: none): a mismatching node whose exact run (``accept_core.h``)
            is shorter is never rewritten.

        Returns
        -------
        array
            Shape: ``[L, V]``, ``target_logits``' dtype.

        Raises
        ------
        StepMismatch
            When the sequences' tokens do not add up to ``input_ids``.
        """
        logits, code = _elements(target_logits, "target_logits")
        if logits.ndim != 2 or logits.shape[1] < 1:
            raise ValueError(f"target_logits must be [L, V] with V >= 1, got {logits.shape}")
        L = logits.shape[0]
        target_argmax = _int32(target_argmax, "target_argmax", 1)
        last_token_ids = _int32(last_token_ids, "last_token_ids", 1)
        judge_logit = np.ascontiguousarray(judge_logit, dtype=np.float32)
        if target_argmax.shape != (L,) or judge_logit.shape != (L,) or last_token_ids.shape != (L,):
            raise ValueError(f"target_argmax, judge_logit and last_token_ids must be [L] = [{L}], got "
                             f"{target_argmax.shape}, {judge_logit.shape}, {last_token_ids.shape}")
        input_ids = _int32(input_ids, "input_ids", 1)
        request_types, host_context_lengths = _sequences(request_types, host_context_lengths)
        out = np.empty_like(logits)
        self._call(self._lib.autojudge_host_rewrite_logits, L, logits.shape[1], code, _ptr(logits),
                   _ptr(target_argmax), _ptr(judge_logit), input_ids.size, _ptr(input_ids), _ptr(last_token_ids),
                   request_types.size, _ptr(request_types), _ptr(host_context_lengths), float(threshold),
                   _min_run(min_run), _ptr(out))
        return out


    def _tree_step(self, draft_tokens, draft_lens, paths) -> tuple:
        """The tree step's request arguments, checked: (B, N, draft_tokens [B, N], draft_lens [B], paths
        [B, P, D+1], the C arguments batch_size .. paths)."""
        draft_tokens = _int32(draft_tokens, "draft_tokens", 2)
        B, N = draft_tokens.shape
        draft_lens = _int32(draft_lens, "draft_lens", 1)
        paths = _int32(paths, "paths", 3)
        if draft_lens.shape != (B,) or paths.shape[0] != B or paths.shape[2] < 1:
            raise ValueError(f"with draft_tokens [B, N] = {draft_tokens.shape}, draft_lens must be [B] and paths "
                             f"[B, P, D+1]; got {draft_lens.shape} and {paths.shape}")
        arrays = (draft_tokens, draft_lens, paths)  # the caller keeps them alive while the C call runs
        return arrays, (B, N, _ptr(draft_tokens), _ptr(draft_lens), paths.shape[1], paths.shape[2], _ptr(paths))

    def segment_tree_step(self, num_rows: int, draft_tokens, draft_lens, paths) -> tuple[np.ndarray, np.ndarray]:
        """Tree logits mode: each request's first row ``[B]`` and whether it is refused ``[B]`` (bool), as
        :func:`trtllm_autojudge.spec.tree_step.tree_step_rows` and :func:`~trtllm_autojudge.spec.tree_step.request_refused`.

        Parameters
        ----------
        num_rows : int
            L, the step's logits rows.
        draft_tokens, draft_lens, paths : array
            Shapes ``[B, N]``, ``[B]``, ``[B, P, D + 1]`` int: the EAGLE engine's ``draft_tokens``,
            ``draft_lens``, ``draft_paths``.

        Raises
        ------
        TreeStepMismatch
            When a draft length lies outside [0, N] or the rows do not add up to ``num_rows``.
        """
        arrays, tree = self._tree_step(draft_tokens, draft_lens, paths)
        B = tree[0]
        first_row, refused = np.empty(B, np.int32), np.empty(B, np.int32)
        self._call(self._lib.autojudge_host_segment_tree_step, int(num_rows), *tree, _ptr(first_row), _ptr(refused))
        return first_row, refused.astype(bool)

    def judge_tree_rows(self, target_logits, target_hidden, draft_tokens, draft_lens, paths, judge_weight,
                        judge_bias: float, setup: str, greedy_child=None, min_run: int = 1
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Tree logits mode: the target argmax of every row and the judge logit of the nodes the rule scores.

        Parameters
        ----------
        target_logits : array
            Shape: ``[L, V]`` (float32, float16, or bfloat16 bits as uint16); request b's rows follow the
            rows of the requests before it: its root, then node n at its row n.
        target_hidden : array
            Shape: ``[L, Ht]``: the LM head's input rows.
        draft_tokens, draft_lens, paths : array
            As :meth:`segment_tree_step`.
        judge_weight, judge_bias, setup
            As :meth:`judge_nodes`; no block may read the draft.
        greedy_child : array, optional
            Shape: ``[B, N + 1]`` int; given when a block looks ahead.
        min_run : int
            The judge's minimum run (1: none): a mismatching node whose exact run (``accept_core.h``)
            is shorter is not scored.

        Returns
        -------
        (target_argmax, judge_logit)
            Shapes ``[L]`` int32 and ``[L]`` float32: the judge logit of each node of a request that is
            not refused that mismatches its parent on a path row, whose exact run reaches ``min_run``,
            and that has the draft tokens its blocks need after it; +inf at every other row.
        """
        if reads_draft(setup):
            raise ValueError(f"setup {setup} reads the draft's hidden states, which an EAGLE engine step does not have: "
                             f"tree logits mode runs target-only judges")
        judge = _judge(target_logits, target_hidden, judge_weight, judge_bias, setup, None)
        arrays, tree = self._tree_step(draft_tokens, draft_lens, paths)
        B, N = tree[0], tree[1]
        greedy_child = _greedy_child(greedy_child, setup, B, N)
        L = judge.rows
        argmax, judge_logit = np.empty(L, np.int32), np.empty(L, np.float32)
        self._call(self._lib.autojudge_host_judge_tree_rows, L, *judge.arguments, *tree, _ptr(greedy_child),
                   _min_run(min_run), _ptr(argmax), _ptr(judge_logit))
        return argmax, judge_logit

    def rewrite_tree_logits(self, target_logits, target_argmax, judge_logit, draft_tokens, draft_lens, paths,
                            threshold, min_run: int = 1) -> np.ndarray:
        """Tree logits mode: the logits with every judged node of each request's best accepted path made
        its parent row's strict argmax (:func:`trtllm_autojudge.spec.tree_step.rewrite_tree_logits`).

        Parameters
        ----------
        target_logits : array
            Shape: ``[L, V]`` (float32, float16, or bfloat16 bits as uint16).
        target_argmax, judge_logit : array
            Shape: ``[L]`` each (from :meth:`judge_tree_rows`).
        draft_tokens, draft_lens, paths : array
            As :meth:`segment_tree_step`.
        threshold : array or float
            Shape: ``[B]`` (or a scalar), in [0, 1].
        min_run : int
            The judge's minimum run (1: none): a mismatching node whose exact run (``accept_core.h``)
            is shorter is never judged.

        Returns
        -------
        array
            Shape: ``[L, V]``, ``target_logits``' dtype.
        """
        logits, code = _elements(target_logits, "target_logits")
        if logits.ndim != 2 or logits.shape[1] < 1:
            raise ValueError(f"target_logits must be [L, V] with V >= 1, got {logits.shape}")
        L = logits.shape[0]
        target_argmax = _int32(target_argmax, "target_argmax", 1)
        judge_logit = np.ascontiguousarray(judge_logit, dtype=np.float32)
        if target_argmax.shape != (L,) or judge_logit.shape != (L,):
            raise ValueError(f"target_argmax and judge_logit must be [L] = [{L}], got {target_argmax.shape} and "
                             f"{judge_logit.shape}")
        arrays, tree = self._tree_step(draft_tokens, draft_lens, paths)
        threshold = np.ascontiguousarray(np.broadcast_to(np.asarray(threshold, np.float32), (tree[0],)))
        out = np.empty_like(logits)
        self._call(self._lib.autojudge_host_rewrite_tree_logits, L, logits.shape[1], code, _ptr(logits),
                   _ptr(target_argmax), _ptr(judge_logit), *tree, _ptr(threshold), _min_run(min_run), _ptr(out))
        return out


def host_library_path() -> Path:
    """``$AUTOJUDGE_HOST_LIBRARY``, else the library of ``build/plugins`` (built on first use)."""
    chosen = os.environ.get(ENV_VAR)
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{ENV_VAR}={chosen} does not exist: build it with `trtllm-autojudge build-plugin`")
        return path
    return ensure_built(host_only=not cuda_toolchain_available()).host_library


@functools.lru_cache(maxsize=None)
def host_core() -> HostCore:
    """The process-wide host core (building the library on first use, see :func:`host_library_path`)."""
    return HostCore(host_library_path())


__all__ = ["HostCore", "host_core", "host_library_path"]
