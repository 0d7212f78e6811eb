#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback with kwok-simulated nodes, for tests and the demo.

etcd, kube-apiserver (RBAC), kube-controller-manager, kube-scheduler and kwok run as local processes built by
``hack/build-tools.sh``; kwok plays the kubelet of three Nodes, so Deployments become Available and PVCs of
the default StorageClass bind. Usage::

    python hack/simcluster.py up|down|env|status      # state dir: $KS_SIM_DIR (default /tmp/ks-sim)
    python hack/simcluster.py up --latency probes     # pods Ready after their pulls and probes (POD_READY_SECONDS)
    python hack/simcluster.py up --kubernetes v1.26.15  # another control plane version ($KS_KUBERNETES_VERSION)

    with SimCluster(Path("/tmp/x")) as cluster:        # or .start() / .stop()
        cluster.kubectl("get", "nodes")

Nothing leaves the machine, by construction: before kube-apiserver starts, the node, pod and Service ranges get
``unreachable`` routes, and this cluster's own node addresses (172.31.<block>.2-4) and pod range
(10.244.<4*block>.0/22, kwok's ``--cidr``) are local: the nodes' InternalIPs are on ``lo`` and the pod range is a
``local`` route, so a pod IP is an address of this machine. Without CAP_NET_ADMIN the cluster refuses to start.

Aggregated APIs and webhooks: kube-apiserver dials a Service's endpoint IPs (``--enable-aggregator-routing``; there
is no kube-proxy). A real metrics-server listens on each node address at :4443, so the metrics-server Deployment's
hostNetwork pod (its IP is its node's) backs APIService v1beta1.metrics.k8s.io for real. Clusters running side by
side get their own node addresses and pod range, so each reaches only its own. ``hack/sim_webhooks.py`` listens on
the pod IPs behind every admission and conversion webhook and answers as the pod would, with the certificate of the
Secret it mounts (and plays the runtime certificate steps of istiod and Gatekeeper, see its docstring).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import ctypes
import datetime as dt
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from k8s_versions import (
    CONTROL_PLANE,
    cluster_version,
    controller_manager_flags,
    kwok_stages_for,
    normalize,
    scheduler_flags,
    tool_version,
    volume_provisioner,
)

HACK_DIR = Path(__file__).resolve().parent
DEFAULT_STATE_DIR = Path("/tmp/ks-sim")
SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.244.0.0/16"
"""Every cluster's pod range lies in it; each running cluster has its own /22 (see :func:`pod_cidr`)."""
NODE_CIDR = "172.31.0.0/16"
# Ranges the simulated clusters use, routed `unreachable` so that a dial to an address no cluster made local fails
# at once on this machine instead of leaving through the default route.
GUARDED_CIDRS = (POD_CIDR, "10.0.0.0/16", NODE_CIDR)
STORAGE_CLASS = "local"
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# name, InternalIP, control plane? (of the first cluster; see node_set)
NODES = (("ks-sim-control-plane", "172.31.0.2", True), ("ks-sim-worker-1", "172.31.0.3", False),
         ("ks-sim-worker-2", "172.31.0.4", False))
# Node address blocks on the host's loopback, one per running cluster (172.31.<block>.0/24): claims and a lock.
ADDRESS_DIR = Path("/tmp/ks-sim-addresses")
ADDRESS_BLOCKS = 64
# The port of the metrics-server Deployment (roles/metrics-server), served on every node address.
METRICS_SERVER_PORT = 4443
_VERSION_KEYS = {
    "kube-apiserver": "KUBERNETES_VERSION", "kube-controller-manager": "KUBERNETES_VERSION",
    "kube-scheduler": "KUBERNETES_VERSION", "kubectl": "KUBERNETES_VERSION", "etcd": "ETCD_VERSION",
    "shell-operator": "SHELL_OPERATOR_VERSION", "kwok": "KWOK_VERSION", "helm": "HELM_VERSION",
    "metrics-server": "METRICS_SERVER_VERSION",
}
# Tools linked without their version suffix into <state>/bin, for PATH.
PLAIN_TOOLS = ("kubectl", "helm", "shell-operator", "kwok")


class SimClusterError(RuntimeError):
    """The simulated cluster (or a process of it) failed."""


# ---------------------------------------------------------------------------------------------- tools


def versions() -> dict[str, str]:
    """The pinned versions of ``hack/versions.env``."""
    out = {}
    for line in (HACK_DIR / "versions.env").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith("#"):
            out[key.strip()] = value.strip().strip("'\"")
    return out


def tools_dir() -> Path:
    """Where build-tools.sh puts the binaries ($KS_TOOLS_DIR)."""
    return Path(os.environ.get("KS_TOOLS_DIR") or Path.home() / ".cache/ks-installer/bin").expanduser()


def tool_path(name: str, kubernetes: str | None = None) -> Path:
    """Path of the binary ``name`` (kubectl, helm, shell-operator, kube-apiserver, ...) of a cluster whose control
    plane runs ``kubernetes`` (default: ``$KS_KUBERNETES_VERSION``, else the pinned version; see k8s_versions)."""
    if name not in _VERSION_KEYS:
        raise KeyError(f"unknown tool {name!r}; known: {', '.join(sorted(_VERSION_KEYS))}")
    try:
        version = tool_version(name, versions(), kubernetes)
    except ValueError as exc:
        raise SimClusterError(str(exc)) from None
    path = tools_dir() / f"{name}-{version}"
    if not os.access(path, os.X_OK):
        option = f" --kubernetes {version}" if name in CONTROL_PLANE and version != versions()["KUBERNETES_VERSION"] \
            else ""
        raise SimClusterError(f"{path} is missing: build it with `bash hack/build-tools.sh{option}`")
    return path


#: Ports handed out lately, by any process on this machine (two pytest workers start clusters at once): a port is
#: free when asked for, and bound by its server only later, so one handed out within :data:`PORT_HOLD` seconds is
#: never handed out again.
PORTS_FILE = Path("/tmp/ks-installer-ports.json")
PORT_HOLD = 3600


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1, none handed out by this function (in any process) lately."""
    socks: list[socket.socket] = []
    with open(PORTS_FILE.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        now = time.time()
        try:
            recent = {int(k): v for k, v in json.loads(PORTS_FILE.read_text()).items() if now - v < PORT_HOLD}
        except (OSError, ValueError, AttributeError):
            recent = {}
        try:
            ports: list[int] = []
            while len(ports) < count and len(socks) < count + 1000:
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                socks.append(s)  # held open until all are chosen: the kernel hands out another next
                port = s.getsockname()[1]
                if port not in recent:
                    ports.append(port)
            if len(ports) < count:
                raise SimClusterError(f"no {count} free ports on 127.0.0.1 that were not handed out lately")
            recent.update(dict.fromkeys(ports, now))
            PORTS_FILE.write_text(json.dumps(recent))
            return ports
        finally:
            for s in socks:
                s.close()


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on host:port."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file (or a note that it is missing)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


# ------------------------------------------------------------------------------------------ processes


def _set_pdeathsig() -> None:
    """In the child: get SIGKILL when the parent dies (a crashed pytest leaves nothing behind)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def spawn(argv: list[str], log: Path, *, env: dict[str, str] | None = None, cwd: Path | None = None,
          die_with_parent: bool = False) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group with stdout+stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=cwd, start_new_session=True,
                                preexec_fn=_set_pdeathsig if die_with_parent else None)


def _stat_fields(pid: int) -> list[str]:
    """Fields of /proc/<pid>/stat after the command name (state is [0], ppid [1], starttime [19])."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def pid_alive(pid: int, argv0: str | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, if given, was started as ``argv0``."""
    try:
        state = _stat_fields(pid)[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False
    if state in ("Z", "X"):
        return False
    return argv0 is None or cmdline[0].decode(errors="replace") == argv0


def process_tree(pid: int) -> list[tuple[int, str]]:
    """``pid`` and its live descendants as (pid, start time), to kill them later without hitting reused pids."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            children.setdefault(int(_stat_fields(int(stat.parent.name))[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        with contextlib.suppress(OSError, IndexError):
            out.append((current, _stat_fields(current)[19]))
            todo += children.get(current, [])
    return out


def kill_tree(tree: Iterable[tuple[int, str]]) -> None:
    """SIGKILL each (pid, start time) of :func:`process_tree` that still is that process."""
    for pid, start in tree:
        with contextlib.suppress(OSError, IndexError):
            if _stat_fields(pid)[19] == start:
                os.kill(pid, signal.SIGKILL)


def stop_processes(records: Iterable[dict[str, Any]], timeout: float = 10) -> None:
    """Stop each recorded process group in order (SIGTERM, SIGKILL after ``timeout`` seconds).

    In order, because e.g. kube-apiserver shuts down in a second while etcd still answers, and slowly without it.
    """
    for rec in records:
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            if _signal_and_wait(rec, sig, wait):
                break
        else:
            raise SimClusterError(f"{rec.get('name', 'process')} (pid {rec['pid']}) survived SIGKILL")


def _signal_and_wait(rec: dict[str, Any], sig: signal.Signals, timeout: float) -> bool:
    """Send ``sig`` to the process group of ``rec``; whether it is gone within ``timeout``."""
    if not pid_alive(rec["pid"], rec["argv0"]):
        return True
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(rec["pid"], sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):  # reap our own children so they do not linger as zombies
            os.waitpid(rec["pid"], os.WNOHANG)
        if not pid_alive(rec["pid"], rec["argv0"]):
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------- node addresses


def pod_cidr(block: int) -> str:
    """The pod range of the cluster with node block ``block``: 10.244.<4*block>.0/22 (1022 pod IPs)."""
    return f"10.244.{4 * block}.0/22"


def node_set(block: int) -> tuple[tuple[str, str, bool], ...]:
    """:data:`NODES` with their InternalIPs in 172.31.<block>.0/24."""
    return tuple((name, f"172.31.{block}.{ip.rsplit('.', 1)[1]}", cp) for name, ip, cp in NODES)


def _ip(*args: str) -> subprocess.CompletedProcess[str] | None:
    """``ip <args>`` (argv, never a shell); None when there is no ``ip`` command."""
    try:
        return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def loopback_addresses() -> set[str]:
    """The IPv4 addresses on ``lo``."""
    proc = _ip("-o", "-4", "addr", "show", "dev", "lo")
    if proc is None or proc.returncode:
        return set()
    return {f.split("/")[0] for line in proc.stdout.splitlines() for f in line.split()[3:4]}


def add_loopback(ip: str) -> bool:
    """Put ``ip``/32 on ``lo`` (there already is fine); whether it is there."""
    proc = _ip("addr", "add", f"{ip}/32", "dev", "lo")
    return proc is not None and (proc.returncode == 0 or ip in loopback_addresses())


def remove_loopback(ip: str) -> None:
    _ip("addr", "del", f"{ip}/32", "dev", "lo")


def route_of(ip: str) -> str:
    """``ip route get <ip>`` as this process sees it: its first line, or the error it gives."""
    proc = _ip("route", "get", ip)
    if proc is None:
        return "no ip command"
    return (proc.stdout or proc.stderr).strip().splitlines()[0] if (proc.stdout or proc.stderr).strip() else ""


def stays_on_machine(ip: str) -> bool:
    """Whether a packet to ``ip`` stays on this machine: delivered locally or refused (unreachable, blackhole,
    prohibit), never sent through a gateway or out of a device."""
    route = route_of(ip)
    return route.startswith("local ") or any(w in route for w in ("unreachable", "prohibit", "blackhole")) \
        or "Network is unreachable" in route or "No route to host" in route


def guard_ranges() -> None:
    """Route each of :data:`GUARDED_CIDRS` ``unreachable`` (kept: harmless, and it protects later clusters) and
    check that a dial into each stays on the machine; :class:`SimClusterError` saying what is missing if not."""
    for cidr in GUARDED_CIDRS:
        proc = _ip("route", "add", "unreachable", cidr)
        if proc is None:
            raise SimClusterError("the `ip` command (iproute2) is missing: the simulated cluster needs it to keep "
                                  "its pod, Service and node ranges on this machine")
        if proc.returncode and "File exists" not in proc.stderr:
            raise SimClusterError(f"cannot route {cidr} unreachable ({proc.stderr.strip()}): the simulated cluster "
                                  "needs root with CAP_NET_ADMIN to keep its ranges on this machine")
        probe = str(next(ipaddress.ip_network(cidr).hosts()))
        if not stays_on_machine(probe):
            raise SimClusterError(f"{cidr} leaves this machine (`ip route get {probe}`: {route_of(probe)}); "
                                  "remove that route or run the simulated cluster where the range is free")


def add_local_route(cidr: str) -> bool:
    """Make ``cidr`` local (table local, dev lo): its addresses are this machine's; whether it is there."""
    proc = _ip("route", "add", "local", cidr, "dev", "lo", "table", "local")
    return proc is not None and (proc.returncode == 0 or "File exists" in proc.stderr)


def remove_local_route(cidr: str) -> None:
    _ip("route", "del", "local", cidr, "dev", "lo", "table", "local")


def _claim_live(claim: Path) -> bool:
    """Whether a block claim belongs to a cluster that runs or to a process still starting one."""
    try:
        owner = json.loads(claim.read_text())
    except (OSError, ValueError):
        return False
    if pid_alive(owner.get("pid", -1)):
        return True
    return SimCluster(owner.get("state_dir", "/nonexistent"), quiet=True).running()


def claim_node_block(state_dir: Path) -> tuple[int, list[str]]:
    """The first free block, claimed for ``state_dir``: its node addresses put on ``lo`` and its pod range
    (:func:`pod_cidr`) routed local; (block, addresses). :class:`SimClusterError` when that cannot be done."""
    guard_ranges()
    ADDRESS_DIR.mkdir(exist_ok=True)
    with (ADDRESS_DIR / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        present = loopback_addresses()
        for block in range(ADDRESS_BLOCKS):
            claim = ADDRESS_DIR / f"block-{block}.json"
            ips = [ip for _, ip, _ in node_set(block)]
            if _claim_live(claim) or (not claim.exists() and present & set(ips)):
                continue  # another cluster's (or someone else's addresses)
            added: list[str] = []
            for ip in ips:
                if not add_loopback(ip):
                    for done in added:
                        remove_loopback(done)
                    raise SimClusterError(f"cannot put {ip} on lo: the simulated cluster needs root with "
                                          "CAP_NET_ADMIN for its node addresses")
                added.append(ip)
            if not add_local_route(pod_cidr(block)):
                for done in added:
                    remove_loopback(done)
                raise SimClusterError(f"cannot route {pod_cidr(block)} local: the simulated cluster needs root "
                                      "with CAP_NET_ADMIN for its pod range")
            claim.write_text(json.dumps({"state_dir": str(state_dir), "pid": os.getpid()}))
            return block, added
    raise SimClusterError(f"all {ADDRESS_BLOCKS} address blocks are claimed by running clusters ({ADDRESS_DIR})")


def release_node_block(block: int, addresses: list[str], state_dir: Path) -> None:
    """Remove the addresses of a block claimed for ``state_dir`` from ``lo`` and drop the claim."""
    if not addresses:
        return
    with (ADDRESS_DIR / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        claim = ADDRESS_DIR / f"block-{block}.json"
        try:
            owner = json.loads(claim.read_text()).get("state_dir")
        except (OSError, ValueError):
            owner = None
        if owner not in (None, str(state_dir)):
            return  # reclaimed by another cluster meanwhile
        for ip in addresses:
            remove_loopback(ip)
        remove_local_route(pod_cidr(block))
        claim.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------------ pki


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _cert(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: tuple[x509.Certificate, Any] | None,
          *, ca: bool = False, usage: list[x509.ObjectIdentifier] | None = None,
          sans: list[x509.GeneralName] | None = None) -> x509.Certificate:
    """A certificate for ``key``, self-signed when ``issuer`` (cert, key) is None; valid for a year."""
    now = dt.datetime.now(dt.UTC)
    issuer_name, signing_key = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=365))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=not ca, key_cert_sign=ca,
                                            crl_sign=ca, content_commitment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False),
                              critical=True))
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def write_pki(pki: Path) -> None:
    """CA, apiserver serving cert, admin and front-proxy client certs and the service-account key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert(_name("ks-sim-ca"), ca_key, None, ca=True)
    svc_ip = next(ipaddress.ip_network(SERVICE_CIDR).hosts())
    sans = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(svc_ip), x509.DNSName("localhost"),
            *(x509.DNSName(n) for n in ("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                        "kubernetes.default.svc.cluster.local"))]
    srv_key, adm_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    srv = _cert(_name("kube-apiserver"), srv_key, (ca, ca_key), usage=[ExtendedKeyUsageOID.SERVER_AUTH], sans=sans)
    adm = _cert(_name("kubernetes-admin", "system:masters"), adm_key, (ca, ca_key),
                usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    proxy_key = ec.generate_private_key(ec.SECP256R1())
    proxy = _cert(_name("front-proxy-client"), proxy_key, (ca, ca_key), usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM), "ca.key": _pem_key(ca_key),
        "apiserver.crt": srv.public_bytes(serialization.Encoding.PEM), "apiserver.key": _pem_key(srv_key),
        "admin.crt": adm.public_bytes(serialization.Encoding.PEM), "admin.key": _pem_key(adm_key),
        "front-proxy-client.crt": proxy.public_bytes(serialization.Encoding.PEM),
        "front-proxy-client.key": _pem_key(proxy_key), "sa.key": _pem_key(sa_key),
        "sa.pub": sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo),
    }
    for name, data in files.items():
        (pki / name).write_bytes(data)
        (pki / name).chmod(0o600)


def kubeconfig_text(server: str, pki: Path) -> str:
    """An admin kubeconfig with the certificates embedded."""
    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "ks-sim", "preferences": {},
        "clusters": [{"name": "ks-sim", "cluster": {"server": server, "certificate-authority-data": b64("ca.crt")}}],
        "users": [{"name": "ks-sim-admin", "user": {"client-certificate-data": b64("admin.crt"),
                                                    "client-key-data": b64("admin.key")}}],
        "contexts": [{"name": "ks-sim", "context": {"cluster": "ks-sim", "user": "ks-sim-admin"}}],
    }, indent=2)


# ------------------------------------------------------------------------------------------------ kwok

# Stages from sigs.k8s.io/kwok v0.8.0 kustomize/stage/{node/fast,pod/fast,volume/fast} (what kwokctl loads by
# default, plus volumes); the kwok binary itself has no built-in stages and refuses to start without them.
# Change from upstream: pvc-provision does not mark the claim bind-completed (with kube-controller-manager
# running, that makes the PV controller declare the claim Lost); the PV controller binds the pre-bound PV.
KWOK_STAGES = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type  | Quote}}
      {{ end }}
      {{ $hasInternalIP := false }}
      {{ $hasHostname := false }}
      {{ range .status.addresses }}
        {{ if eq .type "InternalIP" }}{{ $hasInternalIP = true }}{{ end }}
        {{ if eq .type "Hostname" }}{{ $hasHostname = true }}{{ end }}
      {{ end }}
      {{ if or (not $hasInternalIP) (not $hasHostname) }}
      addresses:
      {{ end }}
      {{ if not $hasInternalIP }}{{ with NodeIP }}
      - address: {{ . | Quote }}
        type: InternalIP
      {{ end }}{{ end }}
      {{ if not $hasHostname }}{{ with NodeName }}
      - address: {{ . | Quote }}
        type: Hostname
      {{ end }}{{ end }}
      allocatable:
      {{ with .status.allocatable }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}
      capacity:
      {{ with .status.capacity }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}
      {{ $nodeInfo := .status.nodeInfo }}
      {{ $kwokVersion := printf "kwok-%s" Version }}
      nodeInfo:
        architecture: {{ or $nodeInfo.architecture "amd64" }}
        bootID: {{ or $nodeInfo.bootID `""` }}
        containerRuntimeVersion: {{ or $nodeInfo.containerRuntimeVersion $kwokVersion }}
        kernelVersion: {{ or $nodeInfo.kernelVersion $kwokVersion }}
        kubeProxyVersion: {{ or $nodeInfo.kubeProxyVersion $kwokVersion }}
        kubeletVersion: {{ or $nodeInfo.kubeletVersion $kwokVersion }}
        machineID: {{ or $nodeInfo.machineID `""` }}
        operatingSystem: {{ or $nodeInfo.operatingSystem "linux" }}
        osImage: {{ or $nodeInfo.osImage `""` }}
        systemUUID: {{ or $nodeInfo.systemUUID `""` }}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: 'DoesNotExist'}
    - {key: '.status.phase', operator: 'In', values: ['Pending']}
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      {{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        {{ if eq .restartPolicy "Always" }}
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
        {{ else }}
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
        {{ end }}
      {{ end }}
      {{ $hostIPs := NodeIPsWith .spec.nodeName }}
      {{ with $hostIPs }}
      hostIP: {{ index . 0 | Quote }}
      hostIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      {{ $uid := or .metadata.uid "" }}{{ $name := or .metadata.name "" }}{{ $ns := or .metadata.namespace "" }}
      {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) $uid $name $ns }}
      {{ with $podIPs }}
      podIP: {{ index . 0 | Quote }}
      podIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: 'DoesNotExist'}
    - {key: '.status.phase', operator: 'In', values: ['Running']}
    - {key: '.metadata.ownerReferences.[].kind', operator: 'In', values: ['Job']}
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $root := . }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      {{ $origin := index $root.status.containerStatuses $index }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: 'Exists'}
  next:
    delete: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pvc-provision
spec:
  resourceRef: {apiGroup: v1, kind: PersistentVolumeClaim}
  selector:
    matchExpressions:
    - cel: {expression: "self.spec.storageClassName == '@SC@'"}
    - cel: {expression: "!has(self.metadata.deletionTimestamp)"}
    - cel: {expression: "!has(self.spec.volumeName)"}
    - cel: {expression: "self.status.phase != 'Bound'"}
  steps:
  - apply:
      template: |
        apiVersion: v1
        kind: PersistentVolume
        metadata:
          name: pvc-{{ .metadata.uid }}
          annotations:
            pv.kubernetes.io/provisioned-by: kwok.x-k8s.io/volume
        spec:
          accessModes:
          {{ YAML .spec.accessModes 2 }}
          capacity:
          {{ YAML .spec.resources.requests 2 }}
          persistentVolumeReclaimPolicy: {{ default "Delete" .spec.reclaimPolicy | Quote }}
          storageClassName: {{ .spec.storageClassName | Quote }}
          volumeMode: {{ default "Filesystem" .spec.volumeMode | Quote }}
          claimRef:
            apiVersion: {{ .apiVersion | Quote }}
            kind: {{ .kind | Quote }}
            name: {{ .metadata.name | Quote }}
            namespace: {{ .metadata.namespace | Quote }}
            resourceVersion: {{ .metadata.resourceVersion | Quote }}
            uid: {{ .metadata.uid | Quote }}
          hostPath:
            path: /tmp/kwok-local-path-provisioner/pvc-{{ .metadata.uid }}
            type: DirectoryOrCreate
  - patch:
      root: metadata
      template: |
        annotations:
          volume.beta.kubernetes.io/storage-provisioner: kwok.x-k8s.io/volume
          volume.kubernetes.io/storage-provisioner: kwok.x-k8s.io/volume
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pv-bind
spec:
  resourceRef: {apiGroup: v1, kind: PersistentVolume}
  selector:
    matchExpressions:
    - cel: {expression: "self.spec.storageClassName == '@SC@'"}
    - cel: {expression: "!has(self.metadata.deletionTimestamp)"}
    - cel: {expression: "has(self.spec.claimRef.name)"}
    - cel: {expression: "!(self.status.phase in ['Bound', 'Released', 'Failed'])"}
  steps:
  - patch:
      root: status
      subresource: status
      template: |
        phase: Bound
        lastPhaseTransitionTime: {{ Now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pvc-delete
spec:
  resourceRef: {apiGroup: v1, kind: PersistentVolumeClaim}
  selector:
    matchExpressions:
    - cel: {expression: "self.spec.storageClassName == '@SC@'"}
    - cel: {expression: "has(self.metadata.deletionTimestamp)"}
    - cel: {expression: "has(self.spec.volumeName)"}
  steps:
  - apply:
      subresource: status
      template: |
        apiVersion: v1
        kind: PersistentVolume
        metadata:
          name: {{ .spec.volumeName | Quote }}
        status:
          phase: Released
      type: merge
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pv-delete
spec:
  resourceRef: {apiGroup: v1, kind: PersistentVolume}
  selector:
    matchExpressions:
    - cel: {expression: "self.spec.storageClassName == '@SC@'"}
    - cel: {expression: "!has(self.metadata.deletionTimestamp)"}
    - cel: {expression: "self.spec.persistentVolumeReclaimPolicy == 'Delete'"}
    - cel: {expression: "self.status.phase == 'Released'"}
  steps:
  - delete: true
""".replace("@SC@", STORAGE_CLASS)


# ------------------------------------------------------------------------------------------ latency model

LATENCY_MODELS = ("probes",)
"""Opt-in stage sets (``SimCluster(latency=...)``, ``simcluster.py up --latency ...``); without one, pods are Ready
the moment they are scheduled (:data:`KWOK_STAGES`, unchanged)."""
PULL_MB_PER_SECOND = 50
"""Effective image pull rate of a node (download and unpack together; about 400 Mbit/s)."""
PULL_SIZES_MB: tuple[tuple[str, int], ...] = (
    ("opensearch-dashboards", 330), ("opensearch-curator|elasticsearch-curator", 30), ("opensearch", 800),
    ("ks-jenkins", 650), ("argocd", 180), ("kiali-operator", 200), ("dcgm-exporter", 300),
    ("prometheus-operator|prometheus-config-reloader", 15), ("prometheus", 90), ("istio/proxyv2", 95),
    ("istio/pilot", 75), ("ks-console", 90), ("ks-apiserver|ks-controller-manager", 50), ("osixia/openldap", 90),
    ("grafana", 80), ("thanos", 60), ("busybox|alpine|redis|haproxy|node-exporter|kubectl", 10),
)
"""Compressed size (MB) of an image whose reference matches the regular expression (the first that matches), as
the registries list the catalogue's tags for amd64, rounded; not measured here (the simulated cluster has no
network). Any other image: :data:`PULL_DEFAULT_MB`."""
PULL_DEFAULT_MB = 30
STARTUP_FAILED_PROBES = 2
"""A startupProbe fails this many times before it passes: the container starts after initialDelaySeconds +
periodSeconds (10 by default) x 2."""
INIT_CONTAINER_SECONDS = 1
"""What each init container runs for (one after the other, after the pulls)."""
JOB_SECONDS = 5
"""What a Job's container runs for, from its pod's start to Succeeded."""


def _jq_pull_table() -> str:
    return json.dumps([[pattern, size] for pattern, size in PULL_SIZES_MB])


def _remaining(deadline: str) -> str:
    """A jq expression: the time from now to ``deadline`` (epoch seconds, a jq expression) as a Go duration that
    kwok parses (0 once it is past). A deadline, not a duration: a pod updated while it waits is matched again, and
    then waits only for what is left."""
    return f'(({deadline}) - now) as $left | if $left > 0 then "\\(($left * 1000) | floor)ms" else "0ms" end'


POD_READY_SECONDS = f"""
def pull_mb: . as $image | first({_jq_pull_table()}[] | select(.[0] as $p | $image | test($p)) | .[1])
  // {PULL_DEFAULT_MB};
def probe_seconds: ((.startupProbe // null) | if . then (.initialDelaySeconds // 0)
    + (.periodSeconds // 10) * {STARTUP_FAILED_PROBES} else 0 end) as $started
  | [$started, (.readinessProbe.initialDelaySeconds // 0)] | max;
(.spec.initContainers // []) as $init
| (([$init[].image, .spec.containers[].image] | unique | map(pull_mb) | add) / {PULL_MB_PER_SECOND}) as $pull
| (if any(.metadata.ownerReferences[]?; .kind == "Job") then 0 else [.spec.containers[] | probe_seconds] | max end)
  as $ready
| {_remaining(f"(.metadata.creationTimestamp | fromdateiso8601) + $pull + ($init | length) * {INIT_CONTAINER_SECONDS}"
              " + $ready")}
""".strip()
"""Seconds from a pod's creation to Ready under the ``probes`` model (jq over the Pod, kwok's ``durationFrom``):

- the pull of each distinct image of its init containers and containers, one after the other (kubelet pulls
  serially by default; no node cache: each pod pays its images), at :data:`PULL_MB_PER_SECOND` by
  :data:`PULL_SIZES_MB`;
- :data:`INIT_CONTAINER_SECONDS` per init container;
- the slowest container's probes: readinessProbe.initialDelaySeconds, or its startupProbe's
  initialDelaySeconds + periodSeconds x :data:`STARTUP_FAILED_PROBES` when that is later (readiness probes start
  once the startup probe passed); a container without probes is ready at once. A Job's pod has no probe wait: it
  completes :data:`JOB_SECONDS` after it started.

The pod stays Pending meanwhile (on a real node it is Running, not Ready, after the pull): what the installer reads
(the ready counts of Deployments, StatefulSets and DaemonSets, a Job's completions) is the same. No jitter: the same
manifests take the same time on every run."""
JOB_DONE_SECONDS = _remaining(f"(.status.startTime | fromdateiso8601) + {JOB_SECONDS}")


def _delayed(stages: str, name: str, expression: str) -> str:
    """``stages`` with a ``delay`` read from ``expression`` (jq over the object) in the Stage named ``name``."""
    anchor = f"  name: {name}\nspec:\n"
    if stages.count(anchor) != 1:
        raise ValueError(f"no single Stage {name!r} in the stage set")
    block = "  delay:\n    durationMilliseconds: 0\n    durationFrom:\n      jq:\n        expression: |\n" + "".join(
        f"          {line}\n" for line in expression.splitlines())
    return stages.replace(anchor, anchor + block)


def kwok_stages(latency: str | None = None) -> str:
    """kwok's stage set: :data:`KWOK_STAGES`, or with ``latency="probes"`` the same with pods Ready after
    :data:`POD_READY_SECONDS` and Jobs' pods Succeeded :data:`JOB_SECONDS` after they started."""
    if latency is None:
        return KWOK_STAGES
    if latency not in LATENCY_MODELS:
        raise SimClusterError(f"unknown latency model {latency!r}; known: {', '.join(LATENCY_MODELS)}")
    return _delayed(_delayed(KWOK_STAGES, "pod-ready", POD_READY_SECONDS), "pod-complete", JOB_DONE_SECONDS)


def node_manifest(name: str, ip: str, control_plane: bool, kubelet_version: str) -> dict[str, Any]:
    """A kwok-managed Node with its addresses, capacity and (for the first) control-plane role labels."""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "type": "kwok"}
    if control_plane:
        labels |= {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/master": ""}
    else:
        labels["node-role.kubernetes.io/worker"] = ""
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "200Gi"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1],
                                     "node.alpha.kubernetes.io/ttl": "0"}},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "capacity": resources, "allocatable": resources,
            "nodeInfo": {"kubeletVersion": kubelet_version, "kubeProxyVersion": kubelet_version,
                         "architecture": "amd64", "operatingSystem": "linux", "osImage": "kwok simulated node",
                         "containerRuntimeVersion": "containerd://kwok"},
        },
    }


STORAGE_CLASS_MANIFEST = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "provisioner": "kwok.x-k8s.io/volume", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
}


# ------------------------------------------------------------------------------------------------ api


class Api:
    """A minimal JSON client for the apiserver, with the admin client certificate."""

    def __init__(self, server: str, pki: Path) -> None:
        self.server = server
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    def call(self, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
        """``method`` ``path``; the decoded JSON answer (text when it is not JSON)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as resp:
            text = resp.read().decode()
        try:
            return json.loads(text)
        except ValueError:
            return text

    def create(self, path: str, body: dict[str, Any]) -> None:
        """POST ``body``; an AlreadyExists answer is fine."""
        try:
            self.call("POST", path, body)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise SimClusterError(f"POST {path}: {exc.code} {exc.read().decode(errors='replace')}") from exc


# -------------------------------------------------------------------------------------------- cluster


@dataclass
class Proc:
    """One running component."""

    name: str
    popen: subprocess.Popen[bytes] | None
    pid: int
    argv0: str
    log: Path
    essential: bool = True
    """Whether start-up fails when it exits (metrics-server is not: without it only metrics.k8s.io is missing)."""

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "argv0": self.argv0, "log": str(self.log)}


class SimCluster:
    """The simulated cluster in ``state_dir``: ``start()``/``stop()`` or a ``with`` block."""

    def __init__(self, state_dir: Path | str = DEFAULT_STATE_DIR, *, die_with_parent: bool = False,
                 quiet: bool = False, latency: str | None = None, kubernetes: str | None = None) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.latency = latency
        """The latency model of kwok's stages (:data:`LATENCY_MODELS`; None: pods are Ready at once)."""
        try:
            self.kubernetes = normalize(kubernetes) if kubernetes else cluster_version(versions())
        except ValueError as exc:
            raise SimClusterError(str(exc)) from None
        """The control plane's version (kube-apiserver, kube-controller-manager, kube-scheduler, the nodes' kubelet)."""
        self.die_with_parent = die_with_parent
        self.quiet = quiet
        self.procs: list[Proc] = []
        self.ports: dict[str, int] = {}
        self.startup_seconds = 0.0
        self.kubeconfig = self.state_dir / "kubeconfig"
        self._owned = True
        self.node_block = 0
        self.addresses: list[str] = []

    # -- paths
    @property
    def pki(self) -> Path:
        return self.state_dir / "pki"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def bin_dir(self) -> Path:
        """kubectl, helm, ... without version suffix, for PATH."""
        return self.state_dir / "bin"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def pod_cidr(self) -> str:
        """This cluster's pod range (kwok's ``--cidr``), routed local while it runs."""
        return pod_cidr(self.node_block)

    @property
    def nodes(self) -> tuple[tuple[str, str, bool], ...]:
        """(name, InternalIP, control plane?) of this cluster's Nodes."""
        return node_set(self.node_block)

    def _load_state(self) -> None:
        """Ports and node addresses from ``<state>/cluster.json``."""
        with contextlib.suppress(OSError, ValueError, KeyError):
            state = json.loads((self.state_dir / "cluster.json").read_text())
            self.ports = state["ports"]
            self.node_block, self.addresses = state.get("node_block", 0), state.get("addresses", [])
            self.kubernetes = state.get("kubernetes", self.kubernetes)

    @classmethod
    def attach(cls, kubeconfig: Path | str) -> SimCluster:
        """A handle on an already running cluster (``stop()`` leaves it running)."""
        kubeconfig = Path(kubeconfig).resolve()
        if not kubeconfig.is_file():
            raise SimClusterError(f"no kubeconfig at {kubeconfig}")
        self = cls(kubeconfig.parent)
        self.kubeconfig, self._owned = kubeconfig, False
        self._load_state()
        return self

    # -- helpers for users
    def env(self) -> dict[str, str]:
        """Environment for tools against this cluster: KUBECONFIG and PATH with the pinned tools first."""
        return {"KUBECONFIG": str(self.kubeconfig), "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this cluster; raises with its stderr when ``check`` fails."""
        proc = subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={self.kubeconfig}", *args], input=input,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode:
            raise SimClusterError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path, hours: int = 24) -> Path:
        """A kubeconfig at ``path`` that authenticates as ServiceAccount ``namespace/name`` (a bound token), so
        a process run with it gets exactly that account's RBAC, as in a pod."""
        token = self.kubectl("create", "token", name, "-n", namespace, f"--duration={hours}h").stdout.strip()
        config = json.loads(self.kubectl("config", "view", "--raw", "-o", "json").stdout)
        config["users"] = [{"name": name, "user": {"token": token}}]
        for ctx in config["contexts"]:
            ctx["context"]["user"] = name
        path.write_text(json.dumps(config))
        path.chmod(0o600)
        return path

    def records(self) -> list[dict[str, Any]]:
        """Process records of this cluster (from memory, else from ``<state>/pids.json``)."""
        if self.procs:
            return [p.record() for p in self.procs]
        try:
            return json.loads((self.state_dir / "pids.json").read_text())
        except (OSError, ValueError):
            return []

    def running(self) -> bool:
        """Whether any recorded process is alive."""
        return any(pid_alive(r["pid"], r["argv0"]) for r in self.records())

    # -- lifecycle
    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 120) -> SimCluster:
        """Generate PKI, start every component and wait until the cluster is usable."""
        if self.running():
            raise SimClusterError(f"a simulated cluster already runs in {self.state_dir}; run `down` first")
        if not self._disposable():
            raise SimClusterError(f"{self.state_dir} is neither empty nor a simulated cluster's state dir")
        kwok_stages(self.latency)  # an unknown model fails before anything starts
        begin = time.monotonic()
        shutil.rmtree(self.state_dir, ignore_errors=True)
        self.logs.mkdir(parents=True)
        atexit.register(self.stop)
        try:
            self._prepare()
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._start_metrics_servers()
            self._start_controllers()
            self._start_webhook_responder()
            self._bootstrap(timeout)
        except BaseException:
            self.stop(remove=False)
            raise
        self.startup_seconds = time.monotonic() - begin
        model = f", latency model {self.latency!r}" if self.latency else ""
        self._say(f"simulated cluster up in {self.startup_seconds:.1f}s: {self.server} "
                  f"(Kubernetes {self.kubernetes}, KUBECONFIG={self.kubeconfig}){model}")
        return self

    def stop(self, remove: bool = True) -> None:
        """Stop every recorded process (SIGTERM, then SIGKILL) and remove the state dir."""
        atexit.unregister(self.stop)
        if not self._owned:
            return
        if not self.procs:
            self._load_state()
        stop_processes(reversed(self.records()))
        for p in self.procs:
            if p.popen is not None:
                p.popen.wait(timeout=5)
        self.procs = []
        release_node_block(self.node_block, self.addresses, self.state_dir)
        self.addresses = []
        if remove and self._disposable():
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def _disposable(self) -> bool:
        """Whether the state dir may be wiped: missing, empty, or one this class wrote (never a user's dir)."""
        d = self.state_dir
        return not d.exists() or not any(d.iterdir()) or any((d / m).exists() for m in ("cluster.json", "pids.json"))

    # -- startup steps
    def _say(self, msg: str) -> None:
        if not self.quiet:
            print(f"[simcluster] {msg}", file=sys.stderr, flush=True)

    def _prepare(self) -> None:
        names = ["etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler"]
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        self.node_block, self.addresses = claim_node_block(self.state_dir)
        (self.state_dir / "cluster.json").write_text(json.dumps(
            {"server": self.server, "ports": self.ports, "kubeconfig": str(self.kubeconfig),
             "node_block": self.node_block, "addresses": self.addresses, "pod_cidr": self.pod_cidr,
             "latency": self.latency, "kubernetes": self.kubernetes}, indent=2))
        write_pki(self.pki)
        self.kubeconfig.write_text(kubeconfig_text(self.server, self.pki))
        self.kubeconfig.chmod(0o600)
        self.bin_dir.mkdir()
        for name in PLAIN_TOOLS:
            with contextlib.suppress(SimClusterError):
                (self.bin_dir / name).symlink_to(tool_path(name, self.kubernetes))
        (self.state_dir / "kwok.yaml").write_text(kwok_stages_for(kwok_stages(self.latency), self.kubernetes))

    def _spawn(self, name: str, tool: str, args: list[str], env: dict[str, str] | None = None,
               essential: bool = True) -> Proc:
        argv0 = str(tool_path(tool, self.kubernetes))
        log = self.logs / f"{name}.log"
        # The Go components collect garbage 4x less often (GOGC=400, unless set): memory is plentiful here, CPU is
        # not (kube-apiserver -20 % CPU over a module test; it spent a fifth of its time in the collector).
        env = {"GOGC": "400", **(os.environ if env is None else env)}
        popen = spawn([argv0, *args], log, env=env, cwd=self.state_dir, die_with_parent=self.die_with_parent)
        proc = Proc(name, popen, popen.pid, argv0, log, essential)
        self.procs.append(proc)
        (self.state_dir / "pids.json").write_text(json.dumps(self.records(), indent=2))
        return proc

    def _spawn_script(self, name: str, script: Path, args: list[str], essential: bool = True) -> Proc:
        """:meth:`_spawn` for a Python script of this directory, run with this interpreter."""
        argv0 = sys.executable
        log = self.logs / f"{name}.log"
        popen = spawn([argv0, str(script), *args], log, cwd=self.state_dir, die_with_parent=self.die_with_parent)
        proc = Proc(name, popen, popen.pid, argv0, log, essential)
        self.procs.append(proc)
        (self.state_dir / "pids.json").write_text(json.dumps(self.records(), indent=2))
        return proc

    def _wait(self, what: str, check: Callable[[], Any], timeout: float, logs: Iterable[str] = ()) -> Any:
        """Poll ``check`` until truthy; fail early when a component exits, with the tail of its log."""
        deadline, last = time.monotonic() + timeout, "not ready"
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.essential and p.popen is not None and p.popen.poll() is not None:
                    raise SimClusterError(f"{p.name} exited with {p.popen.returncode} while waiting for {what}; "
                                          f"tail of {p.log}:\n{log_tail(p.log)}")
            try:
                result = check()
                if result:
                    return result
            except (OSError, ValueError, urllib.error.URLError, SimClusterError) as exc:
                last = str(exc)
            time.sleep(0.2)
        tails = "\n".join(f"--- tail of {self.logs / n}.log:\n{log_tail(self.logs / f'{n}.log')}" for n in logs)
        raise SimClusterError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last})\n{tails}")

    def _start_etcd(self, timeout: float) -> None:
        client, peer = (f"http://127.0.0.1:{self.ports[k]}" for k in ("etcd", "etcd-peer"))
        self._spawn("etcd", "etcd", [
            "--name=sim", f"--data-dir={self.state_dir / 'etcd'}", f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}", f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=sim={peer}",
            "--unsafe-no-fsync", "--quota-backend-bytes=2147483648", "--log-level=warn",
        ])

        def healthy() -> bool:
            with urllib.request.urlopen(f"{client}/health", timeout=2) as resp:
                return json.loads(resp.read()).get("health") == "true"
        self._wait("etcd /health", healthy, timeout, ["etcd"])

    def _start_apiserver(self, timeout: float) -> None:
        pki = self.pki
        self._spawn("kube-apiserver", "kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1", f"--secure-port={self.ports['apiserver']}",
            # the Endpoints API rejects loopback: advertise the control-plane node's (never dialled) address
            f"--advertise-address={self.nodes[0][1]}",
            # aggregated APIs (and webhooks) are dialled at their Service's endpoint IPs: there is no kube-proxy
            "--enable-aggregator-routing=true",
            # `kubectl logs`/`exec` dial the pod's node at its InternalIP (the Hostname address resolves nowhere)
            "--kubelet-preferred-address-types=InternalIP",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}", "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true", "--profiling=false",
            "--enable-admission-plugins=NodeRestriction", "--event-ttl=15m",
            # front proxy, for aggregated APIs (and so that components find the requestheader CA)
            f"--requestheader-client-ca-file={pki / 'ca.crt'}", "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
        ])
        api = Api(self.server, pki)
        self._wait("kube-apiserver /readyz", lambda: api.call("GET", "/readyz") == "ok", timeout, ["kube-apiserver"])

    def _start_metrics_servers(self) -> None:
        """A real metrics-server on each node address (not waited for): the metrics-server Deployment's pod uses
        hostNetwork, so its endpoint is <node IP>:4443 and the API server's discovery check reaches one of these.
        It authenticates and authorises requests through the API server with the admin kubeconfig. Kubelet
        scrapes fail on kwok nodes, so `kubectl top` has no numbers; discovery (APIService Available) works."""
        try:
            tool_path("metrics-server")
        except SimClusterError as exc:
            self._say(f"no metrics-server ({exc}); APIService v1beta1.metrics.k8s.io will not become Available")
            return
        kc = str(self.kubeconfig)
        for name, ip, _ in self.nodes:
            certs = self.state_dir / "metrics-server" / name
            certs.mkdir(parents=True)
            self._spawn(f"metrics-server-{name}", "metrics-server", [
                f"--bind-address={ip}", f"--secure-port={METRICS_SERVER_PORT}", f"--cert-dir={certs}",
                f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
                "--kubelet-insecure-tls", "--kubelet-preferred-address-types=InternalIP", "--v=1",
            ], essential=False)

    def _start_controllers(self) -> None:
        pki, kc = self.pki, str(self.kubeconfig)
        common = [f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
                  "--leader-elect=false", "--bind-address=127.0.0.1",
                  "--kube-api-qps=200", "--kube-api-burst=400"]  # client throttling costs seconds at start-up
        self._spawn("kube-controller-manager", "kube-controller-manager", [
            *common, f"--secure-port={self.ports['controller-manager']}",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=true", f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}", f"--cluster-signing-key-file={pki / 'ca.key'}",
            *controller_manager_flags(self.kubernetes),
        ])
        self._spawn("kube-scheduler", "kube-scheduler", [*common, f"--secure-port={self.ports['scheduler']}",
                                                         *scheduler_flags(self.kubernetes)])
        home = self.state_dir / "kwok-home"  # kwok also reads ~/.kwok/kwok.yaml; keep a user's one out
        home.mkdir()
        self._spawn("kwok", "kwok", [
            f"--kubeconfig={kc}", f"--config={self.state_dir / 'kwok.yaml'}",
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector={}={}".format(*KWOK_NODE_ANNOTATION),
            f"--cidr={self.pod_cidr}", "--node-lease-duration-seconds=40",
        ], env={**os.environ, "HOME": str(home)})

    def _start_webhook_responder(self) -> None:
        """``hack/sim_webhooks.py``: answers the admission and conversion webhooks whose endpoints are pod IPs of
        this cluster, with the serving certificate the pod would use (log: ``<state>/logs/sim-webhooks.log``)."""
        self._spawn_script("sim-webhooks", HACK_DIR / "sim_webhooks.py",
                           [f"--kubeconfig={self.kubeconfig}", f"--pod-cidr={self.pod_cidr}"])

    def _bootstrap(self, timeout: float) -> None:
        api = Api(self.server, self.pki)
        kubelet = self.kubernetes
        for name, ip, cp in self.nodes:
            api.create("/api/v1/nodes", node_manifest(name, ip, cp, kubelet))
        api.create("/apis/storage.k8s.io/v1/storageclasses",
                   {**STORAGE_CLASS_MANIFEST, "provisioner": volume_provisioner(self.kubernetes)})

        def nodes_ready() -> bool:
            items = api.call("GET", "/api/v1/nodes")["items"]
            ready = [n for n in items if any(c["type"] == "Ready" and c["status"] == "True"
                                             for c in n.get("status", {}).get("conditions", []))]
            return len(ready) >= len(self.nodes)

        def healthz(port: str) -> Callable[[], bool]:
            ctx = ssl._create_unverified_context()  # self-signed serving certs of kcm/scheduler
            url = f"https://127.0.0.1:{self.ports[port]}/healthz"
            return lambda: urllib.request.urlopen(url, context=ctx, timeout=2).read() == b"ok"

        self._wait("kube-controller-manager /healthz", healthz("controller-manager"), timeout,
                   ["kube-controller-manager"])
        self._wait("kube-scheduler /healthz", healthz("scheduler"), timeout, ["kube-scheduler"])
        self._wait("3 Ready nodes", nodes_ready, timeout, ["kwok", "kube-controller-manager"])
        self._wait("ServiceAccount default/default",
                   lambda: api.call("GET", "/api/v1/namespaces/default/serviceaccounts/default"), timeout,
                   ["kube-controller-manager"])


# ------------------------------------------------------------------------------------------------ cli


def _state_dir() -> Path:
    return Path(os.environ.get("KS_SIM_DIR") or DEFAULT_STATE_DIR)


def _status(cluster: SimCluster) -> int:
    records = cluster.records()
    if not records:
        print(f"no simulated cluster in {cluster.state_dir}")
        return 1
    for r in records:
        print(f"{r['name']:<24} pid {r['pid']:<8} {'running' if pid_alive(r['pid'], r['argv0']) else 'DEAD'}")
    try:
        cluster.ports = json.loads((cluster.state_dir / "cluster.json").read_text())["ports"]
        print(f"apiserver {cluster.server} readyz: {Api(cluster.server, cluster.pki).call('GET', '/readyz')}")
    except (OSError, ValueError, KeyError, urllib.error.URLError) as exc:
        print(f"apiserver: not ready ({exc})")
        return 1
    return 0 if cluster.running() else 1


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """CLI: up | down | env | status for the cluster in $KS_SIM_DIR."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "env", "status"])
    parser.add_argument("--latency", choices=LATENCY_MODELS,
                        help="with up: pods become Ready as on a real cluster, after their image pulls and probes' "
                             "delays (see POD_READY_SECONDS); default: at once")
    parser.add_argument("--kubernetes", metavar="VERSION",
                        help="with up: the control plane's version, e.g. v1.26.15 (built by `hack/build-tools.sh "
                             "--kubernetes VERSION`); default: $KS_KUBERNETES_VERSION, else versions.env's")
    args = parser.parse_args(argv)
    try:
        cluster = SimCluster(_state_dir(), latency=args.latency, kubernetes=args.kubernetes)
    except SimClusterError as exc:
        print(f"[simcluster] error: {exc}", file=sys.stderr)
        return 1
    try:
        if args.command == "up":
            for sig in (signal.SIGTERM, signal.SIGHUP):  # killed while starting: start() stops what it began
                signal.signal(sig, _interrupt)
            cluster.start()
            atexit.unregister(cluster.stop)  # the processes outlive this command until `down`
            print(f"export KUBECONFIG={cluster.kubeconfig}")
        elif args.command == "down":
            cluster.stop()
            print(f"stopped; removed {cluster.state_dir}", file=sys.stderr)
        elif args.command == "env":
            print(f"export KUBECONFIG={cluster.kubeconfig}")
            print(f'export PATH="{cluster.bin_dir}:$PATH"')
        else:
            return _status(cluster)
    except SimClusterError as exc:
        print(f"[simcluster] error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"[simcluster] interrupted ({exc}); stopped what was started", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
