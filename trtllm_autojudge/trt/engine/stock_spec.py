"""The stock route's target engine, as data and checks (pure; :mod:`.stock_model_cls` applies them).

The target is a stock TensorRT-LLM 1.2 Llama engine built with ``--speculative_decoding_mode
draft_tokens_external``, the paged KV cache and packed input, with one change: between the LM head
and the ``logits`` output sits AutoJudgeAccept in logits mode. The engine keeps every stock input
and output, so the executor, ``ModelRunnerCpp`` and Triton's ``tensorrtllm`` backend drive it
unchanged; the stock exact-match acceptance on the rewritten logits accepts exactly the
judge-approved prefix (:mod:`trtllm_autojudge.spec.packed_step`).

Where the plugin's inputs come from (``DecoderModelForCausalLM.forward`` and ``prepare_inputs``
of the 1.2 line; docs/deploy.md lists the files read): the logits and the LM head's input rows are
the first two values ``forward`` returns with the paged cache (``lm_logits``, ``hidden_states`` =
the final-norm states gathered at ``last_token_ids``); ``input_ids`` and ``last_token_ids`` are
engine inputs; ``host_request_types`` and ``host_context_lengths`` are the engine inputs carried by
``attention_params``. The judge weights and the one threshold of the engine are plugin fields read
from the judge file named in the checkpoint's ``autojudge_stock`` config block.

The judge is target-only (:mod:`.routes`: no stock channel carries the draft's hidden states), of
any setup of the blocks DT, DT1, DT2, LS: the same six stock tensors feed every such setup. A
sequence's draft rows are a chain, so the plugin reads a draft row's lookahead blocks from the
sequence's next one and two draft rows (its greedy child and grandchild); the last one or two
drafts of a request have no verdict.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...judge.head import JudgeHead
from ..plugin.contract import logits_input_names
from ..plugin.fields import engine_plugin_fields
from .io_spec import read_block
from .routes import check_route_judge

STOCK_BLOCK_KEY = "autojudge_stock"
STOCK_BLOCK_FORMAT = 1
LOGITS_OUTPUT = "logits"  # the stock output the rewritten logits take over
REPLACED_LOGITS = "autojudge_stock_logits"  # the base model's logits tensor, no longer an output


@dataclass(frozen=True)
class StockBlock:
    """What the stock-route target is built for (the ``"autojudge_stock"`` block of its config.json)."""

    judge_file: str  # absolute path of the judge safetensors file (a target-only setup)
    plugin_library: str  # absolute path of libautojudge_trt_plugin.so
    threshold: float  # the engine's one judge threshold (no stock channel carries one per request)
    max_draft_len: int  # --max_draft_len of the build: draft tokens per request
    format: int = STOCK_BLOCK_FORMAT

    def __post_init__(self):
        if self.format != STOCK_BLOCK_FORMAT:
            raise ValueError(f"{STOCK_BLOCK_KEY} block format {self.format}; this version reads {STOCK_BLOCK_FORMAT}: "
                             f"rebuild the engine")
        if not 0.0 <= float(self.threshold) <= 1.0:
            raise ValueError(f"{STOCK_BLOCK_KEY} threshold must lie in [0, 1] (0: lossless), got {self.threshold}")
        if int(self.max_draft_len) < 1:
            raise ValueError(f"{STOCK_BLOCK_KEY} max_draft_len must be >= 1, got {self.max_draft_len}")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, block: Mapping | None) -> "StockBlock":
        """Read the block itself (``config.autojudge_stock`` inside the model class)."""
        return read_block(cls, block, STOCK_BLOCK_KEY, "trtllm-autojudge build-engines --route stock")

    @classmethod
    def from_engine_config(cls, config: Mapping) -> "StockBlock | None":
        """The block of an engine's config.json (under ``pretrained_config``); None for other engines."""
        block = config.get("pretrained_config", {}).get(STOCK_BLOCK_KEY)
        return None if block is None else cls.from_dict(block)


def stock_block(judge_file: str | Path, plugin_library: str | Path, *, max_draft_len: int,
                threshold: float | None = None) -> StockBlock:
    """The block for a judge file; ``threshold`` defaults to the judge file's. Refuses a judge the
    stock route does not run (:func:`.routes.check_route_judge`: one that reads the draft's hidden
    states, or a lookahead judge that a chain of ``max_draft_len`` gives no verdict)."""
    head = JudgeHead.load(judge_file)
    check_route_judge("stock", head, depth=max_draft_len)
    return StockBlock(str(Path(judge_file).resolve()), str(Path(plugin_library).resolve()),
                      float(head.threshold if threshold is None else threshold), int(max_draft_len))


def stock_plugin_fields(block: StockBlock, target_hidden: int) -> dict[str, np.ndarray]:
    """The nine plugin fields of the stock target: logits mode, the block's threshold,
    ``max_path_len = max_draft_len + 1``; a judge for another hidden size, or one the stock route
    does not run, is refused."""
    head = JudgeHead.load(block.judge_file)
    check_route_judge("stock", head)
    return engine_plugin_fields(head, block.max_draft_len + 1, "logits", block.threshold, target_hidden=target_hidden)


def check_build(*, use_cache: bool, paged_kv_cache: bool, remove_input_padding: bool, gpt_attention_plugin: bool,
                draft_tokens_external: bool, gather_context_logits: bool, max_draft_len: int, pp_size: int,
                block: StockBlock) -> None:
    """Refuse, before any network is built, a build the stock route's segmentation does not hold for.

    The arguments are what ``trtllm-build`` hands the model class: ``prepare_inputs``' keyword
    arguments and the network's plugin config. Raises ValueError saying which flag to change.
    """
    problems = []
    if not (use_cache and paged_kv_cache):
        problems.append("the paged KV cache (trtllm-build's default `--kv_cache_type paged`)")
    if not (remove_input_padding and gpt_attention_plugin):
        problems.append("packed input: `--remove_input_padding enable --gpt_attention_plugin auto`")
    if not draft_tokens_external:
        problems.append("`--speculative_decoding_mode draft_tokens_external`")
    if gather_context_logits:
        problems.append("no `--gather_context_logits` (the logits must be one row per last_token_ids entry)")
    if max_draft_len != block.max_draft_len:
        problems.append(f"`--max_draft_len {block.max_draft_len}` (the {STOCK_BLOCK_KEY} block's; got {max_draft_len})")
    if pp_size != 1:
        problems.append("tensor parallelism only: convert with --pp_size 1")
    if problems:
        raise ValueError("build the AutoJudge stock target with " + "; ".join(problems))


def plugin_inputs(forward_kwargs: Mapping[str, Any], logits, lm_input, feature_blocks) -> list:
    """The plugin's inputs in :data:`.contract.LOGITS_INPUTS` order for a target-only judge's block
    codes (``feature_blocks`` [K]: the same six for every such setup), from the keyword arguments
    ``trtllm-build`` passes ``forward`` and the first two values the base forward returns.

    ``logits``: the LM head's output rows (sliced to the real vocabulary); ``lm_input``: its input
    rows. Raises ValueError naming a stock input the arguments lack.
    """
    attention = forward_kwargs.get("attention_params")
    found = {
        "target_logits": logits,
        "target_hidden": lm_input,
        "input_ids": forward_kwargs.get("input_ids"),
        "last_token_ids": forward_kwargs.get("last_token_ids"),
        "host_request_types": getattr(attention, "host_request_types", None),
        "host_context_lengths": getattr(attention, "host_context_lengths", None),
    }
    missing = [name for name, tensor in found.items() if tensor is None]
    if missing:
        raise ValueError(f"the stock engine's forward arguments lack {missing}: build with packed input and the GPT "
                         f"attention plugin (their host inputs carry the step's layout)")
    return [found[name] for name in logits_input_names(feature_blocks)]


def take_output(network, name: str, new_name: str):
    """Unmark the network output called ``name`` and rename it ``new_name`` (the rewritten logits then
    take ``name``); returns that tensor. ``network``: a ``tensorrt.INetworkDefinition``."""
    for i in range(network.num_outputs):
        tensor = network.get_output(i)
        if tensor.name == name:
            network.unmark_output(tensor)
            tensor.name = new_name
            return tensor
    raise ValueError(f"the base model marked no output {name!r}: this model class expects "
                     f"DecoderModelForCausalLM.forward of the TensorRT-LLM 1.2 line (it marks 'logits')")
