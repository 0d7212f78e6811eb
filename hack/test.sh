#!/usr/bin/env bash
# Everything the tests need, from a fresh machine: system packages, the Python environment, lint, the simulated
# cluster's binaries (built once, cached) and the test suite. The session-scoped pytest fixture starts a simulated
# cluster per worker and stops it afterwards.
#
#   hack/test.sh                 the whole suite: the tests that need no cluster run while the binaries build,
#                                then the cluster tests and those that need a built CLI (marker `tools`);
#                                prints the build's and each phase's time
#   hack/test.sh ARGS...         pytest ARGS (after the build), e.g. hack/test.sh tests/unit -q
#
# Every run prints the 15 slowest tests and the 10 that used the most CPU; a test over its budget (KS_TEST_CEILING
# CPU seconds, or that many wall seconds times the machine's measured slowdown) fails unless it is marked slow with a
# reason (tests/budget.py).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/env.sh
start=$SECONDS
ensure_system_packages
ensure_venv
.venv/bin/ruff check .
pytest=(.venv/bin/pytest --durations=15)

# Two pytest workers, each with its own simulated cluster (a test file stays on one worker): the cluster tests
# spend much of their time waiting on the API, so the two cores overlap them. Not with a shared cluster
# (KS_SIM_KUBECONFIG) nor when the caller chose (-n / -p no:xdist).
workers=()
if [ -z "${KS_SIM_KUBECONFIG:-}" ] && [[ " $* " != *" -n "* && " $* " != *"xdist"* ]]; then
  workers=(-n "${KS_TEST_WORKERS:-2}" --dist loadfile)
fi

if [ $# -gt 0 ]; then
  ensure_tools
  exec "${pytest[@]}" "${workers[@]}" "$@"
fi

# The whole suite. The binaries build in the background while the tests that need no cluster run (a cached build
# returns at once). The cluster tests wait for the build, the tests that need no cluster for nothing: those run at a
# lower priority (nice), so a cold build takes the cores it can use and they fill the rest, instead of both running
# at half speed.
build_log=$(mktemp -t ks-build-tools.XXXXXX)
build_start=$SECONDS
bash hack/build-tools.sh >"$build_log" 2>&1 &
build_pid=$!
unit_rc=0
nice -n 10 "${pytest[@]}" "${workers[@]}" -m "not cluster and not tools" -q -rs || unit_rc=$?
unit_time=$((SECONDS - build_start))
build_rc=0
wait "$build_pid" || build_rc=$?
build_time=$((SECONDS - build_start))
if [ "$build_rc" -ne 0 ]; then
  cat "$build_log" >&2
  echo "[test] building the simulated cluster's binaries failed ($build_rc)" >&2
  exit "$build_rc"
fi
echo "[test] binaries ready after ${build_time}s (built beside the tests that need no cluster: ${unit_time}s)" >&2
cluster_start=$SECONDS
cluster_rc=0
"${pytest[@]}" "${workers[@]}" -m "cluster or tools" -q -rs || cluster_rc=$?
cluster_time=$((SECONDS - cluster_start))
echo "[test] build ${build_time}s (the tests that need no cluster beside it: ${unit_time}s); cluster and tools tests" \
  "${cluster_time}s; total $((SECONDS - start))s (setup and lint $((build_start - start))s)" >&2
if [ "$unit_rc" -ne 0 ]; then
  echo "[test] the tests that need no cluster failed (exit $unit_rc; see above)" >&2
  exit "$unit_rc"
fi
exit "$cluster_rc"
