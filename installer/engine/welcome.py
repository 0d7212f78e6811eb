"""The result step: once the console's modules are installed, wait for it, then print the welcome box.

The box goes to the log and to ``<base>/playbooks/kubesphere_running`` (KubeKey polls that file, CI greps
the log for ``Welcome to KubeSphere``). The admin password is shown only when it is the documented
default; otherwise the box says where to read it, so no secret reaches the log.

The file follows upstream v3.4.1, where result-info.yaml renders it at the very end of a run: the wait for the
console starts as soon as the console's modules are in, but the file is written (replaced whole, never empty or
absent meanwhile) only once every module of the run has ended, and only if each enabled module of upstream's core
phase (``Module.core_phase``) is installed; a failed pluggable module does not keep it back. Nothing removes it but
``uninstall --all``; a new pod starts without it, as upstream's container does.

The box is logged, as upstream's runner logged it, when the file is written and every enabled module is installed,
unless the reconcile was started by the schedule alone and ran no module (installer.engine.reconcile decides; see
docs/status.md, "The welcome box").
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from installer.engine import welcome_box
from installer.engine.beside import beside
from installer.objects.api_errors import api_reason
from installer.objects.core_secret import DEFAULT_PASSWORD
from installer.objects.readiness import WaitStopped, deployment_ref, wait_ready
from installer.settings import CORE_SECRET, NAMESPACE

log = logging.getLogger("installer")
CONSOLE_DEPLOYMENTS = ("ks-apiserver", "ks-console")
#: Seconds the box's address and password line, read once the console is ready, stay good for the box.
INPUTS_FRESH = 10.0


class ConsoleNotReady(RuntimeError):
    pass


def wait_for_console(api: client.ApiClient, timeout: float, stop: threading.Event | None = None) -> None:
    """Wait for ks-apiserver and ks-console; ConsoleNotReady after ``timeout``, WaitStopped once ``stop`` is set."""
    try:
        wait_ready(DynamicClient(api), [deployment_ref(n, NAMESPACE) for n in CONSOLE_DEPLOYMENTS], timeout, stop)
    except TimeoutError as exc:
        raise ConsoleNotReady(str(exc)) from exc


def console_address(api: client.ApiClient) -> str:
    core = client.CoreV1Api(api)
    first_ip = beside(lambda: first_internal_ip(core), "welcome-node")  # read with the Service
    svc = core.read_namespaced_service("ks-console", NAMESPACE)
    port = next((p.node_port for p in svc.spec.ports if p.node_port), None)
    ip = first_ip.result()
    if port and ip:
        return f"http://{ip}:{port}"
    return f"http://{svc.spec.cluster_ip}:{svc.spec.ports[0].port} (service ks-console, type {svc.spec.type})"


def first_internal_ip(core: client.CoreV1Api, page: int = 20) -> str | None:
    """The InternalIP of the first node, by name, that has one: the API lists nodes in name order, read a page at a
    time as plain JSON (not every node of a large cluster as models)."""
    token = None
    while True:
        items = json.loads(core.list_node(limit=page, _continue=token, _preload_content=False).data)
        for node in items.get("items") or []:
            for address in (node.get("status") or {}).get("addresses") or []:
                if address.get("type") == "InternalIP":
                    return str(address["address"])
        token = (items.get("metadata") or {}).get("continue")
        if not token:
            return None


def password_line(api: client.ApiClient) -> str:
    try:
        data = client.CoreV1Api(api).read_namespaced_secret(CORE_SECRET, NAMESPACE).data or {}
    except ApiException:
        data = {}
    raw = data.get("initAdminPassword")
    if raw is None or base64.b64decode(raw).decode() == DEFAULT_PASSWORD:
        return f"Password: {DEFAULT_PASSWORD}"
    return f"Password: the initAdminPassword key of Secret {NAMESPACE}/{CORE_SECRET}"


def box_inputs(api: client.ApiClient) -> tuple[str, str]:
    """The box's console address and password line, read side by side."""
    password = beside(lambda: password_line(api), "welcome-password")
    return console_address(api), password.result()


def write_welcome(api: client.ApiClient, running_file: Path, announce: bool = True,
                  inputs: tuple[str, str] | None = None) -> str:
    """Write ``kubesphere_running`` (replaced whole) and (when ``announce``) log the box; return the text.
    ``inputs``: :func:`box_inputs`, read already."""
    address, password = inputs or box_inputs(api)
    text = welcome_box.render(address, password, welcome_box.now())
    welcome_box.save(running_file, text)
    if announce:
        welcome_box.show(text)
    return text


class WelcomeStep:
    """The result step of a reconcile, in its own thread: started once every console module is installed and
    none is still to run; ``report(ready, message)`` receives what it found as soon as it knows (nothing when
    stopped meanwhile). The file waits for :meth:`settle` (every module of the run has ended) and is written
    only if ``missing()`` (the enabled ``core_phase`` modules not installed) is empty then; the box is logged
    with it if :meth:`settle` said so and ``pending()`` (every enabled module not installed) is empty."""

    def __init__(self, api: client.ApiClient, running_file: Path, timeout: float, stop: threading.Event,
                 report: Callable[[bool, str], None], missing: Callable[[], list[str]] = list,
                 pending: Callable[[], list[str]] = list) -> None:
        self.api, self.running_file, self.timeout, self.stop, self.report = api, running_file, timeout, stop, report
        self.missing, self.pending = missing, pending
        self.thread: threading.Thread | None = None
        self._settled = threading.Event()
        self.reported = threading.Event()
        """Set once ``report`` has the console's outcome (its status write queued)."""
        self._write = True
        self._announce = False

    def settle(self, write: bool = True, announce: bool = False) -> None:
        """Every module of the run has ended (``write=False``: the run broke off; leave the file as it is);
        ``announce``: log the box with the file if every enabled module is installed."""
        self._write, self._announce = write, announce
        self._settled.set()

    def _may_write(self) -> bool:
        """Wait for :meth:`settle`; whether the file is to be written then."""
        while not self._settled.wait(0.5):
            if self.stop.is_set():
                log.info("Not writing kubesphere_running: the installer is stopping")
                return False
        if not self._write or self.stop.is_set():
            return False
        if missing := self.missing():
            log.info("Not writing kubesphere_running: %s not installed (upstream stops before its result step)",
                     ", ".join(missing))
            return False
        return True

    def _announced(self) -> bool:
        """Whether the box goes to the log with the file (upstream logged it after a run where every task
        succeeded)."""
        if not self._announce:
            return False
        if pending := self.pending():
            log.info("Not showing the welcome box: %s not installed", ", ".join(pending))
            return False
        return True

    @property
    def started(self) -> bool:
        return self.thread is not None

    def start(self) -> None:
        """Wait for the console in the background."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="welcome")
            self.thread.start()

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()

    def _run(self) -> None:
        """ConsoleReady as soon as the console is; the file (and the box) once the run has settled."""
        try:
            wait_for_console(self.api, self.timeout, self.stop)
        except WaitStopped:
            log.info("Stopped waiting for the console: the installer is stopping; the next start waits again")
            return
        except (ConsoleNotReady, ApiException) as exc:
            self.report(False, str(exc))
            self.reported.set()
            return
        self.report(True, "ks-apiserver and ks-console are Available")
        self.reported.set()
        # The box's reads while the run goes on; read again if the run ends long after.
        inputs, read_at = beside(lambda: box_inputs(self.api), "welcome-inputs"), time.monotonic()
        if not self._may_write():
            return
        try:
            fresh = time.monotonic() - read_at <= INPUTS_FRESH
            write_welcome(self.api, self.running_file, self._announced(), inputs.result() if fresh else None)
        except ApiException as exc:
            log.error("Failed to write kubesphere_running: %s", api_reason(exc))
