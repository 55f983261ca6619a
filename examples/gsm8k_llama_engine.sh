#!/usr/bin/env bash
# GSM8K with Llama-3.2-1B-Instruct (draft) -> Llama-3.1-8B-Instruct (target) on the TensorRT-LLM 1.2
# engine path, on a GPU host with `pip install tensorrt-llm==1.2.* 'trtllm-autojudge[train,mpi]'`.
# Not run on the project's machines (no GPU/TensorRT there): see docs/deploy.md.
#
#   DRAFT=/models/Llama-3.2-1B-Instruct TARGET=/models/Llama-3.1-8B-Instruct WORK=./autojudge bash examples/gsm8k_llama_engine.sh
set -euo pipefail
: "${DRAFT:?set DRAFT to the HF draft checkpoint folder}" "${TARGET:?set TARGET to the HF target checkpoint folder}"
WORK=${WORK:-./autojudge-gsm8k}
DEPTH=${DEPTH:-8}          # draft tokens per cycle
THRESHOLD=${THRESHOLD:-}   # empty: the judge file's default (chosen on the validation frontier)
SETUP=${SETUP:-DT}         # judge features: any setup of DT, DD, DT1, DT2, DD1, LS, e.g. DD-DT or DT-DT1-DT2-LS
                           # (with DD or DD1, build-engines builds a draft that returns its hidden states)
mkdir -p "$WORK"

# 1. Judge: mine labels with the pair, extract $SETUP features, train (skip if you have a judge file).
if [ ! -f "$WORK/judge.safetensors" ]; then
  trtllm-autojudge mine --target "$TARGET" --draft "$DRAFT" --device cuda:0 --out "$WORK/labels.jsonl"
  trtllm-autojudge features --labels "$WORK/labels.jsonl" --target "$TARGET" --draft "$DRAFT" --device cuda:0 \
      --setup "$SETUP" --out "$WORK/features.safetensors"
  trtllm-autojudge train --features "$WORK/features.safetensors" --setup "$SETUP" --out "$WORK/judge.safetensors"
fi

# 2. Plugin library (nvcc + TensorRT headers).
trtllm-autojudge build-plugin
PLUGIN=$(pwd)/build/plugins/lib/libautojudge_trt_plugin.so

# 3. Engines: draft (stock for a target-only judge, with its hidden states as an output for DD / DD1) + AutoJudge target
#    (context-only rows, plugin after the LM head).
trtllm-autojudge build-engines --draft_model_dir "$DRAFT" --target_model_dir "$TARGET" \
    --judge "$WORK/judge.safetensors" --plugin_lib "$PLUGIN" --output_dir "$WORK" \
    --depth "$DEPTH" --max_requests 8 --max_input_len 512 --max_new_tokens 384

# 4. Run 100 GSM8K test questions (lossless first, then with the judge) and score them.
python examples/gsm8k_prompts.py write --tokenizer_dir "$TARGET" --out "$WORK/lossless.jsonl" --threshold 0
python examples/gsm8k_prompts.py write --tokenizer_dir "$TARGET" --out "$WORK/judged.jsonl" ${THRESHOLD:+--threshold "$THRESHOLD"}
for run in lossless judged; do
  python -m trtllm_autojudge.trt.runner.engines --draft_engine_dir "$WORK/engines/draft" \
      --target_engine_dir "$WORK/engines/target" --tokenizer_dir "$TARGET" --prompts_file "$WORK/$run.jsonl" \
      --max_new_tokens 384 --output "$WORK/$run.results.jsonl"
  echo "$run: $(python examples/gsm8k_prompts.py score "$WORK/$run.results.jsonl")"
done
