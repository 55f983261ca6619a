#!/usr/bin/env bash
# Serve the stock route with Triton: the TensorRT-LLM backend's own draft-target BLS repository, no
# custom Python model, from engines built by `trtllm-autojudge build-engines --route stock`. Run inside
# the Triton TensorRT-LLM container of your release. Not run on the project's machines (docs/deploy.md).
# The model templates live in TensorRT-LLM's triton_backend/all_models/inflight_batcher_llm (they left
# the tensorrtllm_backend repository in 2025): TRTLLM is a TensorRT-LLM checkout of the installed release.
#
#   WORK=./autojudge-stock TOKENIZER=/models/Llama-3.1-8B-Instruct TRTLLM=/path/to/TensorRT-LLM \
#   PLUGIN=build/plugins/lib/libautojudge_trt_plugin.so bash examples/triton/serve_stock.sh
set -euo pipefail
: "${WORK:?folder with engines/draft and engines/target}" "${TOKENIZER:?HF tokenizer folder of the pair}"
: "${TRTLLM:?TensorRT-LLM checkout of the installed release}" "${PLUGIN:?libautojudge_trt_plugin.so}"
REPO=${REPO:-$WORK/triton_stock_repo}
python build_scripts/make_triton_repo.py --route stock --output_dir "$REPO" \
    --backend_models_dir "$TRTLLM/triton_backend/all_models/inflight_batcher_llm" --draft_engine_dir "$WORK/engines/draft" \
    --target_engine_dir "$WORK/engines/target" --tokenizer_dir "$TOKENIZER" \
    ${TARGET_GPUS:+--target_gpus "$TARGET_GPUS"} ${DRAFT_GPUS:+--draft_gpus "$DRAFT_GPUS"}
# The tensorrtllm backend deserializes the target in this process: the plugin registers itself when
# preloaded with AUTOJUDGE_REGISTER_ON_LOAD=1. For a TP target use
# $TRTLLM/triton_backend/scripts/launch_triton_server.py --world_size N with the same two variables exported.
export AUTOJUDGE_REGISTER_ON_LOAD=1
LD_PRELOAD="$(realpath "$PLUGIN")${LD_PRELOAD:+:$LD_PRELOAD}" exec tritonserver --model-repository "$REPO" \
    --http-port "${HTTP_PORT:-8000}"
# Ask the stock BLS (exact-match acceptance: no use_draft_logits):
#   curl -s localhost:8000/v2/models/tensorrt_llm_bls/generate -d '{"text_input": "...", "max_tokens": 128,
#        "num_draft_tokens": 8}'
