"""The EAGLE route: TensorRT-LLM 1.2's EAGLE engine (``EagleForCausalLM``) with AutoJudgeAccept in tree
logits mode before its stock accept step, and the config block that says how it is built.

Pure Python (nothing here imports TensorRT-LLM): the model class (:mod:`.eagle_model_cls`), the
conversion (:mod:`.eagle_convert`), ``build-engines --route eagle``, the runner and the Triton
repository read these values and checks; the tests check them here.

The engine (``EagleForCausalLM._eagle_fwd_helper``, overridden by :mod:`.eagle_model_cls`): the base
model's ``lm_logits`` and the LM head's input rows of every request (a context request's last row, each
generation request's root and draft nodes), ``draft_tokens``, ``draft_lens``, ``draft_paths`` and the
threshold go to the plugin (:data:`.contract.TREE_LOGITS_INPUTS`, :mod:`trtllm_autojudge.spec.tree_step`);
its rewritten logits (padded vocabulary columns appended back) go to the stock
``EagleSampleAndAcceptDraftTokens``; ``accepted_paths``, the runtime's KV rewind and the EagleNets'
redrafting stay stock.

The threshold: per request, the request's ``EagleConfig(posterior_threshold=t)``, which the 1.2
runtime hands the engine as ``posterior_threshold [B]`` (``eagleBuffers.cpp`` ``setPosteriorThresholds``;
with greedy sampling the stock accept step does not read it), or, with ``threshold_source = "engine"``,
the build's one threshold (for servers that set no per-request EagleConfig, such as Triton's
``tensorrtllm`` backend, whose requests would carry the runtime's default 0.09).

Judges: target-only (no draft model); a lookahead judge on a static tree only, whose greedy children
are a build-time constant of the engine (``eagle_choices``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...decoding.dynamic_tree import DynamicTree
from ...decoding.tree import DraftTree
from ...judge.head import JudgeHead
from ..plugin.contract import tree_logits_input_names
from ..plugin.fields import engine_plugin_fields
from .io_spec import read_block
from .routes import check_route_judge

EAGLE_BLOCK_KEY = "autojudge_eagle"
EAGLE_BLOCK_FORMAT = 1
THRESHOLD_SOURCES = ("request", "engine")


@dataclass(frozen=True)
class EagleBlock:
    """What the EAGLE-route target is built for (the ``"autojudge_eagle"`` block of its config.json)."""

    judge_file: str  # absolute path of the judge safetensors file (a target-only setup)
    plugin_library: str  # absolute path of libautojudge_trt_plugin.so
    max_draft_len: int  # N: the engine's draft-token budget per request
    num_eagle_layers: int  # D: EagleNets, the deepest level of a tree
    max_non_leaves_per_layer: int  # nodes with children per level (EAGLE-2: >= dynamic_tree_top_k)
    threshold: float  # the build's threshold: with threshold_source "engine", and the runner's default
    threshold_source: str = "request"  # THRESHOLD_SOURCES
    eagle_choices: tuple[tuple[int, ...], ...] | None = None  # a static tree (EAGLE-1), or None
    dynamic_tree_top_k: int | None = None  # EAGLE-2: K, with eagle_choices None
    format: int = EAGLE_BLOCK_FORMAT

    def __post_init__(self):
        if self.format != EAGLE_BLOCK_FORMAT:
            raise ValueError(f"{EAGLE_BLOCK_KEY} block format {self.format}; this version reads {EAGLE_BLOCK_FORMAT}: "
                             f"rebuild the engine")
        if self.threshold_source not in THRESHOLD_SOURCES:
            raise ValueError(f"{EAGLE_BLOCK_KEY} threshold_source {self.threshold_source!r} is not one of "
                             f"{THRESHOLD_SOURCES}")
        if not 0.0 <= float(self.threshold) < 1.0:
            raise ValueError(f"{EAGLE_BLOCK_KEY} threshold must lie in [0, 1) (TensorRT-LLM's EagleConfig refuses "
                             f"posterior_threshold 1), got {self.threshold}")
        if (self.eagle_choices is None) == (self.dynamic_tree_top_k is None):
            raise ValueError(f"{EAGLE_BLOCK_KEY}: give eagle_choices (a static tree) or dynamic_tree_top_k (EAGLE-2), "
                             f"one of the two")
        check_tree_fits(self.tree, self.max_draft_len, self.num_eagle_layers, self.max_non_leaves_per_layer)

    @property
    def tree(self) -> DraftTree | DynamicTree:
        """The static tree of ``eagle_choices``, or the EAGLE-2 rule (depth D, top-K, N nodes)."""
        if self.eagle_choices is not None:
            return DraftTree.from_choices(self.eagle_choices)
        return DynamicTree(self.num_eagle_layers, int(self.dynamic_tree_top_k), self.max_draft_len)

    def to_json(self) -> dict:
        out = asdict(self)
        out["eagle_choices"] = None if self.eagle_choices is None else [list(c) for c in self.eagle_choices]
        return out

    @classmethod
    def from_dict(cls, block: Mapping | None) -> "EagleBlock":
        """Read the block itself (``config.autojudge_eagle`` inside the model class)."""
        block = None if block is None else dict(block)
        if block is not None and block.get("eagle_choices") is not None:
            block["eagle_choices"] = tuple(tuple(int(r) for r in c) for c in block["eagle_choices"])
        return read_block(cls, block, EAGLE_BLOCK_KEY, "trtllm-autojudge build-engines --route eagle")

    @classmethod
    def from_engine_config(cls, config: Mapping) -> "EagleBlock | None":
        """The block of an engine's config.json (under ``pretrained_config``); None for other engines."""
        block = config.get("pretrained_config", {}).get(EAGLE_BLOCK_KEY)
        return None if block is None else cls.from_dict(block)


def non_leaves_per_level(tree: DraftTree) -> list[int]:
    """[D]: nodes with children at each depth 0..D-1 (the root's level included)."""
    parents = set(tree.parents[1:])
    return [sum(1 for n in level if n in parents) for level in [[0]] + tree.levels[:-1]]


def check_tree_fits(tree: DraftTree | DynamicTree, max_draft_len: int, num_eagle_layers: int,
                    max_non_leaves_per_layer: int) -> None:
    """Refuse a tree the engine cannot draft, with both numbers: deeper than ``num_eagle_layers``, more
    nodes than ``max_draft_len``, more nodes with children on a level than ``max_non_leaves_per_layer``."""
    if isinstance(tree, DynamicTree):
        depth, nodes, widest = tree.depth, tree.num_nodes, tree.top_k
        what = "the EAGLE-2 tree"
    else:
        depth, nodes, widest = tree.max_depth, tree.num_nodes, max(non_leaves_per_level(tree), default=0)
        what = "eagle_choices"
    problems = []
    if depth > num_eagle_layers:
        problems.append(f"{what} is {depth} levels deep, deeper than num_eagle_layers {num_eagle_layers} (one EagleNet "
                        f"drafts each level)")
    if nodes > max_draft_len:
        problems.append(f"{what} has {nodes} nodes, more than max_draft_len {max_draft_len} (the engine's draft-token "
                        f"budget)")
    if widest > max_non_leaves_per_layer:
        problems.append(f"{what} expands {widest} nodes on one level, more than max_non_leaves_per_layer "
                        f"{max_non_leaves_per_layer}")
    if problems:
        raise ValueError("the tree does not fit the engine: " + "; ".join(problems) + ". Build with larger limits or "
                         "a smaller tree")


def eagle_block(judge_file: str | Path, plugin_library: str | Path, tree: DraftTree | DynamicTree, *,
                max_draft_len: int | None = None, num_eagle_layers: int | None = None,
                max_non_leaves_per_layer: int | None = None, threshold: float | None = None,
                threshold_source: str = "request") -> EagleBlock:
    """The block for a judge file and a tree; the limits default to the tree's own (its nodes, depth,
    widest level), the threshold to the judge file's. Refuses a judge the EAGLE route does not run."""
    head = JudgeHead.load(judge_file)
    dynamic = isinstance(tree, DynamicTree)
    depth = tree.depth if dynamic else tree.max_depth
    check_route_judge("eagle", head, depth=depth, dynamic_tree=dynamic)
    widest = tree.top_k if dynamic else max(non_leaves_per_level(tree), default=1)
    return EagleBlock(str(Path(judge_file).resolve()), str(Path(plugin_library).resolve()),
                      int(max_draft_len or tree.num_nodes), int(num_eagle_layers or depth),
                      int(max_non_leaves_per_layer or widest),
                      float(head.threshold if threshold is None else threshold), threshold_source,
                      None if dynamic else tuple(tuple(c) for c in tree.choices()), tree.top_k if dynamic else None)


def eagle_plugin_fields(block: EagleBlock, target_hidden: int) -> dict[str, np.ndarray]:
    """The nine plugin fields of the EAGLE target: tree logits mode, ``max_path_len = num_eagle_layers + 1``,
    the build's threshold; a judge for another hidden size, or one the route does not run, is refused."""
    head = JudgeHead.load(block.judge_file)
    check_route_judge("eagle", head, dynamic_tree=block.eagle_choices is None)
    return engine_plugin_fields(head, block.num_eagle_layers + 1, "tree_logits", block.threshold,
                                target_hidden=target_hidden)


def needs_greedy_child(fields: Mapping[str, np.ndarray]) -> bool:
    """Whether the plugin these fields configure takes ``greedy_child`` (a lookahead judge)."""
    return "greedy_child" in tree_logits_input_names(fields["feature_blocks"])


def greedy_child_row(block: EagleBlock) -> np.ndarray:
    """[max_draft_len + 1] int32: the static tree's rank-0 child of each node, -1 none (the plugin's
    ``greedy_child`` row of every request, for a lookahead judge)."""
    if block.eagle_choices is None:
        raise ValueError("an EAGLE-2 dynamic tree has no build-time greedy children (lookahead judges need eagle_choices)")
    tree = DraftTree.from_choices(block.eagle_choices)
    row = np.full(block.max_draft_len + 1, -1, np.int32)
    row[: tree.num_nodes + 1] = tree.greedy_child
    return row


def check_build(*, use_cache: bool, paged_kv_cache: bool, remove_input_padding: bool, gpt_attention_plugin: bool,
                max_draft_len: int, num_eagle_layers: int, pp_size: int, block: EagleBlock) -> None:
    """Refuse, before any network is built, a build the tree logits mode does not hold for. The arguments
    are the model config's and the network's plugin config. Raises ValueError saying which flag to change."""
    problems = []
    if not (use_cache and paged_kv_cache):
        problems.append("the paged KV cache (trtllm-build's default `--kv_cache_type paged`)")
    if not (remove_input_padding and gpt_attention_plugin):
        problems.append("packed input: `--remove_input_padding enable --gpt_attention_plugin auto`")
    if (max_draft_len, num_eagle_layers) != (block.max_draft_len, block.num_eagle_layers):
        problems.append(f"the checkpoint's max_draft_len {block.max_draft_len} and num_eagle_layers "
                        f"{block.num_eagle_layers} (the {EAGLE_BLOCK_KEY} block's; the config has {max_draft_len} and "
                        f"{num_eagle_layers}): convert again with trtllm_autojudge.trt.engine.eagle_convert")
    if pp_size != 1:
        problems.append("tensor parallelism only: convert with --pp_size 1 (EAGLE has no pipeline parallelism)")
    if problems:
        raise ValueError("build the AutoJudge EAGLE target with " + "; ".join(problems))


def plugin_inputs(helper_kwargs: Mapping[str, Any], logits, lm_input, threshold, greedy_child,
                  feature_blocks: Sequence[int]) -> list:
    """The plugin's inputs in :data:`.contract.TREE_LOGITS_INPUTS` order, from the keyword arguments of
    ``_eagle_fwd_helper``: ``logits`` (``lm_logits`` sliced to the real vocabulary), ``lm_input`` (its
    input rows), ``threshold`` ([B]: ``posterior_threshold`` or the build's) and ``greedy_child``
    ([B, N+1], for a lookahead judge). Raises ValueError naming a stock input the arguments lack."""
    tree_params = helper_kwargs.get("tree_params")
    found = {"target_logits": logits, "target_hidden": lm_input, "draft_tokens": helper_kwargs.get("draft_tokens"),
             "draft_lens": helper_kwargs.get("draft_lens"), "paths": getattr(tree_params, "paths", None),
             "threshold": threshold, "greedy_child": greedy_child}
    names = tree_logits_input_names(feature_blocks)
    missing = [name for name in names if found[name] is None]
    if missing:
        raise ValueError(f"_eagle_fwd_helper's arguments lack {missing}: this model class expects "
                         f"EagleForCausalLM of the TensorRT-LLM 1.2 line (draft_tokens, draft_lens, tree_params)")
    return [found[name] for name in names]


def executor_eagle_config(block: EagleBlock) -> dict:
    """The keyword arguments of the executor's ``EagleConfig`` for this engine: its tree, greedy sampling
    (exact-match acceptance), and the build's threshold as the default ``posterior_threshold``."""
    if block.eagle_choices is not None:
        return {"eagle_choices": [list(c) for c in block.eagle_choices], "greedy_sampling": True,
                "posterior_threshold": block.threshold}
    return {"greedy_sampling": True, "posterior_threshold": block.threshold, "use_dynamic_tree": True,
            "dynamic_tree_max_topK": int(block.dynamic_tree_top_k)}
