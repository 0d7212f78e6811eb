"""Shared fixtures: the simulated cluster of ``hack/simcluster.py`` for tests marked ``cluster``.

Set ``KS_SIM_KUBECONFIG`` to the kubeconfig of a running cluster (``python hack/simcluster.py up``) to reuse it
instead of starting one per session.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hack"))

import budget
from engine_zygote import ENGINE, write_client
from simcluster import SimCluster

WIDGET = {"group": "test.ks-installer.io", "version": "v1", "plural": "widgets", "kind": "Widget"}


class TelemetryReceiver(BaseHTTPRequestHandler):
    """Records the usage reports the telemetry module sends (no test reaches kubesphere.io)."""

    received: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.received.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


# The longest test files, started first: with two workers each taking whole files, a long file started last
# leaves one worker idle while the other finishes it.
LONGEST_FIRST = ("test_image.py", "test_declared_inputs.py", "test_parity.py", "test_engine_recovery.py",
                 "test_engine.py")
# Fixtures that start from an installer with no record (tests/integration/conftest.py ``installer`` unless the test
# is marked ``platform``, the parity snapshots, the e2e operator session): each leaves the cluster without the
# recorded default platform, so the next ``platform`` test on that cluster pays a full install.
STARTS_EMPTY = frozenset({"installer", "snapshots", "session"})


def _starts_empty(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return not (item.get_closest_marker("platform") or "platform" in names) and bool(names & STARTS_EMPTY)


@pytest.fixture(scope="session", autouse=True)
def engine_zygote() -> Iterator[None]:
    """``python -m installer`` forked from one process per worker that has imported the engine
    (tests/engine_zygote.py); ``KS_TEST_ZYGOTE=0`` runs each as a process of its own."""
    if os.environ.get("KS_TEST_ZYGOTE", "1") == "0":
        yield
        return
    directory = Path(tempfile.mkdtemp(prefix="ks-zygote-"))  # a short path: a socket's is at most 107 bytes
    sock = directory / "s"
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("engine_zygote.py")), str(sock)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    started = bool(ready) and proc.stdout.readline() == b"ready\n"
    saved = list(ENGINE)
    if started:
        ENGINE[:] = [str(write_client(directory, sock))]
    try:
        yield
    finally:
        ENGINE[:] = saved
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(directory, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with tests that start from an empty installer first (and those tests first in their file), so each
    cluster installs the default platform once, after them; within that, the longest files first (stable
    otherwise)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    empty = {item.path for item in items if _starts_empty(item)}
    order = {path: i for i, path in enumerate(dict.fromkeys(item.path for item in items))}
    items.sort(key=lambda item: (item.path not in empty, rank.get(item.path.name, len(rank)), order[item.path],
                                 not _starts_empty(item)))


def pytest_configure(config: pytest.Config) -> None:
    budget.configure(config)


pytest_terminal_summary = budget.pytest_terminal_summary


@pytest.fixture(scope="session", autouse=True)
def template_code_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """KS_TEMPLATE_CACHE for every test: one directory for the run (every worker's), as a pod's runs share
    ``/kubesphere/cache/templates``; each test's own KS_BASE_DIR would start it empty."""
    base = tmp_path_factory.getbasetemp()
    directory = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "template-code"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KS_TEMPLATE_CACHE", str(directory))
        yield directory


@pytest.fixture(scope="session", autouse=True)
def telemetry_receiver() -> Iterator[list[str]]:
    """KS_TELEMETRY_URL for every test: a receiver on loopback; yields the request paths it got."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), TelemetryReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KS_TELEMETRY_URL", f"http://127.0.0.1:{server.server_address[1]}/log/")
        yield TelemetryReceiver.received
    server.shutdown()


@pytest.fixture(scope="session")
def sim_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """The running cluster (``.kubeconfig``, ``.kubectl(...)``, ``.state_dir``); KUBECONFIG points at it."""
    reuse = os.environ.get("KS_SIM_KUBECONFIG")
    if reuse and os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") != "1":
        pytest.exit("KS_SIM_KUBECONFIG shares one cluster: run without pytest-xdist workers (-n 0)", returncode=2)
    if reuse:
        cluster = SimCluster.attach(reuse)
    else:
        # die_with_parent: even a SIGKILLed pytest leaves no cluster behind
        cluster = SimCluster(tmp_path_factory.mktemp("ks-sim"), die_with_parent=True).start()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a `timeout`/CI kill still runs this finalizer
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KUBECONFIG", str(cluster.kubeconfig))
            yield cluster
    finally:
        cluster.stop()
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def kube_api(sim_cluster: SimCluster) -> Iterator[client.ApiClient]:
    """A kubernetes ApiClient for the simulated cluster (admin)."""
    api = config.new_client_from_config(config_file=str(sim_cluster.kubeconfig))
    yield api
    api.close()


@pytest.fixture
def namespace(kube_api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"t-{stem}-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


@dataclass
class Widgets:
    """The test CRD ``Widget`` (namespaced, status subresource) through the CustomObjects API."""

    api: client.ApiClient
    group: str = WIDGET["group"]
    version: str = WIDGET["version"]
    plural: str = WIDGET["plural"]
    kind: str = WIDGET["kind"]

    @property
    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def _args(self, namespace: str) -> tuple[str, str, str, str]:
        return self.group, self.version, namespace, self.plural

    def create(self, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": f"{self.group}/{self.version}", "kind": self.kind, "metadata": {"name": name},
                "spec": spec}
        return self._custom.create_namespaced_custom_object(*self._args(namespace), body)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return self._custom.get_namespaced_custom_object(*self._args(namespace), name)

    def patch_spec(self, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch ``spec``."""
        return self._custom.patch_namespaced_custom_object(*self._args(namespace), name, {"spec": spec})

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch ``status`` through the status subresource."""
        return self._custom.patch_namespaced_custom_object_status(*self._args(namespace), name,
                                                                  {"status": status})


@pytest.fixture(scope="session")
def widgets(sim_cluster: SimCluster, kube_api: client.ApiClient) -> Widgets:
    """The test CRD ``Widget`` installed (namespaced, with a status subresource), and an API for it."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{WIDGET['plural']}.{WIDGET['group']}"},
        "spec": {
            "group": WIDGET["group"], "scope": "Namespaced",
            "names": {"plural": WIDGET["plural"], "singular": "widget", "kind": WIDGET["kind"]},
            "versions": [{
                "name": WIDGET["version"], "served": True, "storage": True, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }}},
            }],
        },
    }
    manifest = sim_cluster.state_dir / "widget-crd.json"
    manifest.write_text(json.dumps(crd))
    sim_cluster.kubectl("apply", "-f", str(manifest))
    sim_cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd['metadata']['name']}")
    return Widgets(kube_api)
