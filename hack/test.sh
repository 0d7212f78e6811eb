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
# Two pytest workers, each with its own simulated cluster (a test file stays on one worker): the cluster tests
# spend much of their time waiting on the API, so the two cores overlap them. Not with a shared cluster
# (KS_SIM_KUBECONFIG) nor when the caller chose (-n / -p no:xdist).
workers=()
if [ -z "${KS_SIM_KUBECONFIG:-}" ] && [[ " $* " != *" -n "* && " $* " != *"xdist"* ]]; then
  workers=(-n "${KS_TEST_WORKERS:-2}" --dist loadfile)
fi
exec .venv/bin/pytest "${workers[@]}" "$@"
