"""TensorRT-LLM 1.2 model class for ``trtllm-build --model_cls_file <this file> --model_cls_name
AutoJudgeDraftLLaMAForCausalLM``: the Llama draft that also returns its final-norm hidden states.

Only ``trtllm-build`` loads this file, so it imports TensorRT-LLM at the top; nothing else in the
package imports it. Written against TensorRT-LLM 1.2-line sources (docs/deploy.md lists the files
read); it has not been built here: no machine of this project has TensorRT.

What it adds to ``LLaMAForCausalLM`` (a paged-KV-cache draft run by the executor):
``DecoderModelForCausalLM.forward`` returns ``(lm_logits, hidden_states, all_hidden_states)`` with
the paged cache, where ``hidden_states`` is the final-norm state at each sequence's last token,
``[num_seqs, Hd]`` -- the LM head's input. This class marks it as the engine output named in the
checkpoint's ``autojudge_draft`` block (:mod:`.draft_spec`), so the executor can return it as an
additional output without gathering context (one row per sequence per step).
"""
from __future__ import annotations

from tensorrt_llm.models import LLaMAForCausalLM

from trtllm_autojudge.trt.engine.draft_spec import DRAFT_BLOCK_KEY, hidden_output_name


class AutoJudgeDraftLLaMAForCausalLM(LLaMAForCausalLM):
    """Llama draft engine with the last-token final-norm hidden states as an extra output."""

    def __init__(self, config):
        super().__init__(config)
        self.autojudge_hidden_output = hidden_output_name(getattr(config, DRAFT_BLOCK_KEY, None))
        if config.mapping.pp_size != 1:
            raise ValueError("the AutoJudge draft engine supports tensor parallelism only: convert with --pp_size 1")

    def forward(self, *args, **kwargs):
        outputs = super().forward(*args, **kwargs)
        if not (isinstance(outputs, tuple) and len(outputs) == 3):
            raise ValueError("the AutoJudge draft engine needs the paged KV cache (trtllm-build's default "
                             "`--kv_cache_type paged`): only then does the base model return its hidden states")
        lm_logits, last_hidden, _ = outputs  # [num_seqs, V_padded], [num_seqs, Hd], [T, Hd]
        last_hidden.mark_output(self.autojudge_hidden_output, self.config.dtype)
        return lm_logits
