#!/usr/bin/env bash
# The demo: the installer's main job on the embedded simulated cluster (see hack/demo.py).
# Usage: hack/demo.sh up [--image] [--helm] [--from-v341]|down|status      state in $KS_DEMO_DIR (default /tmp/ks-demo)
#   --image: the installer image (hack/image.sh build) runs the reconciles instead of this checkout
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/env.sh
if [ "${1:-up}" = up ]; then
  ensure_system_packages
  ensure_tools
  ensure_venv
fi
exec .venv/bin/python hack/demo.py "${@:-up}"
