#!/usr/bin/env bash
# Build the simulated cluster's binaries from pinned Go modules into a cache outside the repo.
# Each binary is built only when its versioned file is missing, so a second run costs nothing.
# Usage: build-tools.sh [cluster|shell-operator|kubectl|helm|kwok|metrics-server ...]   (default: everything)
#   KS_TOOLS_DIR  cache dir (default ~/.cache/ks-installer/bin)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
out=${KS_TOOLS_DIR:-$HOME/.cache/ks-installer/bin}
mkdir -p "$out"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
# No debug information: the binaries are stripped anyway (-s -w), and not generating it saves compile time.
nodwarf=-gcflags=all=-dwarf=false
# Some shell-operator and metrics-server tags are not in the checksum database; they are still fetched from
# the proxy.
export GONOSUMDB=github.com/flant/*,sigs.k8s.io/metrics-server

log() { printf '[build-tools] %s\n' "$*" >&2; }
have() { [ -x "$out/$1-$2" ]; }

workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT

# Create a wrapper module in $workdir/$1 requiring $2@$3; extra go.mod lines on stdin.
wrapper() {
  local dir=$workdir/$1
  mkdir -p "$dir"
  { printf 'module ks-installer.local/%s\n\ngo 1.24\n\nrequire %s %s\n' "$1" "$2" "$3"; cat; } >"$dir/go.mod"
  echo "$dir"
}

build_kubernetes() {  # names of the binaries wanted
  local v=$KUBERNETES_VERSION minor=${KUBERNETES_VERSION#v1.} dir staging b
  local bins=("$@") pkgs=()
  local missing=0
  for b in "${bins[@]}"; do
    if [ "$b" = etcd ]; then have etcd "$ETCD_VERSION" || missing=1; else have "$b" "$v" || missing=1; fi
  done
  [ $missing = 1 ] || return 0
  log "${bins[*]} (kubernetes $v, etcd $ETCD_VERSION)"
  for b in "${bins[@]}"; do
    if [ "$b" = etcd ]; then pkgs+=(go.etcd.io/etcd/server/v3); else pkgs+=("k8s.io/kubernetes/cmd/$b"); fi
  done
  go mod download -json "k8s.io/kubernetes@$v" >/dev/null
  staging=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$v.mod
  # k8s.io/kubernetes replaces its staging modules with local paths; use their published v0.Y.Z instead.
  dir=$(grep -oE '^\s+k8s\.io/[a-z0-9-]+ => \./staging' "$staging" | awk -v m="v0.$minor" '{print "replace " $1 " => " $1 " " m}' \
    | { cat; printf 'require go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION"; } | wrapper kubernetes k8s.io/kubernetes "$v")
  (cd "$dir" && go build -trimpath "$nodwarf" -ldflags="-s -w \
      -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 \
      -X k8s.io/component-base/version.gitMinor=${minor%%.*} -X k8s.io/client-go/pkg/version.gitVersion=$v" \
      -o "$workdir/kbin/" "${pkgs[@]}")
  for b in "${bins[@]}"; do
    # etcd's main package is go.etcd.io/etcd/server/v3, so go names its binary "server".
    if [ "$b" = etcd ]; then mv "$workdir/kbin/server" "$out/etcd-$ETCD_VERSION"; else mv "$workdir/kbin/$b" "$out/$b-$v"; fi
  done
}

build_shell_operator() {
  have shell-operator "$SHELL_OPERATOR_VERSION" && return 0
  log "shell-operator $SHELL_OPERATOR_VERSION"
  local dir
  # shell-operator's go.mod replaces go-openapi/validate with a fork; a wrapper module repeats that.
  dir=$(printf 'replace github.com/go-openapi/validate => github.com/flant/go-openapi-validate v0.19.12-flant.0\n' \
    | wrapper shell-operator github.com/flant/shell-operator "$SHELL_OPERATOR_VERSION")
  (cd "$dir" && go build -trimpath "$nodwarf" -ldflags="-s -w -X github.com/flant/shell-operator/pkg/app.Version=$SHELL_OPERATOR_VERSION" \
      -o "$out/shell-operator-$SHELL_OPERATOR_VERSION" github.com/flant/shell-operator/cmd/shell-operator)
}

build_plain() {  # name version package: modules without replace directives
  have "$1" "$2" && return 0
  log "$1 $2"
  GOBIN=$workdir/gobin go install -trimpath "$nodwarf" -ldflags="-s -w" "$3@$2"
  mv "$workdir/gobin/$1" "$out/$1-$2"
}

start=$(date +%s)
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(cluster shell-operator kwok helm metrics-server)
for tool in "${wanted[@]}"; do
  case $tool in
    cluster) build_kubernetes kube-apiserver kube-controller-manager kube-scheduler kubectl etcd ;;
    kubectl) build_kubernetes kubectl ;;
    shell-operator) build_shell_operator ;;
    kwok) build_plain kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok ;;
    helm) build_plain helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm ;;
    # The real server behind the simulated cluster's APIService v1beta1.metrics.k8s.io (see simcluster.py).
    metrics-server) build_plain metrics-server "$METRICS_SERVER_VERSION" sigs.k8s.io/metrics-server/cmd/metrics-server ;;
    *) log "unknown tool $tool"; exit 2 ;;
  esac
done
log "tools ready in $out ($(( $(date +%s) - start ))s)"
