#!/bin/sh
# KubeKey's wait for the installer (CheckKubeSphereStatus in cmd/kk/pkg/kubesphere/tasks.go, kubekey tag v3.1.12)
# with the installer's base directory ($1) standing for the pod's /kubesphere. KubeKey runs, in a loop,
#   kubectl exec -n kubesphere-system <ks-installer pod> -- ls /kubesphere/playbooks/kubesphere_running
# and once that succeeds
#   kubectl exec -n kubesphere-system <ks-installer pod> -- cat /kubesphere/playbooks/kubesphere_running
# and stops at the first non-empty output, which it prints (the welcome box). Here `ls` and `cat` run on the file
# itself; KubeKey polls as fast as its SSH round trips allow, this script every 0.1 s.
set -u
file="$1/playbooks/kubesphere_running"
while :; do
  if ls "$file" >/dev/null 2>&1; then
    out=$(cat "$file" 2>/dev/null) && [ -n "$out" ] && { printf '%s\n' "$out"; exit 0; }
  fi
  sleep 0.1
done
