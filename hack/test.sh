#!/usr/bin/env bash
# Everything the tests need, from a fresh machine: system packages, the Python environment, lint, the simulated
# cluster's binaries (built once, cached) and the test suite. The session-scoped pytest fixture starts a simulated
# cluster per worker and stops it afterwards.
#
#   hack/test.sh                 the whole suite: the tests that need no cluster (niced) beside the build of the
#                                binaries and then beside the cluster tests and those that need a built CLI
#                                (marker `tools`); prints the build's and each phase's time
#   hack/test.sh ARGS...         pytest ARGS (after the build), e.g. hack/test.sh tests/unit -q
#   KS_TEST_VERSIONS="v1.21.14 ..."  with the whole suite: also build those control planes (beside the niced tests)
#                                and, after the suite, run the tests marked `versions` at each (hack/matrix.sh);
#                                KS_TEST_VERSIONS_K="<pytest -k expression>" picks a subset of them
#
# Every run prints the 15 slowest tests and the 10 that used the most CPU (KS_BUDGET_SHOWN for more); a test over
# its budget (KS_TEST_CEILING CPU seconds, or that many wall seconds times the machine's measured slowdown) fails
# unless it is marked slow with a reason (tests/budget.py).
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

# The whole suite. The tests that need no cluster start at once, at a lower priority (nice), and run to their end
# beside the build of the simulated cluster's binaries and then beside the cluster tests: those spend part of their
# time waiting on the API, and the niced tests take the cores only then (a cold build and the cluster tests get
# them first). Their output is kept apart and shown when they end.
unit_log=$(mktemp -t ks-unit-tests.XXXXXX)
build_log=$(mktemp -t ks-build-tools.XXXXXX)
build_start=$SECONDS
# In a session of its own, so that whatever way this script ends, it ends them all (trap below).
setsid bash -c 'start=$SECONDS; rc=0; nice -n 10 "${@:2}" >"$1" 2>&1 || rc=$?; echo "$rc $((SECONDS - start))" >"$1.done"' \
  unit "$unit_log" "${pytest[@]}" "${workers[@]}" -m "not cluster and not tools" -q -rs &
unit_pid=$!
trap 'kill -- -"$unit_pid" 2>/dev/null || true' EXIT
# The image test's local Debian base (debootstrap: minutes on a cold machine, nothing once cached) is made beside the
# binaries, before the cluster tests; the test then builds only the image's own layers.
base_log=$(mktemp -t ks-image-base.XXXXXX)
base_pid=
if [ "${KS_IMAGE_BASE:-local}" = local ]; then
  bash hack/image.sh base >"$base_log" 2>&1 &
  base_pid=$!
fi
build_rc=0
bash hack/build-tools.sh >"$build_log" 2>&1 || build_rc=$?
# The control planes of KS_TEST_VERSIONS (each cached once built), while the niced tests still have the cores.
for version in ${KS_TEST_VERSIONS:-}; do
  [ "$build_rc" -ne 0 ] || bash hack/build-tools.sh --kubernetes "$version" cluster >>"$build_log" 2>&1 || build_rc=$?
done
if [ -n "$base_pid" ] && ! wait "$base_pid"; then
  cat "$base_log" >&2
  echo "[test] making the image's local base failed (hack/image.sh base)" >&2
  [ "$build_rc" -ne 0 ] || build_rc=1
fi
build_time=$((SECONDS - build_start))
if [ "$build_rc" -ne 0 ]; then
  cat "$build_log" >&2
  echo "[test] building the simulated cluster's binaries or the image's base failed ($build_rc)" >&2
  exit "$build_rc"
fi
echo "[test] binaries and the image's base ready after ${build_time}s (the tests that need no cluster run beside," \
  "niced)" >&2
cluster_start=$SECONDS
cluster_rc=0
"${pytest[@]}" "${workers[@]}" -m "cluster or tools" -q -rs || cluster_rc=$?
cluster_time=$((SECONDS - cluster_start))
wait "$unit_pid" || true
read -r unit_rc unit_time <"$unit_log.done" || { unit_rc=1; unit_time=$((SECONDS - build_start)); }
echo "[test] the tests that need no cluster (run beside the build and the cluster tests):" >&2
cat "$unit_log"
versions_rc=0 versions_time=0
if [ -n "${KS_TEST_VERSIONS:-}" ]; then
  versions_start=$SECONDS
  # shellcheck disable=SC2086  # a list of versions
  bash hack/matrix.sh $KS_TEST_VERSIONS -- -q ${KS_TEST_VERSIONS_K:+-k "$KS_TEST_VERSIONS_K"} || versions_rc=$?
  versions_time=$((SECONDS - versions_start))
fi
echo "[test] build ${build_time}s; the tests that need no cluster ${unit_time}s from the start of the build;" \
  "cluster and tools tests ${cluster_time}s;${KS_TEST_VERSIONS:+ the versions matrix ($KS_TEST_VERSIONS) ${versions_time}s;}" \
  "total $((SECONDS - start))s (setup and lint $((build_start - start))s)" >&2
if [ "$unit_rc" -ne 0 ]; then
  echo "[test] the tests that need no cluster failed (exit $unit_rc; see above)" >&2
  exit "$unit_rc"
fi
[ "$cluster_rc" -ne 0 ] || exit "$versions_rc"
exit "$cluster_rc"
