#!/usr/bin/env bash
# The stock route with tensor parallelism: a stock draft_tokens_external target whose logits the judge
# rewrites, driven by the executor's draft-target flow on N ranks. GPU host with N GPUs,
# tensorrt-llm==1.2.*, a judge file of a target-only setup (DT, or DT-DT1-DT2-LS: SETUP of
# examples/gsm8k_llama_engine.sh step 1) and the plugin library (its step 2). Not run on the
# project's machines (docs/deploy.md).
#
#   N=2 DRAFT=... TARGET=... JUDGE=judge.safetensors PLUGIN=libautojudge_trt_plugin.so bash examples/stock_tensor_parallel.sh
set -euo pipefail
: "${DRAFT:?}" "${TARGET:?}" "${JUDGE:?}" "${PLUGIN:?}"
N=${N:-2}
WORK=${WORK:-./autojudge-stock-tp$N}
THRESHOLD=${THRESHOLD:-}   # empty: the judge file's; one threshold per engine on this route
MPI_FLAGS=${MPI_FLAGS:-}   # e.g. --allow-run-as-root inside a container

trtllm-autojudge build-engines --route stock --draft_model_dir "$DRAFT" --target_model_dir "$TARGET" \
    --judge "$JUDGE" --plugin_lib "$PLUGIN" --output_dir "$WORK" --tp_size "$N" --draft_tp_size "$N" \
    --depth 8 ${THRESHOLD:+--threshold "$THRESHOLD"}

# N ranks in leader mode: rank 0 enqueues, the executor runs all N (docs/deploy.md: why they agree).
mpirun -n "$N" $MPI_FLAGS python -m trtllm_autojudge.trt.runner.engines \
    --draft_engine_dir "$WORK/engines/draft" --target_engine_dir "$WORK/engines/target" --tokenizer_dir "$TARGET" \
    --prompt "A train travels 60 km in 45 minutes. How far does it go in 2 hours at that speed?" \
    --max_new_tokens 128 --kv_cache_fraction 0.4
