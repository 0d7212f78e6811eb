"""Change lines (pod log, plan output, status) never show a credential, wherever it sits in the spec."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from installer.engine.changes import describe_changes


def test_oauth_client_secret_is_redacted() -> None:
    def idp(secret: str) -> dict:
        return {"authentication": {"oauthOptions": {"identityProviders": [
            {"name": "github", "provider": {"clientID": "id", "clientSecret": secret}}]}}}

    lines = describe_changes(idp("old-canary"), idp("new-canary"))
    assert lines == ["authentication.oauthOptions.identityProviders[0].provider.clientSecret: <redacted> -> "
                     "<redacted>"]


def test_a_whole_section_added_hides_the_credentials_inside() -> None:
    lines = describe_changes({"common": {}}, {"common": {"s3": {"endpoint": "https://s3", "secretAccessKey": "canary",
                                                                "accessKeyID": "ak-canary"}}})
    assert len(lines) == 1 and "canary" not in lines[0] and "https://s3" in lines[0]


def test_plain_values_are_shown() -> None:
    assert describe_changes({"etcd": {"port": 2379}}, {"etcd": {"port": 2380}}) == ["etcd.port: 2379 -> 2380"]


def test_anything_in_a_section_marked_secret_is_redacted_whatever_its_key() -> None:
    """oauthOptions is free-form and marked x-secret in the schema: keys no suffix rule knows stay hidden."""
    def idp(value: str) -> dict:
        return {"authentication": {"oauthOptions": {"identityProviders": [{"name": "corp", "provider": {
            "privateKey": f"pk-{value}", "apiKey": f"ak-{value}", "credentials": {"pass": f"pass-{value}"}}}]}}}

    lines = describe_changes(idp("old-canary"), idp("new-canary"))
    assert len(lines) == 3 and all(line.endswith(": <redacted> -> <redacted>") for line in lines), lines
    added = describe_changes({"authentication": {}}, idp("canary"))
    assert len(added) == 1 and "canary" not in added[0], added
    one, two = idp("one-canary"), idp("two-canary")
    two["authentication"]["oauthOptions"]["identityProviders"].insert(0, {"name": "more", "provider": {"k": "canary"}})
    lines = describe_changes(one, two)
    assert lines and all(line.endswith("<redacted>") and "canary" not in line for line in lines), lines


def test_secret_paths_are_the_schema_marks() -> None:
    from installer.config.secrets import SECRET_PATHS, is_credential

    assert {"authentication.jwtSecret", "authentication.oauthOptions", "common.es.basicAuth.password",
            "common.opensearch.basicAuth.password", "common.s3.secretAccessKey"} <= set(SECRET_PATHS)
    assert is_credential("authentication.oauthOptions.identityProviders[0].provider.privateKey")
    assert not is_credential("common.es.basicAuth.username")


def test_whizard_client_and_server_are_secret_sections() -> None:
    before = {"monitoring": {"whizard": {"client": {"authorization": {"type": "Bearer", "credentials": "canary-1"},
                                                    "x": "canary-2"}, "server": {"storage": {"k": "canary-3"}}}}}
    after = {"monitoring": {"whizard": {"client": {"authorization": {"type": "Bearer", "credentials": "canary-4"},
                                                   "x": "canary-5"}, "server": {"storage": {"k": "canary-6"}}}}}
    lines = describe_changes(before, after)
    assert lines and not any("canary" in line for line in lines)


KUBESPHERE_YAML = """authentication:
  jwtSecret: ""
  oauthOptions:
    identityProviders:
    - name: github
      provider:
        clientID: id
        clientSecret: {secret}
        privateKey: |
          -----BEGIN PRIVATE KEY-----
          {key}
          -----END PRIVATE KEY-----
        redirectURL: https://r
s3:
  endpoint: http://s3
  accessKeyID: AK-canary
  secretAccessKey: SK-canary
devops:
  sonar: {{host: http://sonar, token: "ST-canary"}}
  settings: {{"apiKey": "API-canary", "enabled": true}}
automountServiceAccountToken: false
"""


def test_config_texts_are_redacted_by_key_and_a_changed_credential_is_said_to_change() -> None:
    from installer.config.secrets import redact_text
    from installer.preview.object_plan import diff, redacted_manifest

    old = KUBESPHERE_YAML.format(secret="CS-old-canary", key="PK-old-canary")
    new = KUBESPHERE_YAML.format(secret="CS-new-canary", key="PK-old-canary")
    shown = redact_text(old)
    assert "canary" not in shown and "redirectURL: https://r" in shown and "jwtSecret: \"\"" in shown
    assert "automountServiceAccountToken: false" in shown and "endpoint: http://s3" in shown
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kubesphere-config"}}
    lines = diff({**cm, "data": {"kubesphere.yaml": old}}, {**cm, "data": {"kubesphere.yaml": new}})
    assert not any("canary" in line for line in lines)
    assert "    -        clientSecret: <redacted>" in lines
    assert "    +        clientSecret: <redacted> (changed)" in lines
    printed = redacted_manifest({**cm, "data": {"kubesphere.yaml": old}})
    assert "canary" not in str(printed)


def test_printed_manifests_hide_credential_fields_and_env_values() -> None:
    from installer.preview.object_plan import redacted_manifest

    deployment = {"kind": "Deployment", "spec": {"template": {"spec": {
        "automountServiceAccountToken": False,
        "containers": [{"name": "c", "env": [{"name": "S3_SECRET_ACCESS_KEY", "value": "canary"},
                                             {"name": "SONAR_TOKEN", "value": "canary"},
                                             {"name": "MODE", "value": "plain"}]}]}},
        "extra": {"apiKey": "canary"}}}
    shown = redacted_manifest(deployment)
    assert "canary" not in str(shown) and "plain" in str(shown)
    assert shown["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_list_items_added_or_removed_are_named_one_by_one() -> None:
    """A list that grew or shrank reports the items added or removed, not the whole list (deepdiff)."""
    def gateways(*names: str) -> dict:
        return {"servicemesh": {"istio": {"components": {"ingressGateways": [
            {"name": n, "enabled": True} for n in names]}}}}

    assert describe_changes(gateways("a"), gateways("a", "b")) == [
        'servicemesh.istio.components.ingressGateways[1]: <unset> -> {"enabled": true, "name": "b"}']
    assert describe_changes(gateways("a", "b"), gateways("a")) == [
        'servicemesh.istio.components.ingressGateways[1]: {"enabled": true, "name": "b"} -> <unset>']


def test_a_type_change_is_one_line() -> None:
    assert describe_changes({"etcd": {"port": 2379}}, {"etcd": {"port": "2379"}}) == ['etcd.port: 2379 -> "2379"']


#: A config with credentials nested under credential-named keys (a mapping, a list, a number), env-variable pairs
#: (the name before or after the value), and what stays: booleans, empty values, other keys.
NESTED = {"authentication": {"oauthOptions": {"identityProviders": [{"name": "ldap", "provider": {
    "managerPassword": 918273645, "credentials": {"pass": "C-pass", "more": {"deeper": "C-deep"}, "user": "C-user"},
    "privateKey": ["C-item", {"k": "C-map"}], "token": {"x": "C-token"}, "enabled": True, "apiKey": False,
    "secret": "", "clientSecret": {"x": "C-x", "y": "C-y, }"}, "host": "ldap.example:389", "password": None}}]}},
    "env": [{"name": "DB_PASSWORD", "value": "C-env"}, {"name": "MODE", "value": "plain"},
            {"value": "C-env-first", "name": "X_TOKEN"}],
    "after": "shown"}
CANARIES = re.compile(r"C-[a-z-]+|918273645")


@pytest.mark.parametrize("written", [
    lambda d: yaml.safe_dump(d, sort_keys=False),
    lambda d: yaml.safe_dump(d, sort_keys=False, default_flow_style=None),
    lambda d: json.dumps(d, indent=2),
    lambda d: json.dumps(d),
], ids=["yaml-block", "yaml-flow", "json-indented", "json-one-line"])
def test_a_config_text_is_redacted_by_the_rule_of_objects_and_specs(written: Callable[[Any], str]) -> None:
    from installer.config.secrets import redact, redact_keys, redact_text

    expected = redact_keys(NESTED)
    assert not CANARIES.findall(json.dumps(expected)) and not CANARIES.findall(json.dumps(redact({"x": NESTED})))
    provider = expected["authentication"]["oauthOptions"]["identityProviders"][0]["provider"]
    assert (provider["enabled"], provider["apiKey"], provider["secret"], provider["host"]) == (
        True, False, "", "ldap.example:389")
    assert provider["credentials"] == provider["managerPassword"] == "<redacted>"
    assert [e["value"] for e in expected["env"]] == ["<redacted>", "plain", "<redacted>"]
    shown = redact_text(written(NESTED))
    assert not CANARIES.findall(shown), shown
    assert yaml.safe_load(shown) == expected  # the same rule, line by line


def test_a_changed_credential_nested_in_a_config_text_is_said_to_change() -> None:
    from installer.preview.object_plan import diff, redacted_manifest

    changed = copy.deepcopy(NESTED)
    changed["authentication"]["oauthOptions"]["identityProviders"][0]["provider"]["credentials"]["more"] = "C-new"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kubesphere-config"}}
    for dump in (lambda d: yaml.safe_dump(d, sort_keys=False), lambda d: json.dumps(d, indent=2)):
        lines = diff({**cm, "data": {"k": dump(NESTED)}}, {**cm, "data": {"k": dump(changed)}})
        assert not CANARIES.findall("\n".join(lines)), lines
        assert [line.split("+", 1)[1].strip() for line in lines if line.startswith("    +")] in (
            ["credentials: <redacted> (changed)"], ['"credentials": "<redacted>", (changed)'])
    printed = redacted_manifest({**cm, "data": {"k": yaml.safe_dump(NESTED)}, "spec": NESTED})
    assert not CANARIES.findall(json.dumps(printed))
    assert printed["spec"]["authentication"]["oauthOptions"]["identityProviders"][0]["provider"]["enabled"] is True
