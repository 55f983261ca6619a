"""Inputs and outputs of the AutoJudge target engine (accept mode), and its config block.

The target engine is the TensorRT-LLM 1.2 Llama graph built with ``--kv_cache_type disabled``
(context phase only) plus the AutoJudgeAccept plugin after the LM head
(:mod:`.target_model_cls`). Each verification cycle sends every root-to-leaf path of every request
as one context row ``prefix + path tokens``; ``autojudge_node_rows`` says which packed token
position holds node n of request b as its LAST input token, so the engine gathers the final-norm
hidden state (the DT feature) and the logits of every node there. A lookahead judge (blocks DT1,
DT2, DD1, LS) also reads the rows of a node's greedy child and grandchild, which
``autojudge_greedy_child`` names (the tree's shape is not otherwise an input). Why context rows and not the KV
cache: the stock 1.2 runtimes refuse engine inputs they do not know (TRTLLM.md), and this keeps
the engine drivable by the plain ``tensorrt_llm.runtime.Session``.

The build script writes :func:`engine_block` into the target checkpoint's ``config.json`` under
``"autojudge"``; TensorRT-LLM keeps unknown config keys as attributes (``PretrainedConfig``), so
the model class reads it as ``config.autojudge`` and the engine's own ``config.json`` carries it
to the runner.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ..plugin.contract import OUTPUT_MODES, accept_input_names

BLOCK_KEY = "autojudge"
BLOCK_FORMAT = 1

# The engine inputs (B requests, N draft nodes, P paths, D+1 = max_path_len); node rows feed the
# gather, the others feed the plugin input of PLUGIN_INPUT_OF.
NODE_ROWS = "autojudge_node_rows"  # [B*(N+1)] int32: packed position of node n of request b as the last input token
DRAFT_TOKENS = "autojudge_draft_tokens"  # [B, N] int32: token of node n at column n-1
DRAFT_LENS = "autojudge_draft_lens"  # [B] int32: valid nodes per request
PATHS = "autojudge_paths"  # [B, P, D+1] int32: root-to-leaf node indices, -1 padded
THRESHOLD = "autojudge_threshold"  # [B] float32: per-request threshold
DRAFT_HIDDEN = "autojudge_draft_hidden"  # [B*(N+1), Hd] model dtype: blocks DD, DD1 only
GREEDY_CHILD = "autojudge_greedy_child"  # [B, N+1] int32: rank-0 child of each node, -1 none; lookahead blocks only
ENGINE_INPUTS = (NODE_ROWS, DRAFT_TOKENS, DRAFT_LENS, PATHS, THRESHOLD, DRAFT_HIDDEN, GREEDY_CHILD)
# Plugin input (contract.ACCEPT_INPUTS) -> the engine input that feeds it; the other two, the logits
# and hidden states, are the rows the engine gathers at NODE_ROWS.
PLUGIN_INPUT_OF = {"draft_tokens": DRAFT_TOKENS, "draft_lens": DRAFT_LENS, "paths": PATHS, "threshold": THRESHOLD,
                   "draft_hidden": DRAFT_HIDDEN, "greedy_child": GREEDY_CHILD}
ENGINE_OUTPUTS = ("accepted_tokens", "accepted_lens", "best_path", "judged_count")


@dataclass(frozen=True)
class EngineBlock:
    """What the target engine is built for (the ``"autojudge"`` block of its config.json)."""

    judge_file: str  # absolute path of the judge safetensors file
    plugin_library: str  # absolute path of libautojudge_trt_plugin.so
    max_requests: int  # B: sequences per verification cycle
    max_draft_nodes: int  # N: draft nodes per sequence
    max_paths: int  # P: root-to-leaf paths per sequence
    max_path_len: int  # D+1
    output_mode: str = "accept"
    format: int = BLOCK_FORMAT

    def __post_init__(self):
        if self.format != BLOCK_FORMAT:
            raise ValueError(f"autojudge config block format {self.format}; this version reads {BLOCK_FORMAT}: rebuild the engine")
        if self.output_mode not in OUTPUT_MODES:
            raise ValueError(f"autojudge output_mode {self.output_mode!r} is not one of {sorted(OUTPUT_MODES)}")
        for name in ("max_requests", "max_draft_nodes", "max_paths"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"autojudge {name} must be >= 1, got {getattr(self, name)}")
        if not 2 <= self.max_path_len <= self.max_draft_nodes + 1:
            raise ValueError(f"autojudge max_path_len (D+1) must lie in 2..max_draft_nodes+1 = {self.max_draft_nodes + 1}, "
                             f"got {self.max_path_len}")

    @property
    def max_rows(self) -> int:
        """Context rows per cycle: one per path per request (the engine's --max_batch_size)."""
        return self.max_requests * self.max_paths

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, block: dict | None) -> "EngineBlock":
        """Read the block itself (``config.autojudge`` inside the model class)."""
        return read_block(cls, block, BLOCK_KEY, "trtllm-autojudge build-engines")

    @classmethod
    def from_engine_config(cls, config: dict) -> "EngineBlock":
        """Read the block from an engine's config.json (it lives under ``pretrained_config``)."""
        block = config.get("pretrained_config", {}).get(BLOCK_KEY)
        if block is None:
            raise ValueError(f"engine config has no pretrained_config.{BLOCK_KEY}: it is not an AutoJudge target engine")
        return cls.from_dict(block)


def read_block(cls, block, key: str, convert: str):
    """``cls(**block)`` for the dataclass of a checkpoint config block named ``key``; the errors say
    which command writes the block (``convert``) or which keys are known."""
    if block is None:
        raise ValueError(f"the checkpoint config has no {key!r} block: convert the target with "
                         f"`{convert}` (it writes the block) before trtllm-build")
    known = set(cls.__dataclass_fields__)
    unknown = set(block) - known
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} in the {key!r} block; known: {sorted(known)}")
    return cls(**block)


def engine_block(judge_file: str | Path, plugin_library: str | Path, *, max_requests: int, max_draft_nodes: int,
                 max_paths: int, max_path_len: int) -> EngineBlock:
    return EngineBlock(str(Path(judge_file).resolve()), str(Path(plugin_library).resolve()), int(max_requests),
                       int(max_draft_nodes), int(max_paths), int(max_path_len))


@dataclass(frozen=True)
class InputSpec:
    """One engine input: ``shape`` uses -1 for dynamic dimensions; ``dims`` names each dimension
    with its ``[min, opt, max]`` (TensorRT-LLM's ``dim_range`` for one optimization profile)."""

    name: str
    dtype: str  # "int32", "float32", or "model" (the model's dtype)
    shape: tuple[int, ...]
    dims: tuple[tuple[str, tuple[int, int, int]], ...]


def _range(hi: int) -> tuple[int, int, int]:
    return (1, max(1, (hi + 1) // 2), hi)


def accept_engine_inputs(block: EngineBlock, fields: Mapping[str, np.ndarray]) -> list[InputSpec]:
    """The AutoJudge inputs the target engine adds to the base model's, for the plugin these fields
    configure (:func:`..plugin.fields.engine_plugin_fields`): the five every judge reads, then
    ``autojudge_draft_hidden`` when a block reads the draft and ``autojudge_greedy_child`` when one
    looks ahead (:func:`..plugin.contract.accept_input_names`)."""
    B, N, P, D1 = block.max_requests, block.max_draft_nodes, block.max_paths, block.max_path_len
    Hd = int(fields["draft_hidden"][0])
    batch = ("autojudge_batch", _range(B))
    node_rows = ("autojudge_node_rows", _range(B * (N + 1)))
    specs = {
        NODE_ROWS: InputSpec(NODE_ROWS, "int32", (-1,), (node_rows,)),
        DRAFT_TOKENS: InputSpec(DRAFT_TOKENS, "int32", (-1, -1), (batch, ("autojudge_nodes", _range(N)))),
        DRAFT_LENS: InputSpec(DRAFT_LENS, "int32", (-1,), (batch,)),
        PATHS: InputSpec(PATHS, "int32", (-1, -1, D1), (batch, ("autojudge_paths", _range(P)),
                                                        ("autojudge_path_len", (D1, D1, D1)))),
        THRESHOLD: InputSpec(THRESHOLD, "float32", (-1,), (batch,)),
        DRAFT_HIDDEN: InputSpec(DRAFT_HIDDEN, "model", (-1, Hd), (node_rows, ("autojudge_draft_hidden", (Hd,) * 3))),
        GREEDY_CHILD: InputSpec(GREEDY_CHILD, "int32", (-1, -1), (batch, ("autojudge_nodes_and_root", _range(N + 1)))),
    }
    return [specs[name] for name in engine_input_names(fields)]


def engine_input_names(fields: Mapping[str, np.ndarray]) -> tuple[str, ...]:
    """The AutoJudge engine inputs of the plugin these fields configure, in :data:`ENGINE_INPUTS` order."""
    return (NODE_ROWS,) + tuple(PLUGIN_INPUT_OF[name] for name in accept_input_names(fields["feature_blocks"])
                                if name in PLUGIN_INPUT_OF)
