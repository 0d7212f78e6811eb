#!/usr/bin/env bash
# The installer's image, built from the repo's Dockerfile with buildah (no daemon; chroot isolation, vfs storage).
#
#   hack/image.sh build [--base auto|public|local]   build (or find cached) and tag the image; prints its reference
#   hack/image.sh push REGISTRY/NAME:TAG [ARGS...]   push the built image (ARGS go to `buildah push`, e.g. --creds)
#   hack/image.sh ref                                the image's name (installer/version.py INSTALLER_IMAGE)
#   hack/image.sh sbom                               the built image's SBOM (SPDX 2.3 JSON; in the image:
#                                                    /opt/ks-installer/sbom.spdx.json)
#   hack/image.sh base                               make (or find) the local Debian base only
#   hack/image.sh buildah|podman ARGS...             the tool on the image store below (hack/demo.sh up --image runs
#                                                    the image with podman)
#
# --base public: the Dockerfile's default base images (debian:bookworm-slim for the build stage, a Go image that
#   builds shell-operator).
# --base local: no registry needed: a Debian bookworm base made with debootstrap from apt's Debian mirror,
#   shell-operator from hack/build-tools.sh's cache and the Python packages as wheels downloaded on this machine.
# Either way the image's last stage starts empty and holds only what the installer runs (Dockerfile, docs/image.md).
# --base auto (default): public when its images are stored or can be pulled, else local.
# The result is cached by a digest of everything it is built from: a second build only tags it again.
#   KS_IMAGE_STORE  image storage and cache (default ~/.cache/ks-installer/image)
#   KS_DEBIAN_MIRROR  Debian mirror for the local base (default: the one in apt's sources, else deb.debian.org)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
store=${KS_IMAGE_STORE:-$HOME/.cache/ks-installer/image}
bah=(buildah --root "$store/storage" --runroot "$store/run" --storage-driver vfs)
log() { printf '[image] %s\n' "$*" >&2; }

image_name() { python3 -c 'from installer.version import INSTALLER_IMAGE; print(INSTALLER_IMAGE)'; }

ensure_buildah() {
  local missing=()
  command -v buildah >/dev/null || missing+=(buildah)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  mkdir -p "$store"
}

has_image() { "${bah[@]}" inspect --type image "$1" >/dev/null 2>&1; }

# The Debian mirror apt uses (deb822 or one-line sources), for the local base.
debian_mirror() {
  [ -n "${KS_DEBIAN_MIRROR:-}" ] && { echo "$KS_DEBIAN_MIRROR"; return; }
  local url
  url=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
    | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)
  echo "${url:-http://deb.debian.org/debian}"
}

# What the local base holds (its digest names it): python3 with venv, jq, ca-certificates, useradd.
BASE_SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,jq,ca-certificates,passwd

local_base() {  # prints the base image's name; makes it once
  local mirror digest ref ctr mnt
  mirror=$(debian_mirror)
  digest=$(printf '%s\n' "$BASE_SUITE" "$BASE_PACKAGES" "$(declare -f local_base)" | sha256sum | cut -c1-16)
  ref=localhost/ks-installer-base:$BASE_SUITE-$digest
  if ! has_image "$ref"; then
    log "making the local base $ref: debootstrap $BASE_SUITE from $mirror"
    ctr=$("${bah[@]}" from --name "ks-base-$$" scratch)
    mnt=$("${bah[@]}" mount "$ctr")
    debootstrap --variant=minbase --include="$BASE_PACKAGES" "$BASE_SUITE" "$mnt" "$mirror" >"$store/debootstrap.log" 2>&1 \
      || { log "debootstrap failed: $store/debootstrap.log"; "${bah[@]}" rm "$ctr" >/dev/null; exit 1; }
    chroot "$mnt" apt-get clean
    rm -rf "$mnt"/var/lib/apt/lists/* "$mnt"/var/cache/apt/*.bin "$mnt"/usr/share/doc/* "$mnt"/usr/share/man/* \
      "$mnt"/usr/share/info/* "$mnt"/usr/share/locale/* "$mnt"/var/log/*.log "$mnt"/var/log/apt/* "$mnt"/var/cache/debconf/*-old
    "${bah[@]}" umount "$ctr" >/dev/null
    "${bah[@]}" config --env LANG=C.UTF-8 --cmd /bin/bash "$ctr"
    "${bah[@]}" commit --rm -q "$ctr" "$ref" >/dev/null
  fi
  echo "$ref"
}

# The tools stage's stand-in: the local base with hack/build-tools.sh's shell-operator already in /out, so the
# Dockerfile's build-tools.sh run finds it and builds nothing.
local_tools() {  # base
  local bin=${KS_TOOLS_DIR:-$HOME/.cache/ks-installer/bin} files=() digest ref ctr
  # shellcheck source=versions.env
  source hack/versions.env
  bash hack/build-tools.sh shell-operator
  files=("$bin/shell-operator-$SHELL_OPERATOR_VERSION")
  digest=$( (echo "$1"; sha256sum "${files[@]}" | cut -d' ' -f1) | sha256sum | cut -c1-16)
  ref=localhost/ks-installer-tools:$digest
  if ! has_image "$ref"; then
    ctr=$("${bah[@]}" from --pull-never --name "ks-tools-$$" "$1")
    "${bah[@]}" copy --chmod 0755 "$ctr" "${files[@]}" /out/ >/dev/null
    "${bah[@]}" commit --rm -q "$ctr" "$ref" >/dev/null
  fi
  echo "$ref"
}

# The engine's Python dependencies as wheels for this Python (3.11 on glibc, as bookworm's), downloaded with this
# machine's pip settings, so the build installs them without reaching PyPI itself.
local_wheels() {
  local dir deps python=python3
  [ -x .venv/bin/python ] && python=.venv/bin/python  # hack/env.sh's: it has pip
  "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    || { log "the wheels must be for Python 3.11, bookworm's: $python is not"; exit 1; }
  deps=$("$python" -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join([*p["project"]["dependencies"], *p["build-system"]["requires"]]))')
  dir=$store/wheels/$(printf '%s\n' "$deps" | sha256sum | cut -c1-16)
  if [ ! -f "$dir/.complete" ]; then
    log "downloading the engine's wheels to $dir"
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    "$python" -m pip download -q --only-binary=:all: --dest "$dir" $deps
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# Digest of everything the image is built from: the files the Dockerfile copies, this script and the bases.
inputs_digest() {  # base-id tools-id
  { printf '%s\n' "$@"
    find Dockerfile .dockerignore pyproject.toml hack/image.sh hack/image_rootfs.py hack/image_sbom.py \
      hack/build-tools.sh hack/versions.env installer hooks roles playbooks -type f ! -path '*/__pycache__/*' \
      ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-32
}

# The image's size as `buildah images` shows it (its layers unpacked, e.g. "180 MB").
image_size() {  # image
  "${bah[@]}" images --format '{{.Size}}' "$1" | head -n1
}

SBOM=/opt/ks-installer/sbom.spdx.json

# The built image's SBOM, read from its filesystem.
sbom() {
  local ctr mnt
  ctr=$("${bah[@]}" from --pull-never --name "ks-sbom-$$" "localhost/$(image_name)")
  mnt=$("${bah[@]}" mount "$ctr")
  cat "$mnt$SBOM" || { "${bah[@]}" rm "$ctr" >/dev/null; exit 1; }
  "${bah[@]}" rm "$ctr" >/dev/null
}

build() {
  local mode=auto debian_image=docker.io/library/debian:bookworm-slim go_image=docker.io/library/golang:1.26-bookworm
  local args=() volumes=() image digest stamp start=$SECONDS id
  [ "${1:-}" = --base ] && { mode=$2; shift 2; }
  case $mode in auto|public|local) ;; *) log "--base auto|public|local"; exit 2 ;; esac
  ensure_buildah
  image=$(image_name)
  if [ "$mode" = auto ]; then
    mode=local
    if { has_image "$debian_image" || timeout 60 "${bah[@]}" pull -q "$debian_image" >/dev/null 2>&1; } \
      && { has_image "$go_image" || timeout 120 "${bah[@]}" pull -q "$go_image" >/dev/null 2>&1; }; then
      mode=public
    fi
  fi
  if [ "$mode" = local ]; then
    debian_image=$(local_base)
    go_image=$(local_tools "$debian_image")
    local wheels
    wheels=$(local_wheels)
    args+=(--pull-never --build-arg "PIP_INSTALL_OPTS=--no-index --find-links=/wheels")
    volumes+=(--volume "$wheels:/wheels:ro")
  fi
  digest=$(inputs_digest "$mode" "$("${bah[@]}" inspect --type image -f '{{.FromImageID}}' "$debian_image" 2>/dev/null)" \
    "$("${bah[@]}" inspect --type image -f '{{.FromImageID}}' "$go_image" 2>/dev/null)")
  stamp=$store/built/$digest
  if [ -f "$stamp" ] && id=$(cat "$stamp") && has_image "$id"; then
    "${bah[@]}" tag "$id" "$image"
    log "cached: $image (inputs $digest, $((SECONDS - start))s)"
  else
    log "building $image with $mode bases ($debian_image, $go_image)"
    "${bah[@]}" bud --isolation chroot --layers=false --format oci "${args[@]}" "${volumes[@]}" \
      --build-arg "DEBIAN_IMAGE=$debian_image" --build-arg "GO_IMAGE=$go_image" \
      --label "io.ks-installer.inputs=$digest" -t "$image" -f Dockerfile . >"$store/build.log" 2>&1 \
      || { tail -n 40 "$store/build.log" >&2; log "build failed: $store/build.log"; exit 1; }
    id=$("${bah[@]}" inspect --type image -f '{{.FromImageID}}' "$image")
    mkdir -p "$store/built"
    echo "$id" >"$stamp"
    log "built $image in $((SECONDS - start))s (log: $store/build.log)"
  fi
  log "size: $(image_size "$image") (goal: at most 250 MB)"
  log "SBOM: $SBOM in the image (hack/image.sh sbom prints it)"
  echo "localhost/$image"
}

case ${1:-} in
  build) shift; build "$@" ;;
  push)
    [ $# -ge 2 ] || { log "usage: hack/image.sh push REGISTRY/NAME:TAG [buildah push args]"; exit 2; }
    ensure_buildah
    "${bah[@]}" push "${@:3}" "localhost/$(image_name)" "docker://$2"
    log "pushed $2: set image.repository/image.tag (chart) or the Deployment's image (manifest) to it" ;;
  base) ensure_buildah; local_base ;;
  sbom) ensure_buildah; sbom ;;
  ref) image_name ;;
  buildah) shift; exec "${bah[@]}" "$@" ;;
  podman)  # runc: crun refuses this machine's hybrid cgroup hierarchy
    shift
    command -v podman >/dev/null && command -v runc >/dev/null || {
      log "installing podman runc"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null; }
    exec podman --root "$store/storage" --runroot "$store/run" --storage-driver vfs --runtime runc "$@" ;;
  *) sed -n '2,21p' "$0" >&2; exit 2 ;;
esac
