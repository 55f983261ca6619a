"""One step of TensorRT-LLM 1.2's EAGLE engine as data: its inputs and outputs (the names and shapes of
``EagleForCausalLM.prepare_inputs`` and ``_eagle_fwd_helper``'s ``mark_output``), and what the runtime
computes between steps (``runtime/eagleBuffers.cpp`` ``setFromInputs``, ``layers/eagleDecodingLayer.cpp``).

Between steps the runtime feeds the engine's own draft back: ``draft_tokens``, ``draft_lens``,
``draft_paths`` are the last step's ``next_draft_*``; ``spec_decoding_generation_lengths``,
``spec_decoding_position_offsets`` and ``spec_decoding_packed_mask`` follow from the paths
(:func:`spec_decoding_inputs`, the rule of ``eagleDecodingKernels.cu`` ``getPackedMaskFromPath``);
``posterior_threshold`` is the request's ``EagleConfig.posterior_threshold`` (the AutoJudge threshold
on the EAGLE route, :mod:`trtllm_autojudge.trt.engine.eagle_spec`). A context request carries its
prompt, ``draft_lens = 0`` and draft tokens -1; a generation request its last accepted token, then its
draft tokens (``draft_lens + 1`` input ids and logits rows). ``B`` requests, context ones first,
``N = max_draft_len``, ``M = N + 1`` decoding tokens, ``D + 1 = num_eagle_layers + 1``.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from ...decoding.tree import DraftTree, node_parents
from ...spec.acceptance import PAD
from ...spec.packed_step import CONTEXT_REQUEST, GENERATION_REQUEST


class EagleInput(str, Enum):
    """The EAGLE engine inputs the step carries (tensor names of the 1.2 model)."""

    INPUT_IDS = "input_ids"  # [T] int32: context requests' prompts, then each generation request's root + drafts
    HOST_REQUEST_TYPES = "host_request_types"  # [B] int32: 0 context, 1 generation
    HOST_CONTEXT_LENGTHS = "host_context_lengths"  # [B] int32: a context request's prompt tokens
    DRAFT_TOKENS = "draft_tokens"  # [B, N] int32: node n's token at column n - 1, -1 for a context request
    DRAFT_LENS = "draft_lens"  # [B] int32: draft nodes, 0 for a context request
    DRAFT_PATHS = "draft_paths"  # [B, M, D+1] int32: root-to-leaf node indices, -1 padded
    SPEC_DECODING_GENERATION_LENGTHS = "spec_decoding_generation_lengths"  # [B_gen] int32: draft_lens + 1
    SPEC_DECODING_POSITION_OFFSETS = "spec_decoding_position_offsets"  # [B_gen, M] int32: depth of each node
    SPEC_DECODING_PACKED_MASK = "spec_decoding_packed_mask"  # [B_gen * M, ceil(M / 32)] int32: ancestors and self
    POSTERIOR_THRESHOLD = "posterior_threshold"  # [B] float32: per-request AutoJudge threshold


class EagleOutput(str, Enum):
    """The EAGLE engine outputs (``_eagle_fwd_helper`` marks them)."""

    ACCEPTED_TOKENS = "accepted_tokens"  # [B, D+1] int32: the target's tokens along the best path
    NUM_ACCEPTED_TOKENS = "num_accepted_tokens"  # [B] int32: >= 1, the correction / bonus token included
    ACCEPTED_PATHS = "accepted_paths"  # [B] int32: the best path's row in draft_paths
    NEXT_DRAFT_TOKENS = "next_draft_tokens"  # [B, N] int32
    NEXT_DRAFT_LENS = "next_draft_lens"  # [B] int32
    NEXT_DRAFT_PATHS = "next_draft_paths"  # [B, M, D+1] int32


@dataclass
class EagleStep:
    """Inputs of one engine step, by :class:`EagleInput` name, plus which request each row is."""

    request_ids: list[int]  # [B]: the runtime's request of each batch entry (the engine's KV cache slot)
    tensors: dict[str, np.ndarray]


@dataclass
class EagleStepOutputs:
    tensors: dict[str, np.ndarray]  # by EagleOutput name


def pad_paths(tree: DraftTree, max_draft_len: int, max_path_len: int) -> np.ndarray:
    """[N + 1, D + 1] int32: the tree's root-to-leaf rows, -1 padded to the engine's shapes."""
    if tree.num_nodes > max_draft_len or tree.max_depth + 1 > max_path_len:
        raise ValueError(f"a tree of {tree.num_nodes} nodes and depth {tree.max_depth} does not fit an engine with "
                         f"max_draft_len {max_draft_len} and num_eagle_layers {max_path_len - 1}")
    out = np.full((max_draft_len + 1, max_path_len), PAD, np.int32)
    rows = tree.paths
    out[: len(rows), : rows.shape[1]] = rows
    return out


def tree_from_paths(paths: np.ndarray, draft_len: int) -> DraftTree:
    """The tree of one request's path rows ``[M, D+1]`` over nodes 1..draft_len (ranks unknown: 0)."""
    parents = node_parents(np.asarray(paths)[None])[0].tolist()
    parents = (parents + [PAD] * (draft_len + 1))[: draft_len + 1]
    if any(p == PAD for p in parents[1:]):
        raise ValueError(f"draft_paths do not reach every one of the {draft_len} draft nodes")
    return DraftTree(tuple(parents), (0,) * (draft_len + 1))


def spec_decoding_inputs(paths: np.ndarray, draft_lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runtime's tree inputs of the generation requests from their paths ``[B_gen, M, D+1]``:
    generation lengths ``[B_gen]`` (draft_lens + 1), position offsets ``[B_gen, M]`` (each node's depth)
    and the packed mask ``[B_gen * M, ceil(M / 32)]`` (bit j % 32 of word j // 32 of node n's row: node j
    is n or an ancestor of n, the root included)."""
    paths = np.asarray(paths)
    B, M, _ = paths.shape
    W = (M + 31) // 32
    offsets = np.zeros((B, M), np.int32)
    mask = np.zeros((B, M, W), np.uint32)
    for b in range(B):
        tree = tree_from_paths(paths[b], int(draft_lens[b]))
        for n in range(tree.num_nodes + 1):
            offsets[b, n] = tree.depths[n]
            for j in np.flatnonzero(tree.ancestor_mask[n]):
                mask[b, n, j // 32] |= np.uint32(1) << np.uint32(j % 32)
    return (np.asarray(draft_lens, np.int32) + 1), offsets, mask.view(np.int32).reshape(B * M, W)


def context_step_entry(prompt: list[int], max_draft_len: int, max_path_len: int) -> dict:
    """A context request's tensors (its prompt; no draft; a root-only path row)."""
    paths = np.full((max_draft_len + 1, max_path_len), PAD, np.int32)
    paths[0, 0] = 0
    return {"input_ids": list(prompt), "type": CONTEXT_REQUEST, "context_length": len(prompt),
            "draft_tokens": np.full(max_draft_len, PAD, np.int32), "draft_len": 0, "paths": paths}


def generation_step_entry(root: int, draft_tokens: np.ndarray, draft_len: int, paths: np.ndarray) -> dict:
    """A generation request's tensors: its last accepted token and the draft the engine returned for it."""
    return {"input_ids": [int(root)] + [int(t) for t in draft_tokens[:draft_len]], "type": GENERATION_REQUEST,
            "context_length": 0, "draft_tokens": np.asarray(draft_tokens, np.int32), "draft_len": int(draft_len),
            "paths": np.asarray(paths, np.int32)}


def assemble_step(request_ids: list[int], entries: list[dict], thresholds: np.ndarray) -> EagleStep:
    """One step from per-request entries (context requests first, as the runtime orders them)."""
    order = sorted(range(len(entries)), key=lambda i: entries[i]["type"] != CONTEXT_REQUEST)
    entries, request_ids = [entries[i] for i in order], [request_ids[i] for i in order]
    thresholds = np.asarray(thresholds, np.float32)[order]
    gen = [e for e in entries if e["type"] == GENERATION_REQUEST]
    paths = np.stack([e["paths"] for e in entries])
    tensors = {
        EagleInput.INPUT_IDS.value: np.array([t for e in entries for t in e["input_ids"]], np.int32),
        EagleInput.HOST_REQUEST_TYPES.value: np.array([e["type"] for e in entries], np.int32),
        EagleInput.HOST_CONTEXT_LENGTHS.value: np.array([e["context_length"] for e in entries], np.int32),
        EagleInput.DRAFT_TOKENS.value: np.stack([e["draft_tokens"] for e in entries]),
        EagleInput.DRAFT_LENS.value: np.array([e["draft_len"] for e in entries], np.int32),
        EagleInput.DRAFT_PATHS.value: paths,
        EagleInput.POSTERIOR_THRESHOLD.value: thresholds,
    }
    if gen:
        lengths, offsets, mask = spec_decoding_inputs(np.stack([e["paths"] for e in gen]),
                                                      np.array([e["draft_len"] for e in gen]))
    else:
        M, W = paths.shape[1], (paths.shape[1] + 31) // 32
        lengths, offsets, mask = np.zeros(0, np.int32), np.zeros((0, M), np.int32), np.zeros((0, W), np.int32)
    tensors[EagleInput.SPEC_DECODING_GENERATION_LENGTHS.value] = lengths
    tensors[EagleInput.SPEC_DECODING_POSITION_OFFSETS.value] = offsets
    tensors[EagleInput.SPEC_DECODING_PACKED_MASK.value] = mask
    return EagleStep(request_ids, tensors)
