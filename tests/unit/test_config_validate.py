"""Spec validation: types, enums, formats, unknown keys, Jinja, secrets in messages, role transitions."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from installer_state import DEFAULT_CC

from installer.config import SpecError, apply_defaults, default_spec, prepare
from installer.config.validate import format_errors, format_path, schema, validate, validate_transition
from installer.json_bounded import MAX_DEPTH
from installer.spec import under

HOSTILE = "; rm -rf /"
JINJA = "{{ lookup('pipe','id') }}"


def with_value(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The default spec (or ``base``) with dotted ``path`` set to ``value``."""
    spec = copy.deepcopy(base) if base is not None else default_spec()
    node = spec
    *parents, leaf = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return spec


def errors_at(spec: dict[str, Any], path: str) -> list[SpecError]:
    return [e for e in validate(spec) if e.path == path]


def one_error(spec: dict[str, Any], path: str) -> str:
    errors = validate(spec)
    assert [e.path for e in errors] == [path], errors
    return errors[0].message


def test_default_spec_validates_clean() -> None:
    assert validate(default_spec()) == []
    assert validate({}) == []


def test_schema_is_valid_draft_2020_12() -> None:
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema())
    assert schema()["$schema"].endswith("2020-12/schema")


def test_extra_template_keys_are_accepted() -> None:
    extra = apply_defaults({
        "nodeSelector": {"role": "ks"}, "tolerations": [{"operator": "Exists"}], "affinity": {},
        "zone": "cn", "namespace_override": "kubesphereio", "enableHA": True, "telemetry_enabled": False,
        "dev_tag": "v3.4.1-dev", "gateway": {"namespace": "kubesphere-controls-system"},
        "terminal": {"image": "alpine:3.15", "timeout": 0},
        "authentication": {"adminPassword": "P@88w0rd!", "authenticateRateLimiterMaxTries": 10,
                           "authenticationRateLimiterDuration": "10m0s", "loginHistoryRetentionPeriod": "168h",
                           "maximumClockSkew": "10s", "oauthOptions": {"accessTokenMaxAge": "1h"}},
        "common": {"core": {"apiserver": {"resources": {"limits": {"cpu": "2"}}},
                            "controllerManager": {"resources": {}},
                            "nodeAffinity": {}, "nodeSelector": {}, "tolerations": [],
                            "console": {"extraVolumes": [{"name": "v"}], "extraVolumeMounts": [{"name": "v"}]}},
                   "s3": {"endpoint": "https://s3.example.com", "region": "us-east-1", "disableSSL": False,
                          "forcePathStyle": True, "accessKeyID": "AK", "secretAccessKey": "SK",
                          "openpitrixBucket": "app-store"},
                   "redis": {"nodeSelector": {}, "tolerations": [], "affinity": {}},
                   "openldap": {"nodeSelector": {}}, "minio": {"tolerations": []},
                   "opensearch": {"nodeSelector": {}, "externalOpensearchProtocol": "https", "eventMaxAge": 1,
                                  "auditingMaxAge": 2, "istioMaxAge": 4, "master": {"volumeSize": "4Gi",
                                                                                     "replicas": 1}},
                   "fluentbit": {"nodeSelector": {}, "affinity": {}},
                   "es": {"externalElasticsearchProtocol": "http", "eventMaxAge": "1", "logMaxAge": "7",
                          "externalElasticsearchHost": "10.0.0.5", "externalElasticsearchPort": 9200},
                   "notification": {"endpoint": "http://notification-manager-svc.kubesphere-monitoring-system.svc:19093"},
                   "containersLogMountedPath": "/var/lib/docker/containers",
                   "mysqlUsername": "root", "mysqlPassword": "pw", "monitoring": {"type": "external"}},
        "multicluster": {"clusterRole": "host", "proxyPublishAddress": "http://139.198.1.1:8080",
                         "clusterControllerResyncPeriod": "2m", "hostClusterName": "host",
                         "nodeSelector": {}, "tolerations": [], "affinity": {}},
        "monitoring": {"nodeSelector": {}, "prometheus": {"replicas": 2, "volumeSize": "50Gi", "resources": {},
                                                          "operator": {"resources": {}}},
                       "alertmanager": {"replicas": 1, "resources": {}}, "grafana": {"enabled": True},
                       "notification_manager": {"resources": {}, "operator": {"resources": {}}}},
        "devops": {"sonarqube": {"externalSonarUrl": "http://sonar:9000", "externalSonarToken": "t"},
                   "argocd": {"installation": True, "namespace": "argocd"}, "nodeSelector": {},
                   "jenkinsCpuReq": "500m"},
        "alerting": {"thanosruler": {"replicas": 1, "resources": {}}},
        "events": {"operator": {"resources": {}}, "exporter": {"resources": {}}, "ruler": {"resources": {}}},
        "servicemesh": {"jaeger": {"resources": {}}, "jaeger_operator": {"resources": {}}},
        "edgeruntime": {"kubeedge": {"iptablesManager": {"resources": {}}, "edgeService": {"resources": {}},
                                     "cloudCore": {"resources": {}, "hostNetWork": True,
                                                   "service": {"tunnelNodePort": 30004}},
                                     "iptables-manager": {"mode": "internal"}}},
        "gatekeeper": {"controller_manager": {"resources": {}}, "audit": {"resources": {}}},
    })
    assert validate(extra) == []


@pytest.mark.parametrize("path, value, expected", [
    ("monitoring.node_exporter.port", "abc", 'must be a port number (integer 1-65535); got string "abc"'),
    ("devops.enabled", "yes", 'expected a boolean (true or false); got string "yes"'),
    ("etcd.tlsEnable", 1, "expected a boolean (true or false); got integer 1"),
    ("etcd.port", 70000, "must be a port number (integer 1-65535); got 70000"),
    ("terminal.timeout", -1, "got -1"),
    ("common.core.console.port", 8080, "must be a NodePort (integer 30000-32767); got 8080"),
    ("common.redis.volumeSize", "lots", "must be a Kubernetes quantity such as 20Gi or 500Mi"),
    ("common.redis.volumeSize", 20, "got integer 20"),
    ("devops.jenkinsCpuReq", True, "must be a CPU quantity"),
    ("devops.jenkinsCpuLim", "two", "must be a CPU quantity"),
    ("common.es.logMaxAge", 0, "must be a number of days"),
    ("common.gpu.kinds", {"resourceName": "x"}, "expected array; got object"),
    ("monitoring.nodeSelector", ["a"], "node selector"),
])
def test_wrong_type_or_range(path: str, value: Any, expected: str) -> None:
    assert expected in one_error(with_value(path, value), path)


@pytest.mark.parametrize("path, value, choices", [
    ("multicluster.clusterRole", "hub", '"host", "member", "none"'),
    ("network.ippool.type", "flannel", '"calico", "none"'),
    ("network.topology.type", "scope", '"weave-scope", "none"'),
    ("common.core.console.type", "Ingress", '"NodePort", "ClusterIP", "LoadBalancer"'),
    ("common.monitoring.type", "internal", '"external"'),
    ("edgeruntime.kubeedge.iptables-manager.mode", "both", '"internal", "external"'),
])
def test_bad_enum(path: str, value: str, choices: str) -> None:
    assert one_error(with_value(path, value), path) == f'must be one of {choices}; got "{value}"'


def test_enum_with_wrong_type_reports_once() -> None:
    assert one_error(with_value("multicluster.clusterRole", 1), "multicluster.clusterRole").startswith(
        'must be one of "host", "member", "none"')


@pytest.mark.parametrize("path, good", [
    ("edgeruntime.kubeedge.cloudCore.service.cloudhubNodePort", ["30000", 30000, "65535", 1]),
    ("common.es.externalElasticsearchPort", ["", "9200", 9200]),
    ("devops.jenkinsCpuReq", [0.5, 1, "500m", "2"]),
    ("persistence.storageClass", ["", "local", "csi-rbd.ceph.io"]),
    ("local_registry", ["", "dockerhub.kubekey.local", "192.168.0.2:5000", "registry.io:443/kubesphere"]),
])
def test_accepted_formats(path: str, good: list[Any]) -> None:
    for value in good:
        assert errors_at(with_value(path, value), path) == [], value


@pytest.mark.parametrize("path, bad", [
    ("edgeruntime.kubeedge.cloudCore.service.cloudhubNodePort", ["0", "65536", "30000a", " 30000", 0]),
    ("persistence.storageClass", ["Local", "-x", "a_b", "gp2\n"]),
    ("local_registry", ["https://reg.io", "reg.io:5000\n", "reg io"]),
])
def test_rejected_formats(path: str, bad: list[Any]) -> None:
    for value in bad:
        assert errors_at(with_value(path, value), path), value


@pytest.mark.parametrize("path", [
    "persistence.storageClass", "monitoring.storageClass", "local_registry", "namespace_override",
    "common.core.console.type", "gateway.namespace", "dev_tag", "terminal.image", "etcd.endpointIps",
    "common.es.externalElasticsearchHost", "common.monitoring.endpoint",
])
def test_hostile_string_rejected_by_format(path: str) -> None:
    message = one_error(with_value(path, HOSTILE), path)
    assert message.startswith("must be")


@pytest.mark.parametrize("path", [
    "authentication.adminPassword", "common.opensearch.basicAuth.password", "common.es.basicAuth.username",
])
def test_free_text_accepts_any_characters_but_jinja(path: str) -> None:
    assert validate(with_value(path, HOSTILE + " \"'`$(){}[]<>|&\\\n\t")) == []
    for delimiter in ("{{", "{%", "{#"):
        assert "Jinja" in one_error(with_value(path, f"a{delimiter}b"), path)


@pytest.mark.parametrize("path", [
    "persistence.storageClass", "authentication.jwtSecret", "common.core.console.type", "local_registry",
    "common.gpu.kinds", "monitoring.nodeSelector.zone", "common.core.console.extraVolumes",
])
def test_jinja_rejected_in_any_field(path: str) -> None:
    value: Any = JINJA
    if path == "common.gpu.kinds":
        value = [{"resourceName": "nvidia.com/gpu", "resourceType": JINJA}]
        path = "common.gpu.kinds[0].resourceType"
    elif path == "common.core.console.extraVolumes":
        value = [{"name": "v", "hostPath": {"path": JINJA}}]
        path = "common.core.console.extraVolumes[0].hostPath.path"
    message = one_error(with_value(path.split("[")[0], value), path)
    assert message == "must not contain Jinja delimiters ({{, {% or {#): spec values become Ansible variables"
    assert "lookup" not in message


def test_jinja_in_a_free_form_key() -> None:
    spec = with_value("affinity", {"{{ x }}": "y"})
    assert [e.path for e in validate(spec)] == ['affinity["{{ x }}"]']


def test_unknown_top_level_key_with_suggestion() -> None:
    message = one_error(with_value("monitorng", {}), "monitorng")
    assert message == 'unknown field "monitorng"; did you mean "monitoring"?'


def test_unknown_nested_key_with_suggestion() -> None:
    message = one_error(with_value("common.redis.volumesize", "2Gi"), "common.redis.volumesize")
    assert message == 'unknown field "volumesize" in common.redis; did you mean "volumeSize"?'


def test_unknown_nested_key_lists_known_fields() -> None:
    message = one_error(with_value("etcd.xyz", 1), "etcd.xyz")
    assert message == 'unknown field "xyz" in etcd; known fields: monitoring, endpointIps, port, tlsEnable'


def test_unknown_key_in_list_item() -> None:
    spec = with_value("common.gpu.kinds", [{"resourceName": "nvidia.com/gpu", "resourceType": "GPU", "extra": 1}])
    assert [e.path for e in validate(spec)] == ["common.gpu.kinds[0].extra"]


def test_missing_required_in_list_item() -> None:
    spec = with_value("common.gpu.kinds", [{"resourceType": "GPU"}])
    assert one_error(spec, "common.gpu.kinds[0].resourceName") == "missing required field"


def test_bad_value_in_list_item_path() -> None:
    spec = with_value("common.gpu.kinds", [{"resourceName": "nvidia.com/gpu", "resourceType": "GPU"},
                                           {"resourceName": "bad name", "resourceType": "GPU"}])
    assert "extended resource name" in one_error(spec, "common.gpu.kinds[1].resourceName")


def test_many_errors_are_all_reported_sorted() -> None:
    spec = with_value("devops.enabled", "yes", with_value("multicluster.clusterRole", "hub"))
    spec["bogus"] = 1
    assert [e.path for e in validate(spec)] == ["bogus", "devops.enabled", "multicluster.clusterRole"]


@pytest.mark.parametrize("path", [
    "authentication.jwtSecret", "authentication.adminPassword", "common.es.basicAuth.password",
    "common.opensearch.basicAuth.password", "common.s3.secretAccessKey", "common.mysqlPassword",
    "devops.sonarqube.externalSonarToken",
])
def test_secret_values_never_appear_in_messages(path: str) -> None:
    for value in (123456789, ["s3cr3t-v4lue"], {"k": "s3cr3t-v4lue"}, True):
        errors = validate(with_value(path, value))
        assert errors, value
        text = " ".join(f"{e.path} {e.message}" for e in errors)
        assert "123456789" not in text and "s3cr3t" not in text and "hidden" in text
    text = str(validate(with_value(path, "s3cr3t {{ v4lue }}")))
    assert "s3cr3t" not in text and "v4lue" not in text


def test_secret_parent_of_wrong_type_is_not_echoed() -> None:
    spec = with_value("common.es.basicAuth", "user:s3cr3t")
    message = one_error(spec, "common.es.basicAuth")
    assert "s3cr3t" not in message and "expected object" in message


def test_long_values_are_truncated() -> None:
    message = one_error(with_value("persistence.storageClass", "X" * 500), "persistence.storageClass")
    assert len(message) < 300


def test_non_mapping_spec() -> None:
    assert validate([]) == [SpecError("spec", "must be an object (mapping); got list")]  # type: ignore[arg-type]


@pytest.mark.parametrize("before, after", [("member", "host")])
def test_forbidden_role_transition(before: str, after: str) -> None:
    errors = validate_transition(with_value("multicluster.clusterRole", before),
                                 with_value("multicluster.clusterRole", after))
    assert len(errors) == 1 and errors[0].path == "multicluster.clusterRole"
    assert f'from "{before}" to "{after}"' in errors[0].message and "kubesphere#4229" in errors[0].message


@pytest.mark.parametrize("before, after", [("none", "host"), ("none", "member"), ("member", "none"),
                                           ("host", "host"), ("member", "member"),
                                           ("host", "none"), ("host", "member")])  # unless members are joined
def test_allowed_role_transition(before: str, after: str) -> None:
    assert validate_transition(with_value("multicluster.clusterRole", before),
                               with_value("multicluster.clusterRole", after)) == []


def test_transition_without_previous_or_role() -> None:
    assert validate_transition(None, with_value("multicluster.clusterRole", "member")) == []
    assert validate_transition({}, with_value("multicluster.clusterRole", "host")) == []  # missing = none
    assert validate_transition(with_value("multicluster.clusterRole", "host"), {}) == []  # to none: the cluster decides


def test_prepare_reports_transition_and_schema_errors() -> None:
    prepared = prepare(with_value("multicluster.clusterRole", "host"), with_value("multicluster.clusterRole", "member"))
    assert [e.path for e in prepared.errors] == ["multicluster.clusterRole"]
    assert "cannot change" in prepared.errors[0].message
    prepared = prepare({"devops": {"enabled": "yes"}, "extra": 1})
    assert [e.path for e in prepared.errors] == ["devops.enabled", "extra"]


def test_prepare_validates_after_migration() -> None:
    prepared = prepare({"console": {"port": 80}, "terminal": {"timeout": 600}})
    assert prepared.migrations == ["moved console -> common.core.console"]
    assert [e.path for e in prepared.errors] == ["console.port (moved to common.core.console.port)"]


def test_format_errors_lists_one_indented_line_each() -> None:
    errors = [SpecError("a.b", "must be x"), SpecError("c[0]", "must be y")]
    assert format_errors(errors) == "  a.b: must be x\n  c[0]: must be y"
    assert format_errors([]) == ""


def test_under_means_at_or_below() -> None:
    assert under("common.es", "common.es") and under("common.es.master", "common.es")
    assert under("common.es[0]", "common.es")
    assert not under("common.esx", "common.es") and not under("common", "common.es")


def test_format_path() -> None:
    assert format_path(["common", "gpu", "kinds", 0, "resourceName"]) == "common.gpu.kinds[0].resourceName"
    assert format_path(["edgeruntime", "kubeedge", "iptables-manager"]) == "edgeruntime.kubeedge.iptables-manager"
    assert format_path(["nodeSelector", "node-role.kubernetes.io/worker"]) == \
        'nodeSelector["node-role.kubernetes.io/worker"]'


# ---------------------------------------------------------------- hardened input (bounds, strict types, labels)


def _nested(depth: int) -> dict:
    node: dict = {}
    top = node
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return top


@pytest.mark.parametrize("changes, path, words", [
    ({"monitoring": _nested(600)}, "monitoring.a.a", f"nested deeper than {MAX_DEPTH} levels"),
    ({"nodeSelector": {1: "a", "b": "c"}}, "nodeSelector.1", "field names must be strings"),
    ({"common": {"core": {"console": {"port": 30880.0}}}}, "common.core.console.port", "got number 30880.0"),
    ({"devops": {"enabled": True, "jenkinsCpuReq": float("nan")}}, "devops.jenkinsCpuReq", "got NaN"),
    ({"local_registry": "r" * 100_000}, "local_registry", "too long: 100000 characters"),
    ({"events": {"enabled": True, "ruler": {"replicas": 1e30}}}, "events.ruler.replicas", "replica count"),
    ({"events": {"enabled": True, "ruler": {"replicas": 101}}}, "events.ruler.replicas", "integer 0-100"),
    ({"nodeSelector": {"bad key!": "a"}}, "nodeSelector", "must be a label name"),
    ({"nodeSelector": {"zone": "bad value!"}}, "nodeSelector.zone", "must be a label value"),
])
def test_hostile_or_wrong_input_gets_a_clear_error(changes: dict, path: str, words: str) -> None:
    spec = {**DEFAULT_CC["spec"], **changes}
    errors = prepare(spec).errors
    assert any(e.path.startswith(path) and words in e.message for e in errors), errors


def test_an_alias_bomb_is_refused_quickly() -> None:
    bomb: list = ["x"] * 10
    for _ in range(9):
        bomb = [bomb] * 10  # 10**10 values once expanded
    started = time.monotonic()
    errors = prepare({**DEFAULT_CC["spec"], "tolerations": bomb}).errors
    assert [str(e) for e in errors] == ["spec: is too large: more than 20000 values"]
    assert time.monotonic() - started < 2


def test_valid_labels_pass() -> None:
    labels = {"kubernetes.io/os": "linux", "role": "", "node.example.com/x": "a.b"}
    spec = {**DEFAULT_CC["spec"], "nodeSelector": labels}
    assert prepare(spec).errors == []


def test_a_section_of_the_wrong_shape_is_not_called_a_secret() -> None:
    assert prepare({**DEFAULT_CC["spec"], "common": ["x"]}).errors == [SpecError("common", "expected object; got list")]


def test_a_member_cluster_needs_the_hosts_jwt_secret() -> None:
    member = with_value("multicluster.clusterRole", "member")
    (error,) = [e for e in validate(member) if e.path == "authentication.jwtSecret"]
    assert "host cluster's jwtSecret on a member cluster" in error.message
    member["authentication"] = {**member.get("authentication", {}), "jwtSecret": "the-host-s-key"}
    assert not [e for e in validate(member) if e.path == "authentication.jwtSecret"]
    assert not [e for e in validate(with_value("multicluster.clusterRole", "host"))
                if e.path == "authentication.jwtSecret"]
