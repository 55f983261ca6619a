"""Tensor names of the Triton AutoJudge models and the conversions between them and the loop's types.

Shared by the config generator (:mod:`.triton_config`) and the Python-backend models that run in
Triton (``triton_models/``), so a name cannot differ between a config and its model.
"""
from __future__ import annotations

import numpy as np

from ...spec.acceptance import Acceptance
from ..engine.routes import route_setups
from ..runner.packing import PackedCycle, chain_tree, pack_cycle

# autojudge_target: one verification cycle in, the plugin's outputs back (no batch dimension).
CYCLE_TENSORS = {  # name -> (Triton data type, dims)
    "input_ids": ("TYPE_INT32", [-1]),  # [T]
    "position_ids": ("TYPE_INT32", [-1]),  # [T]
    "context_lengths": ("TYPE_INT32", [-1]),  # [R]
    "row_request": ("TYPE_INT32", [-1]),  # [R]
    "node_rows": ("TYPE_INT32", [-1]),  # [B*(N+1)]
    "draft_tokens": ("TYPE_INT32", [-1, -1]),  # [B, N]
    "draft_lens": ("TYPE_INT32", [-1]),  # [B]
    "paths": ("TYPE_INT32", [-1, -1, -1]),  # [B, P, D+1]
    "threshold": ("TYPE_FP32", [-1]),  # [B]
    "greedy_child": ("TYPE_INT32", [-1, -1]),  # [B, N+1]: only for a lookahead judge (blocks DT1, DT2, LS)
}
OPTIONAL_CYCLE_TENSORS = ("greedy_child",)  # absent from a cycle whose judge does not read them
ACCEPTANCE_TENSORS = {
    "accepted_tokens": ("TYPE_INT32", [-1, -1]),  # [B, D+1]
    "accepted_lens": ("TYPE_INT32", [-1]),  # [B]
    "best_path": ("TYPE_INT32", [-1]),  # [B]
    "judged_count": ("TYPE_INT32", [-1]),  # [B]
}
_NUMPY = {"TYPE_INT32": np.int32, "TYPE_FP32": np.float32}
# The CPU route's stand-ins (:mod:`.stand_ins`) keep a KV cache per request, keyed by the request id the
# BLS gives its requests; a request with this input true frees that cache and computes nothing. On the
# draft it is the tensorrtllm backend's own name for ending a request.
STOP_TENSOR = ("stop", "TYPE_BOOL")


def cycle_to_tensors(cycle: PackedCycle) -> dict[str, np.ndarray]:
    if cycle.draft_hidden is not None:
        raise ValueError(f"the Triton target model runs {route_setups('triton-context')}: the stock draft model gives "
                         f"no hidden states")
    return {name: np.ascontiguousarray(getattr(cycle, name), _NUMPY[kind]) for name, (kind, _) in CYCLE_TENSORS.items()
            if getattr(cycle, name) is not None}


def tensors_to_cycle(tensors: dict[str, np.ndarray | None]) -> PackedCycle:
    """The cycle of an ``autojudge_target`` request's inputs (an optional one absent or None)."""
    missing = {n for n in CYCLE_TENSORS if tensors.get(n) is None} - set(OPTIONAL_CYCLE_TENSORS)
    if missing:
        raise ValueError(f"autojudge_target request lacks {sorted(missing)}")
    return PackedCycle(**{name: np.asarray(tensors[name], _NUMPY[kind]) for name, (kind, _) in CYCLE_TENSORS.items()
                          if tensors.get(name) is not None})


def acceptance_to_tensors(acc: Acceptance) -> dict[str, np.ndarray]:
    return {"accepted_tokens": acc.accepted_tokens.astype(np.int32), "accepted_lens": acc.accepted_len.astype(np.int32),
            "best_path": acc.best_path.astype(np.int32), "judged_count": acc.judged_count.astype(np.int32)}


def tensors_to_acceptance(tensors: dict[str, np.ndarray]) -> Acceptance:
    return Acceptance(accepted_len=np.asarray(tensors["accepted_lens"], np.int32),
                      best_path=np.asarray(tensors["best_path"], np.int32),
                      accepted_tokens=np.asarray(tensors["accepted_tokens"], np.int32),
                      judged_count=np.asarray(tensors["judged_count"], np.int32))


def stop_cycle_tensors(greedy_child: bool) -> dict[str, np.ndarray]:
    """The inputs of an ``autojudge_target`` request that only stops its request: a one-token cycle
    with no draft node (every required input, shaped as a cycle's), and ``stop`` true."""
    cycle = pack_cycle([[0]], chain_tree(1), np.zeros((1, 1), np.int64), np.zeros(1, np.int32), np.zeros(1),
                       greedy_child=greedy_child)
    return {**cycle_to_tensors(cycle), STOP_TENSOR[0]: np.array([True])}
