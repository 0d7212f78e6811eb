"""The installer's image as a user deploys it: `hack/image.sh build` makes it (or finds it cached), and
`hack/demo.sh up --image` runs its entrypoint against a simulated cluster as the manifest's pod would (its
ServiceAccount token, env and volumes, a read-only root filesystem, user 1002), and `kubectl logs` of the
installer's pod shows that container's output. On it, upstream's own CI job (ks-installer v3.4.1's
.github/workflows/e2e-TEST.yml with scripts/check_cluster_status.sh, command for command): a first install, then ten
components switched on, each step waiting for `Welcome to KubeSphere` in the pod's log and then for every pod to be
Running or Completed. Then the image's own checks: the welcome box and the modules' logs are inside the container,
the pod log reads as upstream's, and an edit of the cc runs only what it changes. Both share one image, cluster
and container."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from installer.version import INSTALLER_IMAGE

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
WELCOME = "###              Welcome to KubeSphere!           ###"
LOG_WAIT = 900
"""check_cluster_status.sh waits `timeout 1800` for the welcome line on a real cluster; the job here ends sooner."""
STATUS_WAIT = 300
"""Its `timeout 1800 bash -c wait_status_ok`, likewise."""
PLUGINS = ('{"spec":{"servicemesh":{"enabled":true},"devops":{"enabled":true},"alerting":{"enabled":true},'
           '"auditing":{"enabled":true},"console":{"enableMultiLogin":true},"events":{"enabled":true},'
           '"logging":{"enabled":true},"metrics_server":{"enabled":true},'
           '"network":{"networkpolicy":{"enabled":true}},"openpitrix":{"store":{"enabled":true}}}}')
"""The workflow's "Test plugin" patch, byte for byte."""


def demo(command: str, state: Path, *flags: str, timeout: float) -> subprocess.CompletedProcess[str]:
    # The local base unless told otherwise: no registry is tried (KS_IMAGE_BASE=auto tries the public images).
    env = {**os.environ, "KS_DEMO_DIR": str(state), "KS_IMAGE_BASE": os.environ.get("KS_IMAGE_BASE", "local")}
    env.pop("KUBECONFIG", None)
    return subprocess.run([sys.executable, str(REPO / "hack" / "demo.py"), command, *flags], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def in_container(name: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "hack" / "image.sh"), "podman", "exec", name, "sh", "-c", script],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def image_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`hack/demo.sh up --image --no-cc`: the image built (or cached), the simulated cluster, the manifest applied
    and its container running as the installer's pod, no cc yet; its state dir. `down` afterwards."""
    state = tmp_path_factory.mktemp("image") / "demo"
    try:
        up = demo("up", state, "--image", "--no-cc", timeout=1800)
        assert up.returncode == 0, up.stderr[-3000:]
        yield state
    finally:
        down = demo("down", state, timeout=120)
        assert down.returncode == 0, down.stderr


class Shell:
    """The commands of upstream's job as its runner has them: `kubectl` on PATH, KUBECONFIG the cluster's; each
    command's output is kept, as the job's log has it."""

    def __init__(self, state: Path) -> None:
        self.env = {**os.environ, "KUBECONFIG": str(state / "cluster" / "kubeconfig"),
                    "PATH": f"{state / 'cluster' / 'bin'}:{os.environ['PATH']}"}
        self.output: list[str] = []

    def run(self, *argv: str, timeout: float = 300) -> str:
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        self.output += [f"$ {' '.join(argv)}", *proc.stdout.splitlines(), *proc.stderr.splitlines()]
        assert proc.returncode == 0, self.output[-40:]  # the script runs with `set -o errexit`
        return proc.stdout

    def echo(self, line: str) -> None:
        self.output.append(line)


def check_installer_ok(sh: Shell) -> None:
    """check_cluster_status.sh's check_installer_ok::

        kubectl -n kubesphere-system wait --timeout=180s --for=condition=Available deployment/ks-installer
        kubectl -n kubesphere-system wait --timeout=180s --for=condition=Ready $(kubectl -n kubesphere-system get pod -l app=ks-installer -oname)
        while IFS= read -r line; do
            echo "$line"
            if [[ $line =~ "Welcome to KubeSphere" ]]; then return; fi
        done < <(timeout 1800 kubectl logs -n kubesphere-system deploy/ks-installer -f --tail 1)
        echo "ks-installer not output 'Welcome to KubeSphere'"
        exit 1
    """  # noqa: E501 - the script's lines as they are
    sh.echo("waiting for ks-installer pod ready")
    sh.run("kubectl", "-n", "kubesphere-system", "wait", "--timeout=180s", "--for=condition=Available",
           "deployment/ks-installer", timeout=200)
    pods = sh.run("kubectl", "-n", "kubesphere-system", "get", "pod", "-l", "app=ks-installer", "-oname").split()
    sh.run("kubectl", "-n", "kubesphere-system", "wait", "--timeout=180s", "--for=condition=Ready", *pods,
           timeout=200)
    sh.echo("waiting for KubeSphere ready")
    logs = subprocess.Popen(["timeout", str(LOG_WAIT), "kubectl", "logs", "-n", "kubesphere-system",
                             "deploy/ks-installer", "-f", "--tail", "1"], env=sh.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert logs.stdout is not None
    try:
        for line in iter(logs.stdout.readline, ""):
            sh.echo(line.rstrip("\n"))
            if "Welcome to KubeSphere" in line:
                return
    finally:
        os.killpg(logs.pid, signal.SIGKILL)  # `timeout` and the kubectl it runs
        _, errors = logs.communicate(timeout=30)
        sh.output += errors.splitlines()
    sh.echo("ks-installer not output 'Welcome to KubeSphere'")
    raise AssertionError("\n".join(sh.output[-60:]))


def wait_status_ok(sh: Shell) -> None:
    """check_cluster_status.sh's wait_status_ok, under `timeout 1800 bash -c wait_status_ok` (its loop counts n up
    twice per check that passes: 30 checks in a row, a second apart)::

        for ((n=0;n<60;n++))
        do
            OK=`kubectl get pod -A| grep -E 'Running|Completed' | wc | awk '{print $1}'`
            Status=`kubectl get pod -A | sed '1d' | wc | awk '{print $1}'`
            echo "Success rate: ${OK}/${Status}"
            if [[ $OK == $Status ]]
            then
                n=$((n+1))
            else
                n=0
                kubectl get pod -A | grep -vE 'Running|Completed'
            fi
            sleep 1
        done
    """
    deadline = time.monotonic() + STATUS_WAIT
    n = 0
    while n < 60:
        assert time.monotonic() < deadline, sh.output[-60:]  # timeout's exit 124 ends the script: the job fails
        rows = sh.run("kubectl", "get", "pod", "-A").splitlines()
        ok = sum(1 for row in rows if re.search("Running|Completed", row))
        status = len(rows[1:])
        sh.echo(f"Success rate: {ok}/{status}")
        if ok == status:
            n += 1
        else:
            n = 0
            sh.output += [row for row in rows if not re.search("Running|Completed", row)]
        time.sleep(1)
        n += 1


def check_cluster_status(sh: Shell) -> None:
    """`bash scripts/check_cluster_status.sh`: check_installer_ok, then wait_status_ok."""
    check_installer_ok(sh)
    wait_status_ok(sh)


def cc_status(sh: Shell) -> dict[str, Any]:
    return json.loads(sh.run("kubectl", "-n", "kubesphere-system", "get", "cc", "ks-installer", "-o", "json"))[
        "status"]


@pytest.mark.slow(reason="upstream's CI job on the image: a first install, then ten components on, each followed "
                         "by check_cluster_status.sh's log wait and its 30 pod checks a second apart: 113 s (31 "
                         "CPU-s) on two cores at load 5-11, 208-227 s at load 15-20")
def test_upstream_ci_job_passes_on_the_image(image_demo: Path, tmp_path: Path) -> None:
    sh = Shell(image_demo)
    log = image_demo / "shell-operator" / "shell-operator.log"
    # "Deploy KubeSphere to Kind". Its first two seds point the manifest at the image kind loaded and keep its
    # pull policy IfNotPresent: here the image runs as the demo's container, and the manifest (as `up` applied it)
    # names the image as built, IfNotPresent. The third, on a copy:
    #   sed -i 's/jenkinsMemoryReq: .*/jenkinsMemoryReq: 200Mi/g' deploy/cluster-configuration.yaml
    cc = tmp_path / "cluster-configuration.yaml"
    cc.write_text(re.sub(r"jenkinsMemoryReq: .*", "jenkinsMemoryReq: 200Mi",
                         (REPO / "deploy" / "cluster-configuration.yaml").read_text()))
    sh.run("kubectl", "apply", "-f", str(REPO / "deploy" / "kubesphere-installer.yaml"))
    sh.run("kubectl", "apply", "-f", str(cc))
    check_cluster_status(sh)
    first = cc_status(sh)
    assert (first["modulesReady"], first["core"]["version"]) == ("4/4", "v3.4.1"), first

    # "Test plugin"
    sh.run("kubectl", "-n", "kubesphere-system", "patch", "cc", "ks-installer", "--type", "merge", "--patch", PLUGINS)
    check_cluster_status(sh)

    status = cc_status(sh)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", (status, sh.output[-60:])
    on = {"servicemesh", "devops", "alerting", "auditing", "events", "logging", "metrics_server", "openpitrix"}
    assert {m for m in on if status["modules"].get(m, {}).get("phase") == "Installed"} == on, status["modules"]
    assert re.fullmatch(r"(\d+)/\1", status["modulesReady"]), status["modulesReady"]
    assert any("console.enableMultiLogin" in note for note in status["migrations"]), status["migrations"]  # legacy
    # The box after each reconcile that ended with every module installed, and never from the schedule's ticks
    # (every minute), which found nothing to do.
    pod_log = log.read_text()
    readies = len(re.findall(r"^Reconcile finished, Ready", pod_log, re.M))
    assert pod_log.count(WELCOME) == readies >= 2, pod_log[-3000:]
    assert re.search(r"Execute hook .* binding=Retry failed modules$", pod_log, re.M), pod_log[-3000:]


@pytest.mark.slow(reason="run alone, it builds the installer image when it is not cached (debootstrap + pip: "
                         "minutes on a cold machine; seconds cached), then installs the default platform with it")
def test_the_image_runs_as_the_installers_pod(image_demo: Path) -> None:
    """`up --image` again: it reuses the container (creating the default cc if the job above did not run) and
    prints the welcome box from inside it."""
    state = image_demo
    up = demo("up", state, "--image", "--timeout", "600", timeout=1800)
    assert up.returncode == 0, up.stderr[-3000:]
    assert WELCOME in up.stdout
    assert re.search(r"ks-installer\s+True\s+False\s+(\d+)/\1\s+Installed\s+v3\.4\.1", up.stdout), up.stdout
    record = json.loads((state / "shell-operator.pid").read_text())
    assert record["image"] == f"localhost/{INSTALLER_IMAGE}"
    name = record["container"]

    # The reconcile ran in the image: its welcome file and module logs are in the container's /kubesphere.
    running = in_container(name, "cat /kubesphere/playbooks/kubesphere_running")
    assert running.returncode == 0 and WELCOME in running.stdout, running.stderr
    results = in_container(name, "ls /kubesphere/results; wc -c < /kubesphere/results/ks-core/stdout")
    assert {"ks-core", "monitoring"} <= set(results.stdout.split()), results.stdout
    assert int(results.stdout.split()[-1]) > 0
    # As the manifest's pod: user 1002, nothing writable outside its volumes, the image's own code and tools.
    probe = in_container(name, "id -u; touch /opt/ks-installer/x 2>&1; touch /hooks/x 2>&1; "
                               "for c in python3 kubectl helm jq; do command -v $c; done; "
                               "ls /opt/ks-installer/roles | wc -l")
    lines = probe.stdout.splitlines()
    assert lines[0] == "1002"
    assert sum("Read-only file system" in line for line in lines) == 2, probe.stdout
    assert lines[3:7] == ["/opt/ks-installer/venv/bin/python3", "/usr/local/bin/kubectl", "/usr/local/bin/helm",
                          "/usr/bin/jq"], probe.stdout
    assert int(lines[-1]) > 10
    mounts = json.loads(subprocess.run(["bash", str(REPO / "hack" / "image.sh"), "podman", "inspect", name],
                                       capture_output=True, text=True, timeout=60, check=True).stdout)[0]
    assert not any(str(REPO) in str(m.get("Source", "")) for m in mounts["Mounts"])  # nothing of the checkout
    # The pod log as the docs' `kubectl logs -l 'app in (ks-install, ks-installer)' -f` shows it: the hook's lines
    # as printed (upstream's), the operator's own with time and level.
    log_path = state / "shell-operator" / "shell-operator.log"
    pod_log = log_path.read_text().splitlines()
    bindings = r"\S+Z INFO     : .*Kubernetes bindings for hook are enabled successfully"
    assert any(re.match(bindings, line) for line in pod_log), pod_log[:40]
    assert {"Start installing ks-core", WELCOME} <= set(pod_log), pod_log[-60:]
    assert any(re.fullmatch(r"task ks-core status is successful  \(\d/4\)", line) for line in pod_log)
    assert not any(line.startswith("{") for line in pod_log), [ln for ln in pod_log if ln.startswith("{")][:5]
    assert not [line for line in pod_log if "file is skipped" in line], pod_log[:40]  # nothing but the hook

    # `kubectl edit cc`: the container's next reconcile runs the one module the change affects.
    mark = len(log_path.read_text())
    subprocess.run([str(state / "cluster" / "bin" / "kubectl"), f"--kubeconfig={state / 'cluster' / 'kubeconfig'}",
                    "-n", "kubesphere-system", "patch", "cc", "ks-installer", "--type=merge", "-p",
                    json.dumps({"spec": {"monitoring": {"node_exporter": {"port": 9101}}}})],
                   check=True, capture_output=True, timeout=60)
    deadline = time.monotonic() + 300
    while True:
        new = log_path.read_text()[mark:]
        planned = new.find("Plan: upgrade monitoring")
        if (planned >= 0 and "Reconcile finished" in new[planned:]) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert planned >= 0 and "Reconcile finished, Ready" in new[planned:], new[-3000:]
    assert re.findall(r"^Start (?:installing|upgrading|uninstalling) ([\w-]+)$", new, re.M) == ["monitoring"]
