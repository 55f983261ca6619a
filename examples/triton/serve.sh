#!/usr/bin/env bash
# Serve AutoJudge with Triton Inference Server (TensorRT-LLM 1.2 backend container), from engines
# built by `trtllm-autojudge build-engines`. Not run on the project's machines.
#
#   WORK=./autojudge-gsm8k TOKENIZER=/models/Llama-3.1-8B-Instruct bash examples/triton/serve.sh
set -euo pipefail
: "${WORK:?folder with engines/draft and engines/target}" "${TOKENIZER:?HF tokenizer folder of the pair}"
REPO=${REPO:-$WORK/triton_repo}
python build_scripts/make_triton_repo.py --output_dir "$REPO" --draft_engine_dir "$WORK/engines/draft" \
    --target_engine_dir "$WORK/engines/target" --tokenizer_dir "$TOKENIZER"
# mpirun -n 1 gives the server an MPI runtime: autojudge_target spawns the target's ranks from it
# when the target engine was built with --tp_size N > 1 (build the draft with --draft_tp_size 1).
exec mpirun -n 1 ${MPI_FLAGS:-} tritonserver --model-repository "$REPO" --http-port "${HTTP_PORT:-8000}"
