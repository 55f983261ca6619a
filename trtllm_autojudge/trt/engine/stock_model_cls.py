"""TensorRT-LLM 1.2 model class for ``trtllm-build --model_cls_file <this file> --model_cls_name
AutoJudgeStockLLaMAForCausalLM``: the stock route's Llama target (:mod:`.stock_spec`).

Only ``trtllm-build`` loads this file (``tensorrt_llm/commands/build.py`` imports it with
``SourceFileLoader``), so it imports TensorRT-LLM at the top; nothing else in the package imports
it. Written against TensorRT-LLM 1.2-line sources (docs/deploy.md lists the files read); it has not
been built here: no machine of this project has TensorRT.

It keeps the stock inputs and adds none. After ``LLaMAForCausalLM``'s forward it unmarks the
base ``logits`` output, runs AutoJudgeAccept in logits mode on the LM head's output rows (sliced to
the real vocabulary when tensor parallelism pads it), the LM head's input rows, ``input_ids``,
``last_token_ids``, ``host_request_types`` and ``host_context_lengths``, and marks the rewritten
rows (the padded columns appended back unchanged) as ``logits``. These six feed every target-only
judge (DT, or with the lookahead blocks, e.g. DT-DT1-DT2-LS): the plugin reads a draft row's
lookahead blocks from the next draft rows of its sequence (:mod:`.stock_spec`).
"""
from __future__ import annotations

from tensorrt_llm._common import default_net, default_trtnet
from tensorrt_llm._utils import pad_vocab_size
from tensorrt_llm.functional import _create_tensor, concat, shape, slice
from tensorrt_llm.models import LLaMAForCausalLM

from trtllm_autojudge.trt.engine import stock_spec
from trtllm_autojudge.trt.plugin.library import load_plugin_library
from trtllm_autojudge.trt.plugin.network import add_autojudge_plugin


class AutoJudgeStockLLaMAForCausalLM(LLaMAForCausalLM):
    """Stock draft-target Llama target whose logits AutoJudgeAccept rewrites (logits mode)."""

    def __init__(self, config):
        super().__init__(config)
        self.autojudge = stock_spec.StockBlock.from_dict(getattr(config, stock_spec.STOCK_BLOCK_KEY, None))
        self.autojudge_fields = stock_spec.stock_plugin_fields(self.autojudge, target_hidden=config.hidden_size)

    def prepare_inputs(self, *args, **kwargs):
        plugins = default_net().plugin_config
        stock_spec.check_build(use_cache=bool(kwargs.get("use_cache", True)), paged_kv_cache=bool(plugins.paged_kv_cache),
                               remove_input_padding=bool(plugins.remove_input_padding),
                               gpt_attention_plugin=bool(plugins.gpt_attention_plugin),
                               draft_tokens_external=bool(kwargs.get("speculative_decoding_draft_tokens_external")),
                               gather_context_logits=bool(kwargs.get("gather_context_logits")),
                               max_draft_len=int(kwargs.get("max_draft_len") or 0),
                               pp_size=self.config.mapping.pp_size, block=self.autojudge)
        return super().prepare_inputs(*args, **kwargs)

    def forward(self, *args, **kwargs):
        lm_logits, lm_input, all_hidden = super().forward(*args, **kwargs)  # [L, V_padded], [L, Ht], [T, Ht]
        network = default_trtnet()
        stock_spec.take_output(network, stock_spec.LOGITS_OUTPUT, stock_spec.REPLACED_LOGITS)
        vocab = self.config.vocab_size
        padded = pad_vocab_size(vocab, self.config.mapping.tp_size)
        rows = shape(lm_logits, 0)
        logits = lm_logits if padded == vocab else slice(lm_logits, starts=[0, 0], sizes=concat([rows, vocab]))
        inputs = stock_spec.plugin_inputs(kwargs, logits, lm_input, self.autojudge_fields["feature_blocks"])
        load_plugin_library(self.autojudge.plugin_library)
        layer = add_autojudge_plugin(network, [t.trt_tensor for t in inputs], self.autojudge_fields)
        rewritten = _create_tensor(layer.get_output(0), layer)  # [L, V]
        if padded != vocab:  # the runtime's logits buffer is [L, V_padded]: the padded columns stay as they were
            tail = slice(lm_logits, starts=[0, vocab], sizes=concat([rows, padded - vocab]))
            rewritten = concat([rewritten, tail], dim=1)
        rewritten.mark_output(stock_spec.LOGITS_OUTPUT, self.config.logits_dtype)
        return rewritten, lm_input, all_hidden
