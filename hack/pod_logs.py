#!/usr/bin/env python3
"""The kubelet's container-log endpoint for the simulated cluster's pods whose container runs on this machine.

`kubectl logs` asks kube-apiserver, which asks the pod's node: ``GET https://<node InternalIP>:10250/containerLogs/
<namespace>/<pod>/<container>?follow=true&tailLines=1``. kwok, which plays the nodes, serves no such endpoint; this
does, on each node address of the cluster, for the pods its map names: the demo's installer pod, whose container
is the demo's shell-operator (or the installer image run by podman), has that process's output as its log.
Other pods get 404, as a container without logs.

    python hack/pod_logs.py MAP.json NODE_IP...

``MAP.json`` is read on each request: ``{"pods": [{"namespace": ..., "prefix": <pod name prefix>, "log": <file>,
"offset": <byte where the current container's output starts>}]}``. Query parameters kept: ``tailLines``,
``follow``, ``limitBytes``; the log is sent as written (no ``timestamps``).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import signal
import ssl
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

KUBELET_PORT = 10250
"""The port kube-apiserver dials on a node whose status names none (kwok's Nodes name none)."""
FOLLOW_POLL = 0.2


def find_log(map_file: Path, namespace: str, pod: str) -> tuple[Path, int] | None:
    """The log file and start offset of ``namespace/pod``'s container, if the map names the pod."""
    try:
        pods = json.loads(map_file.read_text()).get("pods") or []
    except (OSError, ValueError):
        return None
    for entry in pods:
        if entry.get("namespace") == namespace and pod.startswith(str(entry.get("prefix"))):
            return Path(entry["log"]), int(entry.get("offset") or 0)
    return None


def tail(data: bytes, lines: int | None) -> bytes:
    """The last ``lines`` lines of ``data`` (all of it when None)."""
    if lines is None:
        return data
    if lines <= 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


def read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


class Handler(BaseHTTPRequestHandler):
    map_file: Path
    stopping: threading.Event

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        if len(parts) != 4 or parts[0] != "containerLogs":
            self.send_error(404, "only /containerLogs/<namespace>/<pod>/<container> is served")
            return
        found = find_log(self.map_file, parts[1], parts[2])
        if found is None:
            self.send_error(404, f"no log for pod {parts[1]}/{parts[2]}")
            return
        query = parse_qs(url.query)
        lines = int(query["tailLines"][0]) if "tailLines" in query else None
        limit = int(query["limitBytes"][0]) if "limitBytes" in query else None
        follow = query.get("follow", ["false"])[0] in ("true", "1")
        path, offset = found
        data = read_from(path, offset)
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written is sent once it ends
        position = offset + len(complete)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        sent = self._send(tail(complete, lines), limit, 0)
        while follow and sent is not None and not self.stopping.is_set():
            time.sleep(FOLLOW_POLL)
            data = read_from(path, position)
            complete = data[:data.rfind(b"\n") + 1]
            if complete:
                position += len(complete)
                sent = self._send(complete, limit, sent)

    def _send(self, data: bytes, limit: int | None, sent: int) -> int | None:
        """Write ``data`` (within ``limit`` bytes in all); the bytes sent so far, None once done or disconnected."""
        if limit is not None:
            data = data[:max(limit - sent, 0)]
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            return None
        sent += len(data)
        return None if limit is not None and sent >= limit else sent

    def log_message(self, fmt: str, *args: Any) -> None:
        """Only the log requests: metrics-server's scrapes of the nodes' kubelets (404 here) would fill the file."""
        if self.path.startswith("/containerLogs/"):
            sys.stderr.write(f"{self.address_string()} {fmt % args}\n")


def self_signed(directory: Path, addresses: list[str]) -> ssl.SSLContext:
    """A TLS context with a certificate for ``addresses`` (kube-apiserver checks a kubelet's certificate only when
    given a CA for it, which the simulated cluster's is not)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kwok-kubelet")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.TraditionalOpenSSL,
                                                          serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    return context


def start(map_file: Path, addresses: list[str], port: int, stopping: threading.Event) -> list[ThreadingHTTPServer]:
    """A TLS server per address, each serving in a thread of its own."""
    handler = type("PodLogHandler", (Handler,), {"map_file": map_file, "stopping": stopping})
    with tempfile.TemporaryDirectory(prefix="ks-pod-logs-") as tmp:
        context = self_signed(Path(tmp), addresses)
    servers = []
    for address in addresses:
        server = ThreadingHTTPServer((address, port), handler)
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    return servers


def serve(map_file: Path, addresses: list[str]) -> None:
    """Serve on each address's kubelet port until SIGTERM or SIGINT."""
    stopping = threading.Event()
    servers = start(map_file, addresses, KUBELET_PORT, stopping)
    print(f"serving container logs on {', '.join(f'{a}:{KUBELET_PORT}' for a in addresses)} from {map_file}",
          flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    while not done.wait(1):
        pass
    stopping.set()
    for server in servers:
        server.shutdown()


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    serve(Path(argv[0]), argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
