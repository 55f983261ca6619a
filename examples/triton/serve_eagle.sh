#!/usr/bin/env bash
# Serve the EAGLE route with Triton: the TensorRT-LLM backend's own models (no custom Python model) over
# an engine of `trtllm-autojudge build-engines --route eagle` built with a static tree (--eagle_choices)
# and --threshold_source engine: the backend sets only eagle_choices, no per-request EagleConfig, so the
# judge's threshold is the engine's. Run inside the Triton TensorRT-LLM container of your release, with
# TRTLLM a TensorRT-LLM checkout of the installed release. Not run on the project's machines (docs/deploy.md).
#
#   WORK=./autojudge-eagle TOKENIZER=/models/Llama-3.1-8B-Instruct TRTLLM=/path/to/TensorRT-LLM \
#   PLUGIN=build/plugins/lib/libautojudge_trt_plugin.so bash examples/triton/serve_eagle.sh
set -euo pipefail
: "${WORK:?folder with engines/target}" "${TOKENIZER:?HF tokenizer folder of the target}"
: "${TRTLLM:?TensorRT-LLM checkout of the installed release}" "${PLUGIN:?libautojudge_trt_plugin.so}"
REPO=${REPO:-$WORK/triton_eagle_repo}
python build_scripts/make_triton_repo.py --route eagle --output_dir "$REPO" \
    --backend_models_dir "$TRTLLM/triton_backend/all_models/inflight_batcher_llm" \
    --target_engine_dir "$WORK/engines/target" --tokenizer_dir "$TOKENIZER" ${TARGET_GPUS:+--target_gpus "$TARGET_GPUS"}
# As on the stock route: the plugin registers itself when preloaded with AUTOJUDGE_REGISTER_ON_LOAD=1.
export AUTOJUDGE_REGISTER_ON_LOAD=1
LD_PRELOAD="$(realpath "$PLUGIN")${LD_PRELOAD:+:$LD_PRELOAD}" exec tritonserver --model-repository "$REPO" \
    --http-port "${HTTP_PORT:-8000}"
# Ask the BLS (plain requests: the engine drafts and verifies its own trees):
#   curl -s localhost:8000/v2/models/tensorrt_llm_bls/generate -d '{"text_input": "...", "max_tokens": 128}'
