#!/usr/bin/env bash
# The Kubernetes version matrix: the tests marked `versions` (the default cc's first install, every component on in
# one change, ks-core against v3.4.1 and its ServiceAccount token, the uninstall rounds, the switch from ks-installer
# v3.4.1 with every component, the installer's chart with the pinned helm and kubectl) on a simulated cluster of each
# version, one version after the other.
#
#   hack/matrix.sh                          v1.21.14 v1.23.17 v1.26.15 and the pinned KUBERNETES_VERSION
#   hack/matrix.sh v1.21.14 v1.23.17        those versions only
#   hack/matrix.sh v1.21.14 -- -n 0 -x      pytest arguments after --
#
# First, once (no cluster; KS_MATRIX_PARITY=0 leaves it out), tests/unit/test_version_parity.py with its output shown:
# what each module renders at each version compared with ks-installer v3.4.1's rendering there. Then each version
# runs `KS_KUBERNETES_VERSION=<version> hack/test.sh -m versions` (which builds that control plane first if it is not
# cached: minutes, once). Prints a line per run (passed or failed, its time, pytest's summary) and exits 1 if any
# failed. See docs/kubernetes-versions.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=versions.env
source hack/versions.env

versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  versions+=("$1")
  shift
done
[ "${1:-}" != "--" ] || shift
[ ${#versions[@]} -gt 0 ] || versions=(v1.21.14 v1.23.17 v1.26.15 "$KUBERNETES_VERSION")

results=()
failed=0
summary_of() { grep -E '^(=+ )?[0-9]+ (passed|failed|error).* in [0-9.]+s' "$1" | tail -n 1 | tr -d '=' | xargs || true; }
# step LABEL COMMAND...: run COMMAND (its output shown, and kept in a log) and add its result line to the summary.
step() {
  local label=$1 log start rc=0 summary
  shift
  log=$(mktemp -t ks-matrix.XXXXXX)
  echo "[matrix] $label: $* (log: $log)" >&2
  start=$SECONDS
  "$@" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
  summary=$(summary_of "$log")
  if [ "$rc" -eq 0 ]; then
    results+=("$label: passed in $((SECONDS - start))s (${summary:-no summary})")
  else
    failed=1
    results+=("$label: FAILED (exit $rc) in $((SECONDS - start))s (${summary:-no summary}; log: $log)")
  fi
}
if [ "${KS_MATRIX_PARITY:-1}" != 0 ]; then
  step "content per version" hack/test.sh tests/unit/test_version_parity.py -q -n 0 -s
fi
for version in "${versions[@]}"; do
  step "$version" env KS_KUBERNETES_VERSION="$version" hack/test.sh -m versions -rs "$@"
done
echo "[matrix] results:" >&2
printf '[matrix]   %s\n' "${results[@]}" >&2
exit "$failed"
