#!/usr/bin/env bash
# Everything the tests need, from a fresh machine: system packages, the simulated cluster's binaries
# (built once, cached), the Python environment, then lint and the whole test suite.
# The session-scoped pytest fixture starts the simulated cluster and stops it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/env.sh
ensure_system_packages
ensure_tools
ensure_venv
.venv/bin/ruff check .
exec .venv/bin/pytest "$@"
