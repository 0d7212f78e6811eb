"""``python -m installer plan`` shows no credential in any output format: canaries planted in the spec, nested under
credential-named keys (an identity provider's ``credentials`` mapping, a list, a number), in secret fields and in
env-variable pairs, never appear in ``-o text``, ``-o json`` or ``-o yaml``, with or without ``--objects``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from engine_zygote import ENGINE
from installer_state import cc_with

REPO = Path(__file__).resolve().parents[2]
CANARY = "CANARY-5f2e"
PROVIDER = {
    "host": "ldap.example:389", "managerDN": "cn=admin", "managerPassword": f"{CANARY}-manager",
    "credentials": {"pass": f"{CANARY}-pass", "user": f"{CANARY}-user", "more": {"deeper": f"{CANARY}-deep"}},
    "privateKey": [f"{CANARY}-item", {"k": f"{CANARY}-map"}], "clientSecret": 918273645, "insecure": True,
    "env": [{"name": "LDAP_PASSWORD", "value": f"{CANARY}-env"}, {"value": f"{CANARY}-env2", "name": "X_TOKEN"}],
}
SPEC = {"authentication__jwtSecret": f"{CANARY}-jwt-{'x' * 32}", "authentication__adminPassword": "Canary-5f2e-Admin1",
        "authentication__oauthOptions": {"identityProviders": [
            {"name": "ldap", "type": "LDAPIdentityProvider", "mappingMethod": "auto", "provider": PROVIDER}]}}
SHOWN = re.compile(rf"{CANARY}|Canary-5f2e|918273645")


def _plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENGINE, "plan", *args], capture_output=True, text=True, cwd=REPO, timeout=600,
                          check=False)


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("redaction")
    (tmp / "last.yaml").write_text(yaml.safe_dump(cc_with()))
    (tmp / "desired.yaml").write_text(yaml.safe_dump(cc_with(**SPEC)))
    return tmp / "desired.yaml", tmp / "last.yaml"


@pytest.mark.parametrize("output", ["text", "json", "yaml"])
def test_plan_objects_shows_no_canary_in_any_format(specs: tuple[Path, Path], output: str) -> None:
    desired, _ = specs
    proc = _plan("--objects", "--offline", "--desired", str(desired), "-o", output)
    assert proc.returncode == 1, proc.stderr[-3000:]  # changes: everything is created
    assert SHOWN.findall(proc.stdout + proc.stderr) == []
    if output == "yaml":  # the config the credentials went into is printed, their places hidden
        (config,) = [d for d in yaml.safe_load_all(proc.stdout) if d["metadata"]["name"] == "kubesphere-config"]
        provider = yaml.safe_load(config["data"]["kubesphere.yaml"])["authentication"]["oauthOptions"][
            "identityProviders"][0]["provider"]
        assert {k: provider[k] for k in ("host", "managerPassword", "credentials", "privateKey", "clientSecret",
                                         "insecure")} == {
            "host": "ldap.example:389", "managerPassword": "<redacted>", "credentials": "<redacted>",
            "privateKey": "<redacted>", "clientSecret": "<redacted>", "insecure": True}
        assert [e["value"] for e in provider["env"]] == ["<redacted>", "<redacted>"]


@pytest.mark.parametrize("output", ["text", "json", "yaml"])
def test_plan_changes_show_no_canary_in_any_format(specs: tuple[Path, Path], output: str) -> None:
    desired, last = specs
    proc = _plan("--desired", str(desired), "--last-applied", str(last), "-o", output)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "authentication.jwtSecret" in proc.stdout
    assert SHOWN.findall(proc.stdout + proc.stderr) == []
