#!/usr/bin/env bash
# Fresh machine -> virtualenv with everything -> the whole CPU test suite. `.ci/run` calls this.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k acceptance`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
VENV=${AUTOJUDGE_VENV:-.venv}
exec "$VENV/bin/python" -m pytest -q -ra tests "$@"
