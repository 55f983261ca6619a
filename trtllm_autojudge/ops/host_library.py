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

import numpy as np

from ..spec.acceptance import Acceptance
from ..spec.packed_step import StepMismatch
from .build import cuda_toolchain_available, ensure_built

ABI_VERSION = 2  # AUTOJUDGE_HOST_ABI_VERSION in plugins/include/autojudge/host_api.h
ENV_VAR = "AUTOJUDGE_HOST_LIBRARY"
# dtype code of the C ABI per array dtype; uint16 carries bfloat16 bits.
DTYPE_CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint16): 2}
FEATURE_SETUPS = {"DT": 0, "DD-DT": 1}
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
        lib.autojudge_host_score_rows.argtypes = [_i32, _i32, _i32, _vp, _i32, _vp, _i32, _vp, _i32, _i32, _vp, _f32,
                                                  _vp, _vp]
        lib.autojudge_host_accept_tree.argtypes = [_i32, _i32, _i32, _i32] + [_vp] * 10
        lib.autojudge_host_segment_step.argtypes = [_i32, _vp, _i32, _i32, _vp, _vp, _vp, _vp]
        lib.autojudge_host_rewrite_logits.argtypes = [_i32, _i32, _i32, _vp, _vp, _vp, _i32, _vp, _vp, _i32, _vp, _vp,
                                                      _f32, _vp]
        for f in (lib.autojudge_host_score_rows, lib.autojudge_host_accept_tree, lib.autojudge_host_segment_step,
                  lib.autojudge_host_rewrite_logits):
            f.restype = _i32
        self._lib = lib

    def _call(self, function, *args) -> None:
        status = function(*args)
        if status == STEP_MISMATCH:
            raise StepMismatch(f"{function.__name__}: the sequences' tokens (host_request_types, host_context_lengths) "
                               f"do not add up to input_ids; the step is refused")
        if status != 0:
            raise ValueError(f"{function.__name__} refused its arguments (status {status}): a size, dtype or "
                             f"pointer is invalid")

    def score_rows(self, target_logits, target_hidden, judge_weight, judge_bias: float, draft_hidden=None
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Target argmax and judge logit of every row.

        Parameters
        ----------
        target_logits : array
            Shape: ``[R, V]`` (float32, float16, or bfloat16 bits as uint16).
        target_hidden : array
            Shape: ``[R, Ht]``, element type as ``draft_hidden``.
        judge_weight : array
            Shape: ``[F]`` float32, F = Ht (DT) or Hd + Ht (DD-DT, draft block first).
        judge_bias : float
        draft_hidden : array, optional
            Shape: ``[R, Hd]``; given for the DD-DT feature setup.

        Returns
        -------
        (target_argmax, judge_logit)
            Shapes ``[R]`` int32 (first maximum; NaN ranks above numbers) and ``[R]`` float32
            (``judge_bias + judge_weight . features`` accumulated in float32).
        """
        logits, logits_code = _elements(target_logits, "target_logits")
        hidden, hidden_code = _elements(target_hidden, "target_hidden")
        if logits.ndim != 2 or hidden.ndim != 2 or hidden.shape[0] != logits.shape[0] or logits.shape[1] < 1:
            raise ValueError(f"target_logits must be [R, V] with V >= 1 and target_hidden [R, Ht], got "
                             f"{logits.shape} and {hidden.shape}")
        draft = None
        if draft_hidden is not None:
            draft, draft_code = _elements(draft_hidden, "draft_hidden")
            if draft_code != hidden_code or draft.ndim != 2 or draft.shape[0] != logits.shape[0]:
                raise ValueError(f"draft_hidden must be [R, Hd] of target_hidden's type ({hidden.dtype}), got "
                                 f"{draft.shape} {draft.dtype}")
        weight = np.ascontiguousarray(judge_weight, dtype=np.float32).reshape(-1)
        features = hidden.shape[1] + (0 if draft is None else draft.shape[1])
        if weight.size != features:
            raise ValueError(f"judge_weight has {weight.size} values, the hidden states give {features} features")
        rows = logits.shape[0]
        argmax = np.empty(rows, np.int32)
        judge_logit = np.empty(rows, np.float32)
        setup = FEATURE_SETUPS["DT" if draft is None else "DD-DT"]
        self._call(self._lib.autojudge_host_score_rows, rows, logits.shape[1], logits_code, _ptr(logits), hidden_code,
                   _ptr(hidden), hidden.shape[1], _ptr(draft), 0 if draft is None else draft.shape[1], setup,
                   _ptr(weight), float(judge_bias), _ptr(argmax), _ptr(judge_logit))
        return argmax, judge_logit

    def accept_tree(self, draft_tokens, target_argmax, paths, judge_logit=None, threshold=None, draft_lens=None
                    ) -> Acceptance:
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
                   _ptr(out.accepted_tokens), _ptr(out.accepted_len), _ptr(out.best_path), _ptr(out.judged_count))
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
                       host_context_lengths, threshold: float) -> np.ndarray:
        """Logits mode: the target logits with judge-accepted draft tokens made the row's argmax.

        Parameters
        ----------
        target_logits : array
            Shape: ``[L, V]`` (float32, float16, or bfloat16 bits as uint16).
        target_argmax, judge_logit : array
            Shape: ``[L]`` each (from :meth:`score_rows`).
        input_ids : array
            Shape: ``[T]`` int, the step's packed input ids.
        last_token_ids : array
            Shape: ``[L]`` int, ascending 1-based position in ``input_ids`` of each row's token.
        request_types, host_context_lengths : array
            Shape: ``[S]`` int each: the step's ``host_request_types`` and ``host_context_lengths``.
        threshold : float
            In [0, 1].

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
                   request_types.size, _ptr(request_types), _ptr(host_context_lengths), float(threshold), _ptr(out))
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
