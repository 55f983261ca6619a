#!/usr/bin/env bash
# Fresh machine -> virtualenv with everything -> the demo on the embedded default (SmolLM2-135M pair,
# held-out GSM8K questions). Extra arguments go to `trtllm-autojudge demo` (e.g. `--questions 4`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
VENV=${AUTOJUDGE_VENV:-.venv}
exec "$VENV/bin/trtllm-autojudge" demo "$@"
