#!/usr/bin/env bash
# Tensor-parallel AutoJudge on the TensorRT-LLM 1.2 engine path: N ranks, one decision.
# GPU host with N GPUs, tensorrt-llm==1.2.*, the judge file and the plugin library (see
# examples/gsm8k_llama_engine.sh steps 1-2). Not run on the project's machines.
#
#   N=2 DRAFT=... TARGET=... JUDGE=judge.safetensors PLUGIN=libautojudge_trt_plugin.so bash examples/tensor_parallel.sh
set -euo pipefail
: "${DRAFT:?}" "${TARGET:?}" "${JUDGE:?}" "${PLUGIN:?}"
N=${N:-2}
WORK=${WORK:-./autojudge-tp$N}
MPI_FLAGS=${MPI_FLAGS:-}   # e.g. --allow-run-as-root inside a container

# Both engines with N ranks: the runner's ranks run the draft (the executor, leader mode) and the target.
trtllm-autojudge build-engines --draft_model_dir "$DRAFT" --target_model_dir "$TARGET" --judge "$JUDGE" \
    --plugin_lib "$PLUGIN" --output_dir "$WORK" --tp_size "$N"

# N ranks; --check_ranks compares every cycle's decision across ranks (docs/deploy.md: why they agree).
mpirun -n "$N" $MPI_FLAGS python -m trtllm_autojudge.trt.runner.engines \
    --draft_engine_dir "$WORK/engines/draft" --target_engine_dir "$WORK/engines/target" --tokenizer_dir "$TARGET" \
    --prompt "A train travels 60 km in 45 minutes. How far does it go in 2 hours at that speed?" \
    --threshold 0.3 --max_new_tokens 128 --check_ranks
