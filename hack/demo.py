#!/usr/bin/env python3
"""The installer's main job on the simulated cluster, the way a user meets it.

    up      start the simulated cluster, `kubectl apply` the installer manifest (with --helm: install its Helm
            chart), run shell-operator with this repo's hooks under the installer's ServiceAccount (as the
            pod does), create the default
            cluster-configuration unless a cc exists (your edits are kept), wait until a reconcile of the
            running shell-operator has finished on the cc's current generation and is Ready there (or print what
            failed, from its status, and exit 1), print the welcome box and the cc. A shell-operator it starts is a
            new pod: its first run is a full reconcile, whose end the wait sees (the Lease it released).
            With --image: the installer image instead of this checkout (hack/image.sh build, cached; podman
            runs its entrypoint as the manifest's pod: the ServiceAccount's token, the container's env and volumes,
            a read-only root; hack/container_operator.py); the welcome box is read inside the container.
            With --from-v341 (a new demo only): first make the cluster what ks-installer v3.4.1 left
            (hack/v341_cluster.py: the default platform with redis and OpenLDAP as upstream v3.4.1's own templates
            and charts rendered it, tests/parity/upstream-v341/default, applied with kubectl and helm as its tasks
            did, upstream's cc status, the original's installer Deployment), then switch as docs/switching.md's "From
            ks-installer v3.4.1" says (scale the original to 0, apply the manifest) and, once Ready, print what
            the takeover did: objects deleted, workloads restarted (docs/switching.md lists the three that are),
            `helm list -A`, status.adoption and the takeover's log lines
    down    stop shell-operator and the cluster, remove the state dir
    status  what runs, and where the logs are

State lives in $KS_DEMO_DIR (default /tmp/ks-demo). `up` is idempotent: what already runs is reused.
The Deployment of the manifest gets a kwok-simulated pod (label app=ks-installer); the reconciles are
done by the local shell-operator, which plays that pod.
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from installer_manifest import CHART, adopt
from shelloperator import ShellOperator
from simcluster import SimCluster, SimClusterError, kill_tree, log_tail, pid_alive, process_tree, spawn, tool_path

REPO = Path(__file__).resolve().parents[1]
SERVICE_ACCOUNT = ("kubesphere-system", "ks-installer")
LEASE = "ks-installer"
"""The Lease in kubesphere-system that every full reconcile holds (installer.settings.LEASE_NAME)."""
DEMO_ENTRIES = {"cluster", "kubesphere", "shell-operator", "shell-operator.pid", "installer.kubeconfig", "v341",
                "v341.json", "serviceaccount", "pod-logs.json", "pod-logs.pid", "pod-logs.log"}
POD_LOGS = REPO / "hack" / "pod_logs.py"
#: The original's installer (deploy/kubesphere-installer.yaml of v3.4.1, its workload and RBAC, abridged).
V341_INSTALLER = [
    {"apiVersion": "v1", "kind": "ServiceAccount",
     "metadata": {"name": "ks-installer", "namespace": "kubesphere-system"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "ks-installer"},
     "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "ks-installer"},
     "subjects": [{"kind": "ServiceAccount", "name": "ks-installer", "namespace": "kubesphere-system"}],
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ks-installer"}},
    {"apiVersion": "apps/v1", "kind": "Deployment",
     "metadata": {"name": "ks-installer", "namespace": "kubesphere-system", "labels": {"app": "ks-installer"}},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "ks-installer"}},
              "template": {"metadata": {"labels": {"app": "ks-installer"}},
                           "spec": {"serviceAccountName": "ks-installer", "containers": [
                               {"name": "installer", "image": "kubesphere/ks-installer:v3.4.1",
                                "imagePullPolicy": "IfNotPresent",
                                "volumeMounts": [{"mountPath": "/etc/localtime", "name": "host-time",
                                                  "readOnly": True}]}],
                                    "volumes": [{"hostPath": {"path": "/etc/localtime", "type": ""},
                                                 "name": "host-time"}]}}}},
]


def state_dir() -> Path:
    return Path(os.environ.get("KS_DEMO_DIR") or "/tmp/ks-demo")


def say(msg: str) -> None:
    print(f"[demo] {msg}", file=sys.stderr, flush=True)


def operator_pid(root: Path) -> int | None:
    """The demo's shell-operator pid, if that process still runs (the binary is checked: pids get reused)."""
    pid_file = root / "shell-operator.pid"
    if not pid_file.exists():
        return None
    record = json.loads(pid_file.read_text())
    pid = record["pid"]
    return pid if pid_alive(pid, "podman" if record.get("container") else str(tool_path("shell-operator"))) else None


def operator_container(root: Path) -> str | None:
    """The name of the demo's installer container (``up --image``), if it was started that way."""
    pid_file = root / "shell-operator.pid"
    return json.loads(pid_file.read_text()).get("container") if pid_file.exists() else None


def operator_started(root: Path) -> float:
    """When the demo's shell-operator was started (epoch seconds; 0 if the pid file does not say)."""
    pid_file = root / "shell-operator.pid"
    return float(json.loads(pid_file.read_text()).get("started") or 0) if pid_file.exists() else 0.0


def start_cluster(root: Path) -> SimCluster:
    cluster_dir = root / "cluster"
    cluster = SimCluster(cluster_dir)
    if cluster.running():
        say(f"reusing the simulated cluster in {cluster_dir}")
        return SimCluster.attach(cluster.kubeconfig)
    cluster.start()
    atexit.unregister(cluster.stop)  # it outlives this command until `down`
    return cluster


def start_operator(cluster: SimCluster, root: Path, image: str | None = None) -> float:
    """Start shell-operator (in ``image`` when given) unless it runs; return when the running one was started
    (epoch seconds)."""
    pid = operator_pid(root)
    if pid is not None and bool(operator_container(root)) == bool(image):
        say(f"reusing shell-operator (pid {pid}" + (f", container {operator_container(root)})" if image else ")"))
        return operator_started(root)
    if pid is not None:
        raise SimClusterError("another kind of shell-operator runs (with or without --image): `hack/demo.sh down` "
                              "first")
    if image:
        return start_container(cluster, root, image)
    kubeconfig = cluster.service_account_kubeconfig(*SERVICE_ACCOUNT, root / "installer.kubeconfig")
    operator = ShellOperator(kubeconfig, REPO / "hooks", work_dir=root / "shell-operator",
                             env={"KS_BASE_DIR": str(root / "kubesphere")},  # the image's /kubesphere
                             path_prepend=[cluster.bin_dir], die_with_parent=False)
    mark = operator.mark()  # a restarted operator appends to the same log: read only what it writes
    started = time.time()  # before it starts: each of its reconciles takes the Lease after this
    new_pod(root, operator.log_path)
    operator.start()
    atexit.unregister(operator.stop)
    assert operator.popen is not None
    (root / "shell-operator.pid").write_text(json.dumps({"pid": operator.popen.pid, "log": str(operator.log_path),
                                                         "started": started}))
    operator.wait_for_log(r"Kubernetes bindings for hook are enabled successfully", timeout=60, since=mark)
    say(f"shell-operator runs (pid {operator.popen.pid}), log: {operator.log_path}")
    return started


def new_pod(root: Path, log: Path) -> None:
    """A new operator is a new pod: its ``/kubesphere`` (an emptyDir) has no welcome file yet, so its first run is a
    full reconcile (installer.engine.fastpath settles only where the welcome was written), which takes the Lease;
    its log (``kubectl logs`` of the installer's pod) starts with what the new operator writes to ``log``."""
    (root / "kubesphere" / "playbooks" / "kubesphere_running").unlink(missing_ok=True)
    offset = log.stat().st_size if log.exists() else 0
    pods = [{"namespace": SERVICE_ACCOUNT[0], "prefix": "ks-installer-", "log": str(log), "offset": offset}]
    (root / "pod-logs.json").write_text(json.dumps({"pods": pods}))


def start_pod_logs(cluster: SimCluster, root: Path) -> None:
    """hack/pod_logs.py on the cluster's node addresses (unless it runs): ``kubectl logs`` of the installer's pod
    shows the output of the operator that plays it."""
    pid_file = root / "pod-logs.pid"
    if pid_file.exists() and pid_alive(int(pid_file.read_text()), sys.executable):
        return
    log = root / "pod-logs.log"
    mark = log.stat().st_size if log.exists() else 0
    proc = spawn([sys.executable, str(POD_LOGS), str(root / "pod-logs.json"), *(ip for _, ip, _ in cluster.nodes)],
                 log)
    pid_file.write_text(str(proc.pid))
    deadline = time.monotonic() + 30
    while b"serving container logs" not in log.read_bytes()[mark:]:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SimClusterError(f"hack/pod_logs.py did not start:\n{log_tail(log)}")
        time.sleep(0.2)


def stop_pod_logs(root: Path) -> None:
    pid_file = root / "pod-logs.pid"
    if pid_file.exists() and pid_alive(pid := int(pid_file.read_text()), sys.executable):
        kill_tree(process_tree(pid))
    pid_file.unlink(missing_ok=True)


def start_container(cluster: SimCluster, root: Path, image: str) -> float:
    """The installer image's entrypoint under the ks-installer ServiceAccount, as the manifest's pod."""
    import base64

    from container_operator import ContainerOperator

    token = cluster.kubectl("create", "token", SERVICE_ACCOUNT[1], "-n", SERVICE_ACCOUNT[0],
                            "--duration=24h").stdout.strip()
    config = json.loads(cluster.kubectl("config", "view", "--raw", "-o", "json").stdout)
    ca_pem = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    operator = ContainerOperator(image, cluster.server, token, ca_pem, root)
    mark = operator.mark()
    started = time.time()
    new_pod(root, operator.log_path)
    operator.start()
    assert operator.popen is not None
    (root / "shell-operator.pid").write_text(json.dumps(operator.record(started)))
    operator.wait_for_log(r"Kubernetes bindings for hook are enabled successfully", timeout=120, since=mark)
    say(f"shell-operator runs in container {operator.name} ({image}), log: {operator.log_path}")
    return started


def build_v341(cluster: SimCluster, root: Path) -> None:
    """Make the demo cluster what ks-installer v3.4.1 left (once: v341.json records it)."""
    import yaml
    from kubernetes import config
    from v341_cluster import DEFAULT, Builder, ClusterTarget, revisions

    if (root / "v341.json").exists():
        say("reusing the v3.4.1 cluster built earlier")
        return
    if cluster.kubectl("get", "cc", "ks-installer", "-n", "kubesphere-system", check=False).returncode == 0:
        raise SimClusterError("--from-v341 needs a new demo (`hack/demo.sh down` first): a cc exists")
    work = root / "v341"
    work.mkdir(parents=True, exist_ok=True)
    say("building the cluster ks-installer v3.4.1 left (kubectl apply, helm install, its cc status) ...")
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "kubesphere-installer.yaml").read_text())
            if d and d["kind"] in ("CustomResourceDefinition", "Namespace")]  # the CRD is v3.4.1's too
    (work / "installer.yaml").write_text(yaml.safe_dump_all([*docs, *V341_INSTALLER]))
    cluster.kubectl("apply", "-f", str(work / "installer.yaml"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    begin = time.monotonic()
    made = Builder(ClusterTarget(api, cluster.kubeconfig, work), cluster, work, DEFAULT).build()
    say(f"v3.4.1 cluster built in {time.monotonic() - begin:.0f}s: {len(made.objects)} objects, releases "
        + ", ".join(sorted(made.releases)))
    (root / "v341.json").write_text(json.dumps({"objects": made.objects, "refs": made.refs,
                                                "releases": made.releases, "revisions": revisions(api, made)}))
    say("the cc's status as the original left it, and its installer:")
    print(cluster.kubectl("get", "cc", "ks-installer", "-n", "kubesphere-system", "-o",
                          "jsonpath={.status}").stdout)
    print(cluster.kubectl("get", "deploy", "ks-installer", "-n", "kubesphere-system").stdout)
    say("switching: kubectl -n kubesphere-system scale deploy ks-installer --replicas=0")
    cluster.kubectl("scale", "deploy", "ks-installer", "-n", "kubesphere-system", "--replicas=0")


def report_v341(cluster: SimCluster, root: Path) -> None:
    """What the takeover did to what the original left: objects deleted, workloads restarted, releases, leftovers
    and the takeover's lines in the installer's log."""
    from kubernetes import config
    from v341_cluster import UPSTREAM_ROLLS, V341Cluster, deleted, restarted, revisions

    saved = json.loads((root / "v341.json").read_text())
    made = V341Cluster(objects=saved["objects"], refs={k: tuple(v) for k, v in saved["refs"].items()},
                       releases=saved["releases"])
    before = {k: (v[0], tuple(v[1])) for k, v in saved["revisions"].items()}
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    gone, rolled = deleted(api, made), restarted(before, revisions(api, made))
    print(f"objects the original made: {len(made.objects)}, deleted: {len(gone)}" + (f" {gone}" if gone else ""))
    print(f"workloads: {len(before)}, restarted: {len(rolled)}" + (f" {rolled}" if rolled else ""))
    print("$ helm list -A")
    print(subprocess.run([str(tool_path("helm")), f"--kubeconfig={cluster.kubeconfig}", "list", "-A"],
                         capture_output=True, text=True, check=False).stdout)
    adoption = cluster.kubectl("get", "cc", "ks-installer", "-n", "kubesphere-system", "-o",
                               "jsonpath={.status.adoption}").stdout
    print("status.adoption: " + json.dumps(json.loads(adoption or "null"), indent=2))
    print("takeover in the installer's log:")
    log = root / "shell-operator" / "shell-operator.log"
    for line in log.read_text().splitlines() if log.exists() else []:
        try:
            msg = str(json.loads(line).get("msg", ""))
        except ValueError:
            msg = line
        if any(m in msg for m in ("Retired Helm release", "kept the credentials", "Left as they are",
                                  "Helm releases no module")):
            print("  " + msg)
    if gone or set(rolled) - UPSTREAM_ROLLS:
        raise SimClusterError("the takeover deleted objects or restarted workloads docs/switching.md does not list")


def up(root: Path, timeout: int, helm: bool = False, from_v341: bool = False, image: bool = False,
       no_cc: bool = False) -> int:
    root.mkdir(parents=True, exist_ok=True)
    image_ref = None
    if image:
        from container_operator import build_image

        image_ref = build_image(os.environ.get("KS_IMAGE_BASE", "auto"))
    cluster = start_cluster(root)
    if from_v341:
        build_v341(cluster, root)
    if helm:
        say("helm upgrade --install ks-installer deploy/charts/ks-installer")
        adopt(cluster.kubectl, "ks-installer", "default")  # what an earlier kubectl apply made
        subprocess.run([str(tool_path("helm")), f"--kubeconfig={cluster.kubeconfig}", "upgrade", "--install",
                        "ks-installer", str(CHART), "--namespace", "default"], check=True, capture_output=True)
    else:
        say("kubectl apply -f deploy/kubesphere-installer.yaml")
        cluster.kubectl("apply", "-f", str(REPO / "deploy" / "kubesphere-installer.yaml"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")
    start_pod_logs(cluster, root)
    started = start_operator(cluster, root, image_ref)
    if no_cc:
        say("no cc created (--no-cc): kubectl apply -f deploy/cluster-configuration.yaml, or your own")
        print_where(root, cluster)
        return 0
    if cluster.kubectl("get", "cc", "ks-installer", "-n", "kubesphere-system", check=False).returncode == 0:
        say("keeping the existing cc/ks-installer (and your edits to it)")
    else:
        say("kubectl create -f deploy/cluster-configuration.yaml")
        cluster.kubectl("create", "-f", str(REPO / "deploy" / "cluster-configuration.yaml"))
    say(f"waiting for the reconcile of the current spec (up to {timeout}s) ...")
    status = wait_reconciled(cluster, timeout, started)
    if not _condition(status, "Ready"):
        say("not Ready: " + "; ".join(problems(status)))
        print(cluster.kubectl("get", "cc", "-n", "kubesphere-system").stdout)
        return 1
    running = root / "kubesphere" / "playbooks" / "kubesphere_running"
    if (container := operator_container(root)) is not None:
        from container_operator import exec_in

        say(f"podman exec {container} cat /kubesphere/playbooks/kubesphere_running")
        print(exec_in(container, "cat", "/kubesphere/playbooks/kubesphere_running"))
    else:
        print(running.read_text() if running.exists() else "(no kubesphere_running yet)")
    print(cluster.kubectl("get", "cc", "-n", "kubesphere-system").stdout)
    print(cluster.kubectl("get", "deploy", "-n", "kubesphere-system").stdout)
    if from_v341:
        report_v341(cluster, root)
    print_where(root, cluster)
    return 0


def _condition(status: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in status.get("conditions") or [])


def lease_spec(cluster: SimCluster) -> dict[str, Any]:
    """The spec of the Lease every full reconcile holds ({} when there is none)."""
    got = cluster.kubectl("get", "lease", LEASE, "-n", "kubesphere-system", "-o", "json", check=False)
    return (json.loads(got.stdout).get("spec") or {}) if got.returncode == 0 else {}


def reconciled_since(lease: dict[str, Any], started: float) -> bool:
    """Whether a full reconcile that started after ``started`` (epoch seconds) has finished: ``lease`` (the Lease's
    spec) was acquired after it (its acquireTime is the reconcile's start) and has been released."""
    if lease.get("holderIdentity") or not lease.get("acquireTime"):
        return False
    return dt.datetime.fromisoformat(lease["acquireTime"]).timestamp() >= started


def reconciled(cc: dict[str, Any], lease: dict[str, Any], started: float) -> bool:
    """Whether ``cc`` (read after ``lease``) shows the finished reconcile of its current generation by the operator
    started at ``started``: that operator's first run (a full reconcile, see :func:`new_pod`) has finished, and
    the status, Ready included, speaks of the cc's generation. Ready True left by an earlier operator, or by an
    edit's older generation, does not count."""
    generation = (cc.get("metadata") or {}).get("generation")
    status = cc.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
    if ready is None or generation is None or _condition(status, "Reconciling"):
        return False
    observed = ready.get("observedGeneration", status.get("observedGeneration"))
    return (observed, status.get("observedGeneration")) == (generation, generation) \
        and reconciled_since(lease, started)


def wait_reconciled(cluster: SimCluster, timeout: float, started: float) -> dict[str, Any]:
    """The cc's status once :func:`reconciled` (Ready or not); a status naming no failures after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        lease = lease_spec(cluster)  # before the cc: its status is then at least as new
        got = cluster.kubectl("get", "cc", "ks-installer", "-n", "kubesphere-system", "-o", "json", check=False)
        cc = json.loads(got.stdout) if got.returncode == 0 else {}
        if reconciled(cc, lease, started):
            return cc["status"]
        if time.monotonic() > deadline:
            fresh = reconciled_since(lease, started)
            return {**((cc.get("status") or {}) if fresh else {}), "conditions": [
                {"type": "Ready", "status": "False", "message": f"no finished reconcile after {int(timeout)}s"}]}
        time.sleep(2)


def problems(status: dict[str, Any]) -> list[str]:
    """What keeps the cc from Ready, as its status says: failed modules with their task, else the condition."""
    failed = [f"{name} failed at '{m.get('failedTask')}': {m.get('message')}" if m.get("failedTask")
              else f"{name} {m.get('phase')}: {m.get('message')}"
              for name, m in sorted((status.get("modules") or {}).items())
              if m.get("phase") in ("Failed", "Blocked", "Interrupted")]
    ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
    return failed or [str(ready.get("message") or "unknown")]


def print_where(root: Path, cluster: SimCluster) -> None:
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    print(f'export PATH="{cluster.bin_dir}:{REPO / ".venv" / "bin"}:$PATH" KS_BASE_DIR={root / "kubesphere"}'
          "   # kubectl, python -m installer (as in the pod)")
    print("kubectl edit cc ks-installer -n kubesphere-system      # change the spec; only affected modules run")
    print("kubectl logs -n kubesphere-system deploy/ks-installer -f   # the installer pod's log")
    print(f"pod log (shell-operator):  {root / 'shell-operator' / 'shell-operator.log'}")
    print(f"module logs:               {root / 'kubesphere' / 'results'}/<module>/stdout")
    if (container := operator_container(root)) is not None:
        print(f"the installer's container: hack/image.sh podman exec {container} ls /kubesphere/results  "
              "(/kubesphere is that results dir's parent)")


def down(root: Path) -> int:
    pid = operator_pid(root)
    if (container := operator_container(root)) is not None:
        from container_operator import stop

        stop(container)
    if pid is not None:
        kill_tree(process_tree(pid))
    (root / "shell-operator.pid").unlink(missing_ok=True)
    stop_pod_logs(root)
    SimCluster(root / "cluster").stop()
    if root.exists() and {p.name for p in root.iterdir()} <= DEMO_ENTRIES:  # never a user's own directory
        shutil.rmtree(root, ignore_errors=True)
    say(f"stopped; removed {root}")
    return 0


def status(root: Path) -> int:
    cluster = SimCluster(root / "cluster")
    if not cluster.running():
        say(f"no demo in {root}")
        return 1
    pid = operator_pid(root)
    say(f"shell-operator: {f'running (pid {pid})' if pid else 'not running'}")
    attached = SimCluster.attach(cluster.kubeconfig)
    print(attached.kubectl("get", "cc", "-n", "kubesphere-system").stdout)
    print_where(root, attached)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--timeout", type=int, default=900, help="seconds to wait for Ready (up)")
    parser.add_argument("--helm", action="store_true",
                        help="install the installer with its Helm chart instead of kubectl apply (up)")
    parser.add_argument("--image", action="store_true",
                        help="run the installer image (hack/image.sh build) instead of this checkout's hooks (up)")
    parser.add_argument("--no-cc", action="store_true",
                        help="create no cc and wait for no reconcile: apply your own cc (up)")
    parser.add_argument("--from-v341", action="store_true",
                        help="a new demo over a cluster that ks-installer v3.4.1 installed (up)")
    args = parser.parse_args(argv)
    root = state_dir()
    try:
        if args.command == "up":
            return up(root, args.timeout, args.helm, args.from_v341, args.image, args.no_cc)
        if args.command == "down":
            return down(root)
        return status(root)
    except SimClusterError as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
