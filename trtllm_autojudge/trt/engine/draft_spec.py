"""The draft engine of a judge that reads the draft (blocks DD, DD1): its extra output and the
config block that says it has one.

Such a judge reads the draft's final-norm hidden state at a draft node (DD) or at its greedy child
(DD1). A stock draft engine returns tokens and logits only, so for it the draft is built with
:mod:`.draft_model_cls`, which marks the last-token final-norm hidden states ``[num_seqs, Hd]`` as
the engine output :data:`DRAFT_HIDDEN_OUTPUT`. The TensorRT-LLM 1.2 executor returns such an output
when ``ExecutorConfig.additional_model_outputs`` and the request's ``OutputConfig`` name it
(``AdditionalModelOutput(name, gather_context=False)``): ``Result.additional_outputs`` then holds
``"generation_" + name`` of shape ``[beam_width, max_tokens, Hd]``, row 0 from the last prompt
token, row k from the step whose input is generated token k (docs/deploy.md lists the sources).

The conversion writes :func:`draft_block` into the draft checkpoint's ``config.json``;
``trtllm-build`` copies it into the engine's config (``pretrained_config``), where the model class
reads the output name and the runner learns that the engine has it.
"""
from __future__ import annotations

DRAFT_BLOCK_KEY = "autojudge_draft"
DRAFT_BLOCK_FORMAT = 1
# Same name as the target engine input it feeds (io_spec.DRAFT_HIDDEN), on the draft engine.
DRAFT_HIDDEN_OUTPUT = "autojudge_draft_hidden"
RESULT_PREFIX = "generation_"  # the executor's name for a per-step additional output


def draft_block() -> dict:
    """The ``autojudge_draft`` block of the config.json of a draft checkpoint built for DD / DD1 blocks."""
    return {"format": DRAFT_BLOCK_FORMAT, "hidden_output": DRAFT_HIDDEN_OUTPUT}


def hidden_output_name(block: dict | None) -> str:
    """The output name from a block (``config.autojudge_draft`` inside the model class)."""
    if block is None:
        raise ValueError(f"the draft checkpoint config has no {DRAFT_BLOCK_KEY!r} block: convert the draft with "
                         f"`python -m trtllm_autojudge.trt.engine.convert --draft_hidden_output` (build-engines does this "
                         f"for a judge with the blocks DD or DD1) before trtllm-build")
    if block != draft_block():
        raise ValueError(f"the {DRAFT_BLOCK_KEY!r} block {block} is not {draft_block()}: reconvert the draft with "
                         f"this version of trtllm_autojudge")
    return block["hidden_output"]


def engine_hidden_output(engine_config: dict) -> str | None:
    """The hidden-state output a draft engine returns (from its config.json), None for a stock engine."""
    block = engine_config.get("pretrained_config", {}).get(DRAFT_BLOCK_KEY)
    return None if block is None else hidden_output_name(block)
