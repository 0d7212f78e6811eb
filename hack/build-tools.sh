#!/usr/bin/env bash
# Build the simulated cluster's binaries from pinned Go modules into a cache outside the repo.
# Each binary is built only when its versioned file is missing, so a second run costs nothing.
# Usage: build-tools.sh [--kubernetes v1.X.Y] [cluster|shell-operator|kubectl|helm|kwok|metrics-server ...]
#   (default: everything)
#   KS_TOOLS_DIR           cache dir (default ~/.cache/ks-installer/bin)
#   KS_KUBERNETES_VERSION  the control plane's version (as --kubernetes; default KUBERNETES_VERSION of versions.env):
#                          kube-apiserver, kube-controller-manager and kube-scheduler are built at it, each as
#                          <name>-<version> beside the others; kubectl, etcd and the other tools keep their pins
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
out=${KS_TOOLS_DIR:-$HOME/.cache/ks-installer/bin}
mkdir -p "$out"

wanted=()
while [ $# -gt 0 ]; do
  case $1 in
    --kubernetes) export KS_KUBERNETES_VERSION=${2:?--kubernetes needs a version}; shift 2 ;;
    --kubernetes=*) export KS_KUBERNETES_VERSION=${1#*=}; shift ;;
    *) wanted+=("$1"); shift ;;
  esac
done
# The chosen control plane version (checked) and the kwok release that simulates its nodes (hack/k8s_versions.py);
# without a chosen version, the pins (the image's build stage has only this script and versions.env).
if [ -n "${KS_KUBERNETES_VERSION:-}" ]; then
  control_plane=$(python3 "$here/k8s_versions.py" kubernetes)
  kwok_version=$(python3 "$here/k8s_versions.py" kwok)
else
  control_plane=$KUBERNETES_VERSION kwok_version=$KWOK_VERSION
fi

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

# One Go module for the cluster, shell-operator, helm and metrics-server: Kubernetes' published staging modules at
# the cluster's minor, and the tools' shared dependencies (client-go, apiserver, grpc, ...) resolved once, so each
# build finds most of its packages already compiled in the build cache by the one before. (kwok builds alone: its
# releases need a newer apimachinery than the cluster's, or one with a field the cluster's has removed.)
tools_module() {
  local v=$KUBERNETES_VERSION minor=${KUBERNETES_VERSION#v1.} dir=$workdir/tools staging
  [ -f "$dir/go.mod" ] && { echo "$dir"; return; }
  mkdir -p "$dir"
  go mod download -json "k8s.io/kubernetes@$v" >/dev/null
  staging=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$v.mod
  {
    printf 'module ks-installer.local/tools\n\ngo 1.24\n\n'
    printf 'require %s %s\n' k8s.io/kubernetes "$v" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" \
      github.com/flant/shell-operator "$SHELL_OPERATOR_VERSION" helm.sh/helm/v3 "$HELM_VERSION" \
      sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION"
    # k8s.io/kubernetes replaces its staging modules with local paths; use their published v0.Y.Z instead (every
    # tool then builds against the cluster's own client-go and apiserver libraries).
    grep -oE '^\s+k8s\.io/[a-z0-9-]+ => \./staging' "$staging" | awk -v m="v0.$minor" '{print "replace " $1 " => " $1 " " m}'
    # shell-operator's go.mod replaces go-openapi/validate with a fork; the wrapper repeats that.
    printf 'replace github.com/go-openapi/validate => github.com/flant/go-openapi-validate v0.19.12-flant.0\n'
  } >"$dir/go.mod"
  echo "$dir"
}

# go build in the tools module: output dir, ldflags, packages.
build_in_tools() {
  local dest=$1 ldflags=$2 dir
  shift 2
  dir=$(tools_module)
  (cd "$dir" && go build -trimpath "$nodwarf" -ldflags="-s -w $ldflags" -o "$dest/" "$@")
}

build_kubernetes() {  # names of the binaries wanted
  local v=$KUBERNETES_VERSION minor=${KUBERNETES_VERSION#v1.} b
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
  build_in_tools "$workdir/kbin" "-X k8s.io/component-base/version.gitVersion=$v \
      -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor%%.*} \
      -X k8s.io/client-go/pkg/version.gitVersion=$v" "${pkgs[@]}"
  for b in "${bins[@]}"; do
    # etcd's main package is go.etcd.io/etcd/server/v3, so go names its binary "server".
    if [ "$b" = etcd ]; then mv "$workdir/kbin/server" "$out/etcd-$ETCD_VERSION"; else mv "$workdir/kbin/$b" "$out/$b-$v"; fi
  done
}

# kube-apiserver, kube-controller-manager and kube-scheduler at a version other than the pinned one, in a module of
# their own (hack/control_plane_module.py): k8s.io/kubernetes at that version with its staging modules at their
# published v0.Y.Z (the nearest served patch where that one is not), and the OpenAPI definitions generated where the
# module lacks them. The other tools' module cannot take part: its shared dependencies are the pinned release's.
# Tag providerless leaves out the in-tree cloud providers (removed from Kubernetes in v1.31, and the simulated
# cluster runs no cloud controller): a third less to compile and smaller binaries.
build_control_plane() {  # version
  local v=$1 minor=${1#v1.} dir=$workdir/control-plane b begin missing=0
  for b in kube-apiserver kube-controller-manager kube-scheduler; do have "$b" "$v" || missing=1; done
  [ $missing = 1 ] || return 0
  log "kube-apiserver kube-controller-manager kube-scheduler (kubernetes $v, a module of its own)"
  begin=$(date +%s)
  python3 "$here/control_plane_module.py" gomod "$v" "$dir"
  python3 "$here/control_plane_module.py" openapi "$dir"
  (cd "$dir" && go build -trimpath "$nodwarf" -tags=providerless -ldflags="-s -w \
      -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 \
      -X k8s.io/component-base/version.gitMinor=${minor%%.*} -X k8s.io/client-go/pkg/version.gitVersion=$v" \
      -o "$dir/bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler)
  for b in kube-apiserver kube-controller-manager kube-scheduler; do mv "$dir/bin/$b" "$out/$b-$v"; done
  log "kubernetes $v control plane built in $(( $(date +%s) - begin ))s"
}

build_plain() {  # name version package: a module built on its own dependencies
  have "$1" "$2" && return 0
  log "$1 $2"
  GOBIN=$workdir/gobin go install -trimpath "$nodwarf" -ldflags="-s -w" "$3@$2"
  mv "$workdir/gobin/$1" "$out/$1-$2"
}

build_tool() {  # name version package [ldflags]
  have "$1" "$2" && return 0
  log "$1 $2"
  build_in_tools "$workdir/bin-$1" "${4:-}" "$3"
  mv "$workdir/bin-$1/$(basename "$3")" "$out/$1-$2"
}

start=$(date +%s)
[ ${#wanted[@]} -gt 0 ] || wanted=(cluster shell-operator kwok helm metrics-server)
for tool in "${wanted[@]}"; do
  case $tool in
    cluster)
      if [ "$control_plane" = "$KUBERNETES_VERSION" ]; then
        build_kubernetes kube-apiserver kube-controller-manager kube-scheduler kubectl etcd
      else
        build_kubernetes kubectl etcd
        build_control_plane "$control_plane"
      fi ;;
    kubectl) build_kubernetes kubectl ;;
    shell-operator) build_tool shell-operator "$SHELL_OPERATOR_VERSION" github.com/flant/shell-operator/cmd/shell-operator \
      "-X github.com/flant/shell-operator/pkg/app.Version=$SHELL_OPERATOR_VERSION" ;;
    kwok) build_plain kwok "$kwok_version" sigs.k8s.io/kwok/cmd/kwok ;;
    helm) build_tool helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm ;;
    # The real server behind the simulated cluster's APIService v1beta1.metrics.k8s.io (see simcluster.py).
    metrics-server) build_tool metrics-server "$METRICS_SERVER_VERSION" sigs.k8s.io/metrics-server/cmd/metrics-server ;;
    *) log "unknown tool $tool"; exit 2 ;;
  esac
done
log "tools ready in $out ($(( $(date +%s) - start ))s)"
