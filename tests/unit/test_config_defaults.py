"""The packaged default ClusterConfiguration, ``apply_defaults`` and ``redact``."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from installer.config import Prepared, apply_defaults, default_spec, prepare, redact
from installer.config.defaults import default_cr
from installer.config.secrets import SECRET_PATHS, is_secret

REPO = Path(__file__).resolve().parents[2]


def test_deploy_copy_matches_the_packaged_default() -> None:
    deploy = yaml.safe_load((REPO / "deploy" / "cluster-configuration.yaml").read_text())
    packaged = yaml.safe_load((REPO / "installer" / "data" / "cluster-configuration.yaml").read_text())
    assert deploy == packaged == default_cr()


def test_default_cr_identity() -> None:
    cr = default_cr()
    assert cr["apiVersion"] == "installer.kubesphere.io/v1alpha1"
    assert cr["kind"] == "ClusterConfiguration"
    assert cr["metadata"] == {"name": "ks-installer", "namespace": "kubesphere-system",
                              "labels": {"version": "v3.4.1"}}


def test_default_spec_values() -> None:
    spec = default_spec()
    assert spec["common"]["core"]["console"] == {"enableMultiLogin": True, "port": 30880, "type": "NodePort"}
    assert spec["common"]["opensearch"]["enabled"] is True and spec["common"]["es"]["enabled"] is False
    assert spec["devops"]["jenkinsCpuReq"] == 0.5 and spec["devops"]["jenkinsCpuLim"] == 1
    assert spec["multicluster"] == {"clusterRole": "none"}
    assert spec["edgeruntime"]["kubeedge"]["cloudCore"]["service"]["cloudhubNodePort"] == "30000"
    assert spec["terminal"] == {"timeout": 600}


def test_commented_keys_and_telemetry_are_absent() -> None:
    spec = default_spec()
    assert "telemetry_enabled" not in spec and "dev_tag" not in spec
    assert "adminPassword" not in spec["authentication"]
    assert "apiserver" not in spec["common"]["core"] and "type" not in spec["common"]["monitoring"]
    assert "master" not in spec["common"]["es"] and "prometheus" not in spec["monitoring"]
    assert "image" not in spec["terminal"] and "thanosruler" not in spec["alerting"]


def test_default_spec_is_a_fresh_copy() -> None:
    default_spec()["common"]["redis"]["enabled"] = True
    assert default_spec()["common"]["redis"]["enabled"] is False


def test_apply_defaults_user_wins_dicts_merge_lists_replace() -> None:
    user = {"common": {"redis": {"enabled": True}, "gpu": {"kinds": [{"resourceName": "amd.com/gpu",
                                                                      "resourceType": "GPU"}]}},
            "devops": {"enabled": True}}
    before = copy.deepcopy(user)
    out = apply_defaults(user)
    assert user == before
    assert out["common"]["redis"] == {"enabled": True, "enableHA": False, "volumeSize": "2Gi"}
    assert out["common"]["gpu"]["kinds"] == [{"resourceName": "amd.com/gpu", "resourceType": "GPU"}]
    assert out["devops"]["enabled"] is True and out["devops"]["jenkinsVolumeSize"] == "16Gi"
    assert out["monitoring"] == default_spec()["monitoring"]


def test_apply_defaults_does_not_alias_user_values() -> None:
    user = {"monitoring": {"nodeSelector": {"a": "b"}}}
    out = apply_defaults(user)
    out["monitoring"]["nodeSelector"]["a"] = "changed"
    assert user["monitoring"]["nodeSelector"]["a"] == "b"


def test_apply_defaults_of_empty_is_the_default() -> None:
    assert apply_defaults({}) == default_spec()


def test_prepare_default_is_clean() -> None:
    prepared = prepare(default_spec())
    assert prepared == Prepared(default_spec(), [], [])


def test_prepare_rejects_non_mapping() -> None:
    for raw in (None, "x", [1], 3):
        prepared = prepare(raw)
        assert [e.path for e in prepared.errors] == ["spec"]
        assert "object" in prepared.errors[0].message


def test_prepare_defaults_a_sparse_spec() -> None:
    prepared = prepare({"alerting": {"enabled": True}, "terminal": {"timeout": 0}})
    assert prepared.errors == [] and prepared.migrations == []
    assert prepared.spec["alerting"] == {"enabled": True}
    assert prepared.spec["common"] == default_spec()["common"]


def test_secret_paths_cover_the_credentials() -> None:
    for path in ("authentication.jwtSecret", "authentication.adminPassword", "common.es.basicAuth.password",
                 "common.opensearch.basicAuth.password", "common.s3.secretAccessKey", "common.mysqlPassword",
                 "devops.sonarqube.externalSonarToken"):
        assert path in SECRET_PATHS and is_secret(path)
    assert is_secret("common.es.basicAuth")  # an ancestor holds a secret
    assert is_secret("authentication.oauthOptions.identityProviders[0].provider.clientSecret")
    assert not is_secret("common.es.basicAuth.username") and not is_secret("multicluster.clusterRole")


def test_redact() -> None:
    spec = apply_defaults({"authentication": {"jwtSecret": "jwt-value", "adminPassword": "",
                                              "oauthOptions": {"identityProviders": [
                                                  {"name": "gh", "provider": {"clientSecret": "cs-value"}}]}},
                           "common": {"s3": {"secretAccessKey": "sk-value", "endpoint": "http://s3"},
                                      "mysqlPassword": "db-value"},
                           "devops": {"sonarqube": {"externalSonarToken": "tok-value"}}})
    before = copy.deepcopy(spec)
    out = redact(spec)
    assert spec == before
    assert out["authentication"]["jwtSecret"] == "<redacted>"
    assert out["authentication"]["adminPassword"] == ""  # empty stays empty
    assert out["authentication"]["oauthOptions"] == "<redacted>"  # free-form and marked x-secret: all of it
    assert out["common"]["opensearch"]["basicAuth"] == {"enabled": True, "username": "admin", "password": "<redacted>"}
    assert out["common"]["es"]["basicAuth"]["password"] == ""
    assert out["common"]["s3"] == {"secretAccessKey": "<redacted>", "endpoint": "http://s3"}
    assert out["common"]["mysqlPassword"] == "<redacted>"
    assert out["devops"]["sonarqube"]["externalSonarToken"] == "<redacted>"
    assert "value" not in yaml.safe_dump(out)
