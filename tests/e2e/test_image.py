"""The installer's image as a user deploys it: `hack/image.sh build` makes it (or finds it cached), and
`hack/demo.sh up --image` runs its entrypoint against a simulated cluster as the manifest's pod would (its
ServiceAccount token, env and volumes, a read-only root filesystem, user 1002), and `kubectl logs` of the
installer's pod shows that container's output. On it, upstream's own CI job (ks-installer v3.4.1's
.github/workflows/e2e-TEST.yml with scripts/check_cluster_status.sh, command for command): a first install, then ten
components switched on, each step waiting for `Welcome to KubeSphere` in the pod's log and then for every pod to be
Running or Completed. Then the image's own checks: the welcome box and the modules' logs are inside the container,
the pod log reads as upstream's, and an edit of the cc runs only what it changes; then every module on at once, and
`uninstall --all` run in the container removes every module. The image's contents are checked from its filesystem:
only what the installer runs (no shell, pip, apt, dpkg or setuid file), its size, its SBOM. All share one image,
cluster and container."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from all_on import ALL_ON, spec
from installer_state import DEFAULT_CC

from installer.modules import MODULES
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
ALL_WAIT = 900
"""Every module on at once, and their removal, each: about 90 s on two cores."""
IMAGE_SH = REPO / "hack" / "image.sh"
SBOM = "/opt/ks-installer/sbom.spdx.json"
SIZE_LIMIT = 250_000_000
"""The image's size (its layers unpacked), bytes."""


def demo(command: str, state: Path, *flags: str, timeout: float) -> subprocess.CompletedProcess[str]:
    # The local base unless told otherwise: no registry is tried (KS_IMAGE_BASE=auto tries the public images).
    env = {**os.environ, "KS_DEMO_DIR": str(state), "KS_IMAGE_BASE": os.environ.get("KS_IMAGE_BASE", "local")}
    env.pop("KUBECONFIG", None)
    return subprocess.run([sys.executable, str(REPO / "hack" / "demo.py"), command, *flags], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def image_tool(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``hack/image.sh ARGS`` (buildah or podman on the image store)."""
    return subprocess.run(["bash", str(IMAGE_SH), *argv], capture_output=True, text=True, timeout=timeout, check=False)


def in_container(name: str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``podman exec`` of a program in the container (as ``kubectl exec`` in the pod: the image has no shell)."""
    return image_tool("podman", "exec", name, *argv, timeout=timeout)


@pytest.fixture(scope="module")
def image_build() -> subprocess.CompletedProcess[str]:
    """``hack/image.sh build`` (the demo's base choice; cached by its inputs: the demo's build below only tags it)."""
    built = image_tool("build", "--base", os.environ.get("KS_IMAGE_BASE", "local"), timeout=1800)
    assert built.returncode == 0, built.stderr[-3000:]
    return built


@pytest.fixture(scope="module")
def image_root(image_build: subprocess.CompletedProcess[str]) -> Iterator[Path]:
    """The built image's root filesystem, mounted read-only from the image store."""
    ref = image_build.stdout.split()[-1]
    made = image_tool("buildah", "from", "--pull-never", "--name", f"ks-image-test-{os.getpid()}", ref)
    assert made.returncode == 0, made.stderr
    container = made.stdout.split()[-1]
    try:
        mounted = image_tool("buildah", "mount", container)
        assert mounted.returncode == 0, mounted.stderr
        yield Path(mounted.stdout.split()[-1])
    finally:
        image_tool("buildah", "rm", container)


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


PROBE = """
import json, os, shutil
def write(path):
    try:
        open(path, "w").close()
        return "written"
    except OSError as exc:
        return exc.strerror
print(json.dumps({"uid": os.getuid(), "written": {p: write(p) for p in ("/opt/ks-installer/x", "/hooks/x")},
                  "which": {c: shutil.which(c) for c in ("python3", "jq", "env", "ls", "cat", "sh", "bash", "pip",
                                                         "apt-get", "dpkg", "kubectl", "helm")},
                  "roles": len(os.listdir("/opt/ks-installer/roles"))}))
"""
"""What the pod test asks the container's own Python (no shell to ask)."""


#: Names that no file or directory of the image may have: package managers and their data, Ansible's test tool,
#: shells, privilege tools.
FORBIDDEN = re.compile(r"^(pip[\d.]*|pip-.*|.*\.whl|python-wheels|ensurepip|apt|apt-.*|dpkg|dpkg-.*|ansible-test"
                       r"|ansible_test|sh|bash|dash|ash|zsh|busybox|su|sudo|setpriv)$")
PROGRAMS = ("usr/bin/python3.11", "usr/bin/jq", "usr/bin/env", "usr/bin/ls", "usr/bin/cat", "shell-operator",
            "hooks/kubesphere/installRunner.py", "opt/ks-installer/venv/bin/ansible-playbook")
"""What the installer runs (env: the hook's `#!/usr/bin/env python3`; ls and cat: KubeKey's `kubectl exec`)."""


def walk(root: Path) -> Iterator[Path]:
    """Every file, directory and symlink of the image, relative to its root (symlinks not followed)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            yield (Path(dirpath) / name).relative_to(root)


def test_the_image_holds_only_what_the_installer_runs(image_root: Path) -> None:
    paths = list(walk(image_root))
    assert [str(p) for p in paths if FORBIDDEN.match(p.name)] == []
    special = [str(p) for p in paths if (image_root / p).lstat().st_mode & (stat.S_ISUID | stat.S_ISGID)]
    assert special == []  # no setuid or setgid file
    gone = ("var/lib/dpkg", "var/lib/apt", "etc/apt", "usr/share/doc", "usr/share/man", "usr/share/locale",
            "usr/lib/python3.11/test", "usr/lib/python3.11/idlelib", "usr/lib/python3/dist-packages")
    assert [p for p in gone if (image_root / p).exists()] == []
    assert [str(p) for p in paths if p.name == "tests" and (image_root / p).is_dir()] == []  # packages' test suites
    for program in PROGRAMS:
        assert os.access(image_root / program, os.X_OK), program
    assert (image_root / "opt/ks-installer/venv/lib/python3.11/site-packages/ansible/plugins/test/core.py").is_file()
    passwd = (image_root / "etc" / "passwd").read_text()
    assert re.search(r"^kubesphere:x:1002:1002:", passwd, re.M), passwd


def test_the_image_size_is_at_most_250_mb(image_build: subprocess.CompletedProcess[str]) -> None:
    ref = image_build.stdout.split()[-1]
    size = int(image_tool("podman", "image", "inspect", "--format", "{{.Size}}", ref).stdout)
    print(f"\nimage size: {size / 1e6:.1f} MB ({ref})")
    assert size <= SIZE_LIMIT, f"{size / 1e6:.1f} MB"
    assert re.search(r"^\[image\] size: \d+(\.\d+)? MB", image_build.stderr, re.M), image_build.stderr[-2000:]


def test_the_sbom_names_the_image_and_lists_what_is_inside(image_build: subprocess.CompletedProcess[str],
                                                          image_root: Path) -> None:
    assert f"[image] SBOM: {SBOM} in the image" in image_build.stderr
    sbom = json.loads((image_root / SBOM.lstrip("/")).read_text())
    assert sbom["spdxVersion"] == "SPDX-2.3"
    # the image as `python -m installer images` names it (upstream's registry settings: no mirror prefix)
    images = subprocess.run([sys.executable, "-m", "installer", "images", "--desired",
                             str(REPO / "deploy" / "cluster-configuration.yaml"), "--upstream", "-o", "json"],
                            capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(images.stdout)["ks-installer"] == [sbom["name"]] == [INSTALLER_IMAGE]
    packages = {p["SPDXID"]: p for p in sbom["packages"]}
    purls = {ref["referenceLocator"] for p in sbom["packages"] for ref in p.get("externalRefs", [])}
    python = packages["SPDXRef-deb-python3.11-minimal"]
    assert re.fullmatch(r"3\.11\.\d+-\S+", python["versionInfo"]), python
    pins = dict(re.match(r"([\w-]+)==(\S+)", d).groups()  # type: ignore[union-attr]
                for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
    assert f"pkg:pypi/ansible-core@{pins['ansible-core']}" in purls
    # every Python distribution in the virtualenv, and every Debian package a library of the image comes from
    site = image_root / "opt/ks-installer/venv/lib/python3.11/site-packages"
    dists = {m.name.split("-")[0].lower().replace("_", "-") for m in site.glob("*.dist-info")}
    listed = {p["name"].lower().replace("_", "-") for p in sbom["packages"] if p["SPDXID"].startswith("SPDXRef-pypi-")}
    assert dists == listed
    assert {"SPDXRef-deb-libc6", "SPDXRef-deb-libssl3", "SPDXRef-deb-jq", "SPDXRef-deb-libjq1",
            "SPDXRef-deb-coreutils", "SPDXRef-deb-ca-certificates"} <= set(packages)
    operator = packages["SPDXRef-bin-shell-operator"]
    versions = dict(re.findall(r"^(\w+)=(\S+)$", (REPO / "hack" / "versions.env").read_text(), re.M))
    assert operator["versionInfo"] == versions["SHELL_OPERATOR_VERSION"]
    digest = hashlib.sha256((image_root / "shell-operator").read_bytes()).hexdigest()
    assert operator["checksums"] == [{"algorithm": "SHA256", "checksumValue": digest}]


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

    # The reconcile ran in the image: its welcome file and module logs are in the container's /kubesphere, read as
    # KubeKey reads the welcome box (`kubectl exec` of ls, then cat).
    listed = in_container(name, "ls", "/kubesphere/playbooks/kubesphere_running")
    assert listed.returncode == 0 and listed.stdout.strip() == "/kubesphere/playbooks/kubesphere_running", listed
    running = in_container(name, "cat", "/kubesphere/playbooks/kubesphere_running")
    assert running.returncode == 0 and WELCOME in running.stdout, running.stderr
    results = in_container(name, "ls", "/kubesphere/results")
    assert {"ks-core", "monitoring"} <= set(results.stdout.split()), results.stdout
    assert in_container(name, "cat", "/kubesphere/results/ks-core/stdout").stdout
    # As the manifest's pod: user 1002, nothing writable outside its volumes, the image's own code and programs, and
    # no shell (`kubectl exec ... sh` fails).
    probe = json.loads(in_container(name, "python3", "-I", "-c", PROBE).stdout)
    assert probe["uid"] == 1002
    assert probe["written"] == {"/opt/ks-installer/x": "Read-only file system", "/hooks/x": "Read-only file system"}
    assert probe["which"] == {"python3": "/opt/ks-installer/venv/bin/python3", "jq": "/usr/bin/jq",
                              "env": "/usr/bin/env", "ls": "/usr/bin/ls", "cat": "/usr/bin/cat", "sh": None,
                              "bash": None, "pip": None, "apt-get": None, "dpkg": None, "kubectl": None, "helm": None}
    assert probe["roles"] > 10
    shell = in_container(name, "sh", "-c", "true")
    assert shell.returncode != 0 and "executable file not found" in shell.stderr, shell
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


@pytest.mark.slow(reason="every module on at once in the image, then `uninstall --all` in its container: each module's "
                         "install and uninstall on the read-only root as user 1002: 174 s (29 CPU-s) on two cores")
def test_every_module_installs_and_uninstalls_in_the_image(image_demo: Path, tmp_path: Path) -> None:
    """The cc with every component on (applied over whatever the tests before left), then `kubectl exec deploy/
    ks-installer -- python3 -m installer uninstall --all` (docs/uninstall.md) in the container."""
    sh = Shell(image_demo)
    name = json.loads((image_demo / "shell-operator.pid").read_text())["container"]
    log_path = image_demo / "shell-operator" / "shell-operator.log"
    every = {m.name for m in MODULES}
    cc = copy.deepcopy(DEFAULT_CC)
    cc["spec"] = spec(ALL_ON)
    (tmp_path / "all-on.yaml").write_text(yaml.safe_dump(cc))
    sh.run("kubectl", "apply", "-f", str(tmp_path / "all-on.yaml"))
    deadline = time.monotonic() + ALL_WAIT
    while True:
        status = cc_status(sh)
        installed = {m for m, s in (status.get("modules") or {}).items() if s.get("phase") == "Installed"}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        if installed >= every and ready:
            break
        assert time.monotonic() < deadline, (sorted(every - installed), log_path.read_text()[-3000:])
        time.sleep(3)
    # each module's install ran in this container (in this test, or for the default and upstream's plugins before)
    pod_log = log_path.read_text()
    assert set(re.findall(r"^Start installing ([\w-]+)$", pod_log, re.M)) >= every, pod_log[-3000:]

    removed = in_container(name, "python3", "-m", "installer", "uninstall", "--all", timeout=ALL_WAIT)
    assert removed.returncode == 0, (removed.stdout[-3000:], removed.stderr[-3000:])
    output = removed.stdout + removed.stderr
    assert set(re.findall(r"Start uninstalling ([\w-]+)$", output, re.M)) == every, output[-3000:]
    left = subprocess.run(["kubectl", "-n", "kubesphere-system", "get", "cc,secret", "-o", "name"], env=sh.env,
                          capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert "clusterconfiguration.installer.kubesphere.io/ks-installer" not in left, left
    assert "secret/ks-installer-state" not in left, left
