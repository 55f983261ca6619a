#!/usr/bin/env bash
# The EAGLE route: TensorRT-LLM 1.2's EAGLE engine (the target plus an EAGLE-1/2 head) drafting trees,
# with AutoJudgeAccept in tree logits mode before its stock exact-match accept step. GPU host,
# tensorrt-llm==1.2.*, a judge file of a target-only setup (DT, or DT-DT1-DT2-LS on a static tree),
# the plugin library (examples/gsm8k_llama_engine.sh step 2) and an EAGLE head for this target
# (build_scripts/train_eagle.py; EagleHead.save layout). Not run on the project's machines
# (docs/deploy.md: what was verified where).
#
#   TARGET=... HEAD=eagle-head JUDGE=judge.safetensors PLUGIN=libautojudge_trt_plugin.so bash examples/eagle_engine.sh
#   DYNAMIC=1 ...   # EAGLE-2 dynamic trees (depth 4, top-4, 24 nodes) instead of the static tree
set -euo pipefail
: "${TARGET:?}" "${HEAD:?}" "${JUDGE:?}" "${PLUGIN:?}"
N=${N:-1}
WORK=${WORK:-./autojudge-eagle}
MPI_FLAGS=${MPI_FLAGS:-}   # e.g. --allow-run-as-root inside a container
if [ -n "${DYNAMIC:-}" ]; then
    TREE=(--dynamic_tree --depth 4 --top_k 4 --max_draft_len 24)
else  # 7 nodes, 4 levels deep
    TREE=(--eagle_choices '[[0], [1], [0, 0], [1, 0], [0, 0, 0], [0, 1], [0, 0, 0, 0]]')
fi

trtllm-autojudge build-engines --route eagle --target_model_dir "$TARGET" --eagle_head "$HEAD" \
    --judge "$JUDGE" --plugin_lib "$PLUGIN" --output_dir "$WORK" --tp_size "$N" "${TREE[@]}"

# Per-request thresholds through EagleConfig(posterior_threshold): 0 is greedy decoding.
mpirun -n "$N" $MPI_FLAGS python -m trtllm_autojudge.trt.runner.engines \
    --target_engine_dir "$WORK/engines/target" --tokenizer_dir "$TARGET" \
    --prompt "A train travels 60 km in 45 minutes. How far does it go in 2 hours at that speed?" \
    --threshold "${THRESHOLD:-0.3}" --max_new_tokens 128 --kv_cache_fraction 0.4
