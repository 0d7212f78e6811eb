"""hack/pod_logs.py, the kubelet's log endpoint the simulated cluster's nodes lack: what kube-apiserver gets for
`kubectl logs` of a mapped pod (the tail, then the lines written later with ``follow``), and 404 for other pods."""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pod_logs import start


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The endpoint on a free loopback port; the log of pods ks-installer-* in kubesphere-system, from byte 8."""
    log = tmp_path / "operator.log"
    log.write_bytes(b"earlier\nline 1\nline 2\nNOTES\xef\xbc\x9a\n")
    mapping = {"pods": [{"namespace": "kubesphere-system", "prefix": "ks-installer-", "log": str(log), "offset": 8}]}
    (tmp_path / "map.json").write_text(json.dumps(mapping))
    stopping = threading.Event()
    (srv,) = start(tmp_path / "map.json", ["127.0.0.1"], 0, stopping)
    yield f"https://127.0.0.1:{srv.server_address[1]}", log
    stopping.set()
    srv.shutdown()


def get(url: str) -> urllib.request.addinfourl:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # as kube-apiserver without a kubelet CA
    return urllib.request.urlopen(url, context=context, timeout=10)


def test_the_tail_of_the_current_container(server: tuple[str, Path]) -> None:
    url, _ = server
    pod = f"{url}/containerLogs/kubesphere-system/ks-installer-6d9c-x7k2q/installer"
    assert get(pod).read() == "line 1\nline 2\nNOTES：\n".encode()  # noqa: RUF001 - upstream's box has it
    assert get(f"{pod}?tailLines=1").read() == "NOTES：\n".encode()  # noqa: RUF001
    assert get(f"{pod}?limitBytes=4").read() == b"line"


def test_follow_sends_the_lines_written_later(server: tuple[str, Path]) -> None:
    url, log = server
    with get(f"{url}/containerLogs/kubesphere-system/ks-installer-6d9c-x7k2q/installer?follow=true&tailLines=1") as r:
        assert r.readline() == "NOTES：\n".encode()  # noqa: RUF001
        time.sleep(0.5)
        with log.open("ab") as out:
            out.write(b"###              Welcome to KubeSphere!           ###\n")
        assert r.readline() == b"###              Welcome to KubeSphere!           ###\n"


def test_other_pods_have_no_log(server: tuple[str, Path]) -> None:
    url, _ = server
    for path in ("/containerLogs/default/ks-installer-1/installer", "/containerLogs/kubesphere-system/ks-apiserver-1/x",
                 "/stats/summary"):
        with pytest.raises(urllib.error.HTTPError) as err:
            get(url + path)
        assert err.value.code == 404
