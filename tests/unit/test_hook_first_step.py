"""The hook's first step on a newer generation: Ready Unknown (reason Progressing) through installer.hook_api, the
standard library's HTTP against a stand-in API server, guarded by the snapshot's resourceVersion."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from installer import hook, hook_api
from installer.settings import CC_NAME

READY = {"type": "Ready", "status": "True", "reason": "Installed", "message": "4 modules installed",
         "observedGeneration": 3, "lastTransitionTime": "2026-01-01T00:00:00Z"}


def _cc(generation: int, version: str) -> dict[str, Any]:
    return {"metadata": {"name": CC_NAME, "generation": generation, "resourceVersion": version},
            "status": {"observedGeneration": 3, "conditions": [READY]}}


class FakeApi:
    """The cc at ``live``; a status patch applies only at its resourceVersion (409 otherwise)."""

    def __init__(self, live: dict[str, Any]) -> None:
        self.live = live
        self.requests: list[tuple[str, str, dict[str, Any] | None, str | None]] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                api.requests.append(("GET", self.path, None, self.headers.get("Authorization")))
                self._answer(200, api.live)

            def do_PATCH(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append(("PATCH", self.path, body, self.headers.get("Authorization")))
                if body["metadata"]["resourceVersion"] != api.live["metadata"]["resourceVersion"]:
                    self._answer(409, {"reason": "Conflict"})
                    return
                api.live = {**api.live, "status": {**api.live["status"], **body["status"]}}
                self._answer(200, api.live)

        return Handler


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    fake = FakeApi(_cc(4, "20"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    (tmp_path / "token").write_text("sekret\n")
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "u", "user": {"tokenFile": "token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    yield fake
    server.shutdown()


def _contexts(cc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"binding": hook.SPEC_BINDING, "snapshots": {hook.SPEC_BINDING: [{"object": cc}]}}]


def _ready(cc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in cc["status"]["conditions"] if c["type"] == "Ready")


def test_a_newer_generation_turns_ready_unknown_first(api: FakeApi, caplog: pytest.LogCaptureFixture) -> None:
    snapshot = _cc(4, "20")
    with caplog.at_level("INFO", logger="installer"):
        hook._mark_progressing(_contexts(snapshot))
    (method, path, body, auth), = api.requests
    assert (method, path.endswith(f"/{CC_NAME}/status"), auth) == ("PATCH", True, "Bearer sekret")
    assert body is not None and body["metadata"] == {"resourceVersion": "20"}
    ready = _ready(api.live)
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("Unknown", "Progressing", 4)
    assert ready["message"] == "generation 4 is not reconciled yet"
    assert api.live["status"]["observedGeneration"] == 3  # the generation reconciled stays
    assert "Generation 4 is not reconciled yet: Ready is Unknown until it is" in caplog.text
    assert _ready(snapshot)["status"] == "True"  # the fast path decides from the snapshot as shell-operator gave it


def test_a_stale_snapshot_is_read_again(api: FakeApi) -> None:
    api.live = _cc(5, "21")
    hook._mark_progressing(_contexts(_cc(4, "20")))
    assert [(m, (b or {}).get("metadata")) for m, _, b, _ in api.requests] == [
        ("PATCH", {"resourceVersion": "20"}), ("GET", None), ("PATCH", {"resourceVersion": "21"})]
    assert (_ready(api.live)["status"], _ready(api.live)["observedGeneration"]) == ("Unknown", 5)


def test_nothing_is_sent_when_ready_is_about_this_generation(api: FakeApi) -> None:
    hook._mark_progressing(_contexts(_cc(3, "20")))
    hook._mark_progressing([{"binding": hook.SCHEDULE_BINDING, "snapshots": {hook.SPEC_BINDING: []}}])
    assert api.requests == []


def test_credentials_the_step_does_not_read_leave_it_to_the_full_reconcile(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    config = {"current-context": "c", "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
              "users": [{"name": "u", "user": {"exec": {"command": "aws"}}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    kubeconfig.write_text(json.dumps(config))
    with pytest.raises(hook_api.Unsupported):
        hook_api.from_kubeconfig(kubeconfig)
    config["users"] = [{"name": "u", "user": {"token": "t"}}]
    config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(b"not a CA").decode()
    kubeconfig.write_text(json.dumps(config))
    with pytest.raises(OSError):  # an unreadable CA (ssl.SSLError)
        hook_api.from_kubeconfig(kubeconfig)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    hook._mark_progressing(_contexts(_cc(4, "20")))  # logged, not raised: the hook goes on


def test_a_status_it_cannot_read_is_left_to_the_full_reconcile(api: FakeApi) -> None:
    for status in ("not a status", {"conditions": "not a list"}, {"conditions": ["not a condition"]}):
        hook._mark_progressing(_contexts({"metadata": {"generation": 4, "resourceVersion": "20"}, "status": status}))
    assert api.requests == []


def _ca_pem() -> str:
    """A self-signed CA certificate."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def test_the_kubeconfigs_ca_is_the_only_one_trusted(tmp_path: Path) -> None:
    """As the Kubernetes client: a kubeconfig that names a CA trusts it alone (the system's CAs are not loaded);
    a YAML kubeconfig is read as well as a JSON one; insecure-skip-tls-verify verifies nothing."""
    import ssl

    pem = _ca_pem()
    (tmp_path / "ca.crt").write_text(pem)
    kubeconfig = tmp_path / "kubeconfig"
    cluster = {"server": "https://127.0.0.1:6443",
               "certificate-authority-data": base64.b64encode(pem.encode()).decode()}
    config = {"current-context": "c", "clusters": [{"name": "c", "cluster": cluster}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    kubeconfig.write_text(json.dumps(config))
    endpoint = hook_api.from_kubeconfig(kubeconfig)
    assert endpoint.tls is not None and [c["subject"] for c in endpoint.tls.get_ca_certs()] == [
        ((("commonName", "test-ca"),),)]
    assert (endpoint.tls.verify_mode, endpoint.tls.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert (endpoint.server, endpoint.token) == ("https://127.0.0.1:6443", "t")

    import yaml

    del cluster["certificate-authority-data"]
    cluster["certificate-authority"] = "ca.crt"
    kubeconfig.write_text(yaml.safe_dump(config))
    endpoint = hook_api.from_kubeconfig(kubeconfig)
    assert endpoint.tls is not None and len(endpoint.tls.get_ca_certs()) == 1

    del cluster["certificate-authority"]
    cluster["insecure-skip-tls-verify"] = True
    kubeconfig.write_text(yaml.safe_dump(config))
    endpoint = hook_api.from_kubeconfig(kubeconfig)
    assert endpoint.tls is not None and endpoint.tls.verify_mode == ssl.CERT_NONE
