#!/usr/bin/env bash
# Everything the tests need, from a fresh machine: system packages, the Python environment, lint, the simulated
# cluster's binaries (built once, cached) and the test suite. The session-scoped pytest fixture starts a simulated
# cluster per worker and stops it afterwards.
#
#   hack/test.sh                 the whole suite: the tests that need no cluster run (at nice 19) while the binaries
#                                build and then beside the cluster tests; prints the build's and each phase's time
#   hack/test.sh ARGS...         pytest ARGS (after the build), e.g. hack/test.sh tests/unit -q
#
# Every run prints the 15 slowest tests; a test over KS_TEST_CEILING seconds fails unless it is marked slow with a
# reason (tests/conftest.py).
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

# The whole suite, three things at once: the binaries build (a cached build returns at once), the tests that need
# no cluster run at the lowest CPU priority (nice 19: they take what the build and the cluster tests leave idle,
# the cluster tests' waits on the API among it), and the cluster tests start as soon as the binaries are ready.
build_log=$(mktemp -t ks-build-tools.XXXXXX)
unit_log=$(mktemp -t ks-unit-tests.XXXXXX)
build_start=$SECONDS
bash hack/build-tools.sh >"$build_log" 2>&1 &
build_pid=$!
nice -n 19 "${pytest[@]}" "${workers[@]}" -m "not cluster" -q -rs >"$unit_log" 2>&1 &
unit_pid=$!
build_rc=0
wait "$build_pid" || build_rc=$?
build_time=$((SECONDS - build_start))
if [ "$build_rc" -ne 0 ]; then
  cat "$build_log" >&2
  echo "[test] building the simulated cluster's binaries failed ($build_rc)" >&2
  kill "$unit_pid" 2>/dev/null || true
  exit "$build_rc"
fi
echo "[test] binaries ready after ${build_time}s; the cluster tests start (the tests that need no cluster go on beside them)" >&2
cluster_start=$SECONDS
cluster_rc=0
"${pytest[@]}" "${workers[@]}" -m cluster -q -rs || cluster_rc=$?
cluster_time=$((SECONDS - cluster_start))
unit_rc=0
wait "$unit_pid" || unit_rc=$?
echo "[test] the tests that need no cluster (started with the build, at nice 19):" >&2
cat "$unit_log"
echo "[test] build ${build_time}s; cluster tests ${cluster_time}s; no-cluster tests ended after $((SECONDS - build_start))s; total $((SECONDS - start))s" >&2
if [ "$unit_rc" -ne 0 ]; then
  echo "[test] the tests that need no cluster failed (exit $unit_rc; see above)" >&2
  exit "$unit_rc"
fi
exit "$cluster_rc"
