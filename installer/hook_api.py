"""The cc through the API with the standard library alone, for the hook's first step (installer.hook): no
Kubernetes client is loaded, so the fast path stays cheap.

Credentials are found as installer.objects.kube.api_client finds them: the pod's ServiceAccount, else the current
context of ``$KUBECONFIG`` (a token, a token file or a client certificate; an exec plugin or an auth provider is
:class:`Unsupported`, and then the full reconcile does the same step with the client).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from installer.settings import CC_GROUP, CC_NAME, CC_PLURAL, CC_VERSION, NAMESPACE

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT = 5.0


class HookApiError(RuntimeError):
    """The API answered with an error, or could not be reached."""


class Unsupported(HookApiError):
    """Credentials this module does not handle (the Kubernetes client does)."""


@dataclass(frozen=True)
class Endpoint:
    """Where the API server is and how to authenticate to it."""

    server: str
    tls: ssl.SSLContext | None
    token: str | None = None


def endpoint() -> Endpoint:
    """The in-cluster endpoint in a pod (``KUBERNETES_SERVICE_HOST`` set, no ``KUBECONFIG``), else the kubeconfig's."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
        return _in_cluster()
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    path = next((Path(p) for p in paths if Path(p).is_file()), Path.home() / ".kube" / "config")
    return from_kubeconfig(path)


def _in_cluster() -> Endpoint:
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    host = f"[{host}]" if ":" in host else host
    tls = ssl.create_default_context(cafile=str(SA_DIR / "ca.crt"))
    return Endpoint(f"https://{host}:{port}", tls, (SA_DIR / "token").read_text().strip())


def from_kubeconfig(path: Path) -> Endpoint:
    """The endpoint of ``path``'s current context."""
    config = _document(path.read_text()) or {}
    context = _named(config, "contexts", config.get("current-context"), "context")
    cluster = _named(config, "clusters", context.get("cluster"), "cluster")
    user = _named(config, "users", context.get("user"), "user")
    if any(key in user for key in ("exec", "auth-provider")) or "server" not in cluster:
        raise Unsupported(f"{path}: credentials the hook's first step does not read")
    base = path.parent
    tls = None
    if cluster["server"].startswith("https:"):
        tls = _server_check(cluster, base)
        _client_certificate(tls, user, base)
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text().strip()
    return Endpoint(cluster["server"].rstrip("/"), tls, token or None)


def _document(text: str) -> Any:
    """A kubeconfig's data: JSON (which YAML includes) needs no YAML parser, and PyYAML's import alone is a tenth
    of a no-op hook run."""
    try:
        return json.loads(text)
    except ValueError:
        from installer.yaml_c import load

        return load(text)


def _server_check(cluster: dict[str, Any], base: Path) -> ssl.SSLContext:
    """TLS that trusts the kubeconfig's CA alone, as the Kubernetes client does (the system's CAs only when it names
    none: loading those costs tens of milliseconds), or verifies nothing with ``insecure-skip-tls-verify``."""
    if cluster.get("insecure-skip-tls-verify"):
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
        return tls
    if "certificate-authority-data" in cluster:
        return ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    if "certificate-authority" in cluster:
        return ssl.create_default_context(cafile=str(base / cluster["certificate-authority"]))
    return ssl.create_default_context()


def _named(config: dict[str, Any], section: str, name: Any, key: str) -> dict[str, Any]:
    found = next((entry.get(key) for entry in config.get(section) or [] if entry.get("name") == name), None)
    if not isinstance(found, dict):
        raise Unsupported(f"no {key} {name!r} in the kubeconfig")
    return found


def _client_certificate(tls: ssl.SSLContext, user: dict[str, Any], base: Path) -> None:
    """Load the user's client certificate; embedded data goes through a private temporary directory (ssl reads
    certificates from files only) that is removed at once."""
    if "client-certificate-data" in user and "client-key-data" in user:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="ks-hook-") as tmp:
            cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
            for file, field in ((cert, "client-certificate-data"), (key, "client-key-data")):
                file.touch(mode=0o600)
                file.write_bytes(base64.b64decode(user[field]))
            tls.load_cert_chain(str(cert), str(key))
    elif "client-certificate" in user and "client-key" in user:
        tls.load_cert_chain(str(base / user["client-certificate"]), str(base / user["client-key"]))


class HookCc:
    """The cc as :class:`installer.engine.status.GuardedCc` wants it: read, and a status patch guarded by its
    resourceVersion."""

    def __init__(self, api: Endpoint) -> None:
        self.api = api
        self.path = (f"/apis/{CC_GROUP}/{CC_VERSION}/namespaces/{quote(NAMESPACE)}/{CC_PLURAL}/"
                     f"{quote(CC_NAME)}")

    def get(self) -> dict[str, Any] | None:
        status, body = self._request("GET", self.path)
        if status == 404:
            return None
        return body

    def patch_status_at(self, status: dict[str, Any], resource_version: str) -> bool:
        """JSON-merge-patch ``.status`` only while the cc is at ``resource_version``; False if it moved on."""
        patch = {"metadata": {"resourceVersion": resource_version}, "status": status}
        code, _ = self._request("PATCH", self.path + "/status", patch)
        return code != 409

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        url = urlsplit(self.api.server)
        conn: http.client.HTTPConnection
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(url.hostname or "", url.port, timeout=TIMEOUT, context=self.api.tls)
        else:
            conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=TIMEOUT)
        headers = {"Accept": "application/json"}
        if self.api.token:
            headers["Authorization"] = f"Bearer {self.api.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/merge-patch+json"
        try:
            conn.request(method, url.path + path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except OSError as exc:
            raise HookApiError(f"{method} {path}: {exc}") from exc
        finally:
            conn.close()
        if response.status not in (200, 201, 404, 409):
            raise HookApiError(f"{method} {path}: HTTP {response.status}: {raw[:300]!r}")
        return response.status, json.loads(raw or b"{}")
