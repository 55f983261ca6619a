"""TensorRT-LLM 1.2 model class for ``trtllm-build --model_cls_file <this file> --model_cls_name
AutoJudgeLLaMAForCausalLM``: the Llama target with the AutoJudgeAccept plugin after the LM head.

Only ``trtllm-build`` loads this file (``tensorrt_llm/commands/build.py`` imports it with
``SourceFileLoader``), so it imports TensorRT-LLM at the top; nothing else in the package imports
it. Written against TensorRT-LLM 1.2-line sources (see docs/deploy.md for the files read); it has
not been built here: no machine of this project has TensorRT.

What it adds to ``LLaMAForCausalLM`` (the engine I/O is specified in :mod:`.io_spec`):
- inputs ``autojudge_node_rows [B*(N+1)]``, ``autojudge_draft_tokens [B, N]``,
  ``autojudge_draft_lens [B]``, ``autojudge_paths [B, P, D+1]``, ``autojudge_threshold [B]``,
  for a judge whose blocks read the draft (DD, DD1) ``autojudge_draft_hidden [B*(N+1), Hd]``, and
  for one that looks ahead (DT1, DT2, DD1, LS) ``autojudge_greedy_child [B, N+1]``;
- the final-norm hidden states of every packed token (the third value ``DecoderModelForCausalLM``
  returns) gathered at the node rows, the LM head on those rows, the plugin on top;
- outputs ``accepted_tokens [B, D+1]``, ``accepted_lens [B]``, ``best_path [B]``,
  ``judged_count [B]`` (int32). The base model's ``logits`` output stays (last token per row).
The judge weights come from the judge file named in the checkpoint's ``autojudge`` config block.
"""
from __future__ import annotations

from collections import OrderedDict

from tensorrt_llm._common import default_net, default_trtnet
from tensorrt_llm._utils import pad_vocab_size, str_dtype_to_trt
from tensorrt_llm.functional import Tensor, _create_tensor, concat, index_select, shape, slice
from tensorrt_llm.models import LLaMAForCausalLM

from trtllm_autojudge.trt.engine import io_spec
from trtllm_autojudge.trt.plugin.contract import plugin_io_names
from trtllm_autojudge.trt.plugin.fields import engine_plugin_fields
from trtllm_autojudge.trt.plugin.library import load_plugin_library
from trtllm_autojudge.trt.plugin.network import add_autojudge_plugin


class AutoJudgeLLaMAForCausalLM(LLaMAForCausalLM):
    """Llama target engine that ends in the AutoJudge acceptance (accept mode)."""

    def __init__(self, config):
        super().__init__(config)
        self.autojudge = io_spec.EngineBlock.from_dict(getattr(config, io_spec.BLOCK_KEY, None))
        if self.autojudge.output_mode != "accept":
            raise ValueError(f"this model class builds the accept mode; the config block asks for "
                             f"{self.autojudge.output_mode!r}")
        if config.mapping.pp_size != 1:
            raise ValueError("the AutoJudge target engine supports tensor parallelism only: convert with --pp_size 1")
        self.autojudge_fields = engine_plugin_fields(self.autojudge.judge_file, self.autojudge.max_path_len, "accept",
                                                     target_hidden=config.hidden_size)

    def prepare_inputs(self, *args, **kwargs):
        plugins = default_net().plugin_config
        if kwargs.get("use_cache", True):
            raise ValueError("build the AutoJudge target engine with `--kv_cache_type disabled`: it verifies each "
                             "cycle as context rows (trtllm_autojudge/trt/engine/io_spec.py says why)")
        if not plugins.remove_input_padding or not plugins.gpt_attention_plugin:
            raise ValueError("build the AutoJudge target engine with `--remove_input_padding enable` and the GPT "
                             "attention plugin (`--gpt_attention_plugin auto`): node rows index packed tokens")
        if plugins.multiple_profiles:
            raise ValueError("build the AutoJudge target engine with `--multiple_profiles disable`: its inputs "
                             "declare one optimization profile")
        inputs = super().prepare_inputs(*args, **kwargs)
        for spec in io_spec.accept_engine_inputs(self.autojudge, self.autojudge_fields):
            dtype = self.config.dtype if spec.dtype == "model" else spec.dtype
            inputs[spec.name] = Tensor(name=spec.name, dtype=str_dtype_to_trt(dtype), shape=list(spec.shape),
                                       dim_range=OrderedDict((name, [list(r)]) for name, r in spec.dims))
        return inputs

    def forward(self, *args, **kwargs):
        ours = {name: kwargs.pop(name) for name in io_spec.ENGINE_INPUTS if name in kwargs}
        _, _, all_hidden = super().forward(*args, **kwargs)  # all_hidden: [T, Ht] final-norm states
        node_hidden = index_select(all_hidden, 0, ours[io_spec.NODE_ROWS])  # [B*(N+1), Ht]
        node_logits = self.lm_head(node_hidden)  # [B*(N+1), V_padded], gathered over TP ranks
        vocab = self.config.vocab_size
        if pad_vocab_size(vocab, self.config.mapping.tp_size) != vocab:
            node_logits = slice(node_logits, starts=[0, 0], sizes=concat([shape(node_logits, 0), vocab]))  # [., V]
        rows = {"target_logits": node_logits, "target_hidden": node_hidden}
        names, _ = plugin_io_names(self.autojudge_fields)  # contract order, the judge's optional inputs included
        plugin_inputs = [rows[name] if name in rows else ours[io_spec.PLUGIN_INPUT_OF[name]] for name in names]
        load_plugin_library(self.autojudge.plugin_library)
        layer = add_autojudge_plugin(default_trtnet(), [t.trt_tensor for t in plugin_inputs], self.autojudge_fields)
        outputs = [_create_tensor(layer.get_output(i), layer) for i in range(len(io_spec.ENGINE_OUTPUTS))]
        for tensor, name in zip(outputs, io_spec.ENGINE_OUTPUTS):
            tensor.mark_output(name, "int32")
        return outputs[0]
