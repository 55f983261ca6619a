#!/usr/bin/env bash
# The GPU check of the AutoJudge CUDA kernels: one script, a few minutes on one H200.
#   1. builds the host core and, when the TensorRT headers are found (TENSORRT_ROOT or the
#      kernel-lens wheel), the plugin library with its ptxas report (build_scripts/build_plugin.py);
#   2. builds the CUDA binding of torch.ops.autojudge for this GPU (torch.utils.cpp_extension);
#   3. check_kernels.py: the kernels against the reference on fresh random inputs, poisoned outputs,
#      for DT, DD-DT and the lookahead setups (kernel == host core == Python for those), and tree
#      logits mode on EAGLE engine steps (kernel == host core);
#   4. bench_kernels.py: median latency (CUDA graph replay) and bandwidth against a copy, and the
#      fused lookahead judge's time against DD-DT (target: at most 10 % more).
# Everything printed also goes to $OUT/gpu_check.md (default build/gpu_check/): copy the tables
# into docs/plugin.md. Needs a CUDA build of torch, numpy, nvcc, cmake and a C++ compiler.
# Exits non-zero when a step fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
RESULTS=${OUT:-build/gpu_check}
mkdir -p "$RESULTS"
exec > >(tee "$RESULTS/gpu_check.md") 2>&1
export AUTOJUDGE_PLUGIN_BUILD_DIR=${AUTOJUDGE_PLUGIN_BUILD_DIR:-build/plugins-gpu}
status=0
started=$SECONDS

echo "# tests/gpu/run_all.sh, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo '```'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || status=1
$PY -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPU', torch.cuda.is_available())"
nvcc --version | tail -n 1
echo '```'

echo "## 1. libraries (CMake)"
echo '```'
if $PY -c "from trtllm_autojudge.ops.build import cuda_toolchain_available as a; raise SystemExit(0 if a() else 1)"; then
  $PY build_scripts/build_plugin.py || status=1
  report="$AUTOJUDGE_PLUGIN_BUILD_DIR/ptxas_report.txt"
  [ -f "$report" ] && sed -n '1,/^$/p' "$report"
else
  echo "no TensorRT headers here (set TENSORRT_ROOT to build the plugin library too): host core only"
  $PY build_scripts/build_plugin.py --host-only || status=1
fi
echo '```'

echo "## 2. CUDA binding of torch.ops.autojudge"
echo '```'
t0=$SECONDS
$PY -c "from trtllm_autojudge.ops.cuda_extension import cuda_extension; print(cuda_extension().__file__)" || status=1
echo "built in $((SECONDS - t0)) s"
echo '```'

echo "## 3. kernels == reference"
echo '```'
$PY tests/gpu/check_kernels.py || status=1
echo '```'

echo "## 4. latency and bandwidth"
$PY tests/gpu/bench_kernels.py || status=1

echo
echo "run_all.sh: $([ $status -eq 0 ] && echo passed || echo FAILED) in $((SECONDS - started)) s"
exit $status
