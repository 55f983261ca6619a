"""TensorRT-LLM 1.2 model class for ``trtllm-build --model_cls_file <this file> --model_cls_name
AutoJudgeEagleForCausalLM``: the EAGLE route's target (:mod:`.eagle_spec`).

Only ``trtllm-build`` loads this file (``tensorrt_llm/commands/build.py`` imports it with
``SourceFileLoader``), so it imports TensorRT-LLM at the top; nothing else in the package imports it.
Written against the TensorRT-LLM 1.2-line ``tensorrt_llm/models/eagle/model.py`` (docs/deploy.md lists
the files and revisions read); it has not been built here: no machine of this project has TensorRT.

It keeps every stock input and output. ``EagleForCausalLM.forward`` hands ``_eagle_fwd_helper`` the
base model's ``lm_logits`` (cast to the logits dtype) and the final-norm hidden states of every token;
the override gathers the LM head's input rows at ``last_token_ids`` (as the base model gathered the
logits rows), runs AutoJudgeAccept in tree logits mode on ``lm_logits`` (sliced to the real vocabulary
when tensor parallelism pads it), those rows, ``draft_tokens``, ``draft_lens``, ``tree_params.paths``
and the threshold (``posterior_threshold`` or the build's), appends the padded columns back, and
hands the rewritten logits to the stock helper: ``EagleSampleAndAcceptDraftTokens``, the EagleNets and
the outputs stay stock.
"""
from __future__ import annotations

import numpy as np
from tensorrt_llm._common import default_net, default_trtnet
from tensorrt_llm._utils import pad_vocab_size
from tensorrt_llm.functional import _create_tensor, concat, constant, expand, gather_last_token_logits, shape, slice
from tensorrt_llm.models.eagle.model import EagleForCausalLM

from trtllm_autojudge.trt.engine import eagle_spec
from trtllm_autojudge.trt.plugin.library import load_plugin_library
from trtllm_autojudge.trt.plugin.network import add_autojudge_plugin


class AutoJudgeEagleForCausalLM(EagleForCausalLM):
    """TensorRT-LLM's EAGLE engine whose accept step reads logits AutoJudgeAccept rewrote (tree logits mode)."""

    def __init__(self, config):
        super().__init__(config)
        self.autojudge = eagle_spec.EagleBlock.from_dict(getattr(config, eagle_spec.EAGLE_BLOCK_KEY, None))
        self.autojudge_fields = eagle_spec.eagle_plugin_fields(self.autojudge, target_hidden=config.hidden_size)

    def prepare_inputs(self, *args, **kwargs):
        plugins = default_net().plugin_config
        eagle_spec.check_build(use_cache=bool(kwargs.get("use_cache", True)), paged_kv_cache=bool(plugins.paged_kv_cache),
                               remove_input_padding=bool(plugins.remove_input_padding),
                               gpt_attention_plugin=bool(plugins.gpt_attention_plugin),
                               max_draft_len=int(self.max_draft_len), num_eagle_layers=int(self.num_eagle_layers),
                               pp_size=self.config.mapping.pp_size, block=self.autojudge)
        return super().prepare_inputs(*args, **kwargs)

    def _per_request(self, row: np.ndarray, draft_lens):
        """A [B, len(row)] tensor of ``row`` repeated for every request (B from draft_lens [B])."""
        return expand(constant(row[None]), concat([shape(draft_lens, 0), row.shape[0]]))

    def _eagle_fwd_helper(self, lm_logits, hidden_states, *args, **kwargs):
        # lm_logits [L, V_padded] in the logits dtype; hidden_states [T, Ht]: every token's final-norm state
        lm_input = gather_last_token_logits(hidden_states, kwargs["last_token_ids"],
                                            default_net().plugin_config.remove_input_padding)  # [L, Ht]
        vocab = self.config.vocab_size
        padded = pad_vocab_size(vocab, self.config.mapping.tp_size)
        rows = shape(lm_logits, 0)
        logits = lm_logits if padded == vocab else slice(lm_logits, starts=[0, 0], sizes=concat([rows, vocab]))
        draft_lens = kwargs["draft_lens"]
        if self.autojudge.threshold_source == "request":
            threshold = kwargs["posterior_threshold"]  # [B]
        else:
            threshold = expand(constant(np.array([self.autojudge.threshold], np.float32)), shape(draft_lens, 0))
        greedy_child = None
        if eagle_spec.needs_greedy_child(self.autojudge_fields):
            greedy_child = self._per_request(eagle_spec.greedy_child_row(self.autojudge), draft_lens)  # [B, N + 1]
        inputs = eagle_spec.plugin_inputs(kwargs, logits, lm_input, threshold, greedy_child,
                                          self.autojudge_fields["feature_blocks"])
        load_plugin_library(self.autojudge.plugin_library)
        layer = add_autojudge_plugin(default_trtnet(), [t.trt_tensor for t in inputs], self.autojudge_fields)
        rewritten = _create_tensor(layer.get_output(0), layer)  # [L, V]
        if padded != vocab:  # the stock accept step samples over V_padded: the padded columns stay as they were
            rewritten = concat([rewritten, slice(lm_logits, starts=[0, vocab], sizes=concat([rows, padded - vocab]))],
                               dim=1)
        return super()._eagle_fwd_helper(rewritten, hidden_states, *args, **kwargs)
