"""The openldap role's objects (chart openldap-ha 0.1.0 as release ks-openldap), rendered by Ansible (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from role_harness import engine_vars, run_play

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "openldap"
UPSTREAM = json.loads((REPO / "tests" / "parity" / "upstream" / "openldap.json").read_text())
NS = "kubesphere-system"
SELECTOR = {"app.kubernetes.io/name": "openldap-ha", "app.kubernetes.io/instance": "ks-openldap"}
TOLERATE_ALL = [{"operator": "Exists"}]
ZONE_AFFINITY = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}
LIVE_CLAIM = {"accessModes": ["ReadWriteOnce"], "storageClassName": "old", "volumeMode": "Filesystem",
              "resources": {"requests": {"storage": "3Gi"}}}

# name → (spec changes, extra variables)
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {}),
    "registry": ({"local_registry": "reg.local:5000", "namespace_override": "mirror"}, {}),
    "zone_cn": ({"zone": "cn"}, {}),
    "storage": ({"common": {"openldap": {"volumeSize": "10Gi"}}, "persistence": {"storageClass": "fast"}}, {}),
    "storage_dash": ({"persistence": {"storageClass": "-"}}, {}),
    "live_volume": ({"common": {"openldap": {"volumeSize": "10Gi"}}}, {"ks_openldap_live_volume_size": "5Gi"}),
    "live_statefulset": ({"common": {"openldap": {"volumeSize": "10Gi"}}, "persistence": {"storageClass": "fast"}},
                         {"ks_openldap_live_claim": LIVE_CLAIM, "ks_openldap_live_volume_size": "4Gi"}),
    "global_scheduling": ({"nodeSelector": {"global": "yes"}, "tolerations": TOLERATE_ALL,
                           "affinity": {"nodeAffinity": ZONE_AFFINITY}}, {}),
    "module_scheduling": ({"common": {"openldap": {"nodeSelector": {"ldap": "yes"}, "nodeAffinity": ZONE_AFFINITY,
                                                   "tolerations": [{"key": "ldap", "operator": "Exists"}]}},
                           "nodeSelector": {"global": "yes"}, "tolerations": TOLERATE_ALL}, {}),
    "ha": ({}, {"ks_master_num": 3}),
}

Objects = dict[tuple[str, str, str], dict[str, Any]]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    out = tmp_path_factory.mktemp("openldap-role")
    tasks: list[dict[str, Any]] = []
    for name, (changes, extra) in SCENARIOS.items():
        spec = apply_defaults({"common": {"openldap": {"enabled": True}}} | changes)
        tasks += [{"ansible.builtin.include_role": {"name": "openldap", "tasks_from": "render"},
                   "vars": {**spec, **extra}},
                  {"ansible.builtin.copy": {"content": "{{ ks_openldap_objects | to_json }}",
                                            "dest": str(out / f"{name}.json")}}]
    run_play({"hosts": "localhost", "gather_facts": False, "roles": ["kubesphere-defaults"], "tasks": tasks,
              "vars": {**engine_vars("openldap"), "ks_namespace": NS, "nodeNum": 3, "ks_master_num": 1}}, out)
    return {name: {(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o
                   for o in json.loads((out / f"{name}.json").read_text())} for name in SCENARIOS}


def statefulset(objects: Objects) -> dict[str, Any]:
    return objects[("StatefulSet", NS, "openldap")]


def pod(objects: Objects) -> dict[str, Any]:
    return statefulset(objects)["spec"]["template"]["spec"]


def container(objects: Objects) -> dict[str, Any]:
    (only,) = pod(objects)["containers"]
    return only


def env(objects: Objects) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(objects)["env"]}


def claim(objects: Objects) -> dict[str, Any]:
    (template,) = statefulset(objects)["spec"]["volumeClaimTemplates"]
    assert template["metadata"] == {"name": "openldap-pvc"}
    return template["spec"]


def test_renders_exactly_upstreams_objects(rendered: dict[str, Objects]) -> None:
    upstream = {(o["kind"], o["namespace"], o["name"]) for o in UPSTREAM["objects"]}
    for name, objects in rendered.items():
        assert set(objects) == upstream, name
    by_kind = {o["kind"]: o["apiVersion"] for o in UPSTREAM["objects"]}
    assert {k: o["apiVersion"] for (k, _, _), o in rendered["default"].items()} == by_kind


def test_statefulset_like_the_chart(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    sts = statefulset(objects)
    assert sts["metadata"]["labels"] == {**SELECTOR, "helm.sh/chart": "openldap-ha-0.1.0",
                                         "app.kubernetes.io/version": "1.0"}
    assert sts["spec"]["replicas"] == 1 and sts["spec"]["serviceName"] == "openldap"
    assert sts["spec"]["selector"] == {"matchLabels": SELECTOR}
    assert sts["spec"]["template"]["metadata"]["labels"] == SELECTOR
    c = container(objects)
    assert c["name"] == "openldap-ha" and c["image"] == "osixia/openldap:1.3.0"
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["args"] == ["--copy-service", "--loglevel=warning"]
    assert c["ports"] == [{"name": "ldap", "containerPort": 389, "protocol": "TCP"}]
    probe = {"tcpSocket": {"port": 389}, "initialDelaySeconds": 30, "timeoutSeconds": 1, "periodSeconds": 15}
    assert c["readinessProbe"] == probe and c["livenessProbe"] == probe
    assert "resources" not in c
    assert c["volumeMounts"] == [
        {"mountPath": "/var/lib/ldap", "name": "openldap-pvc", "subPath": "ldap-data"},
        {"mountPath": "/etc/ldap/slapd.d", "name": "openldap-pvc", "subPath": "ldap-config"},
        {"mountPath": "/container/service/slapd/assets/config/bootstrap/ldif/custom", "name": "openldap-bootstrap"}]
    assert pod(objects)["volumes"] == [
        {"name": "openldap-pvc", "persistentVolumeClaim": {"claimName": "openldap-pvc"}},
        {"name": "openldap-bootstrap", "configMap": {"name": "openldap-bootstrap"}}]
    values = env(objects)
    assert {k: values[k] for k in ("LDAP_ORGANISATION", "LDAP_DOMAIN", "LDAP_REPLICATION", "LDAP_TLS",
                                   "LDAP_REMOVE_CONFIG_AFTER_SETUP", "HOSTNAME")} == {
        "LDAP_ORGANISATION": "kubesphere", "LDAP_DOMAIN": "kubesphere.io", "LDAP_REPLICATION": "false",
        "LDAP_TLS": "false", "LDAP_REMOVE_CONFIG_AFTER_SETUP": "true", "HOSTNAME": "$(MY_POD_NAME).openldap"}
    assert values["MY_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert not any(k.startswith("LDAP_REPLICATION_") for k in values)


def test_password_comes_from_the_secret(rendered: dict[str, Objects]) -> None:
    ref = {"secretKeyRef": {"name": "openldap-secret", "key": "password"}}
    for name, objects in rendered.items():
        values = env(objects)
        assert values["LDAP_ADMIN_PASSWORD"] == ref and values["LDAP_CONFIG_PASSWORD"] == ref, name
        assert "admin" not in [e.get("value") for e in container(objects)["env"]], name


def test_service_and_bootstrap(rendered: dict[str, Objects]) -> None:
    svc = rendered["default"][("Service", NS, "openldap")]
    assert svc["metadata"]["labels"] == SELECTOR
    assert svc["spec"] == {"clusterIP": "None", "ports": [{"name": "ldap", "port": 389}], "selector": SELECTOR}
    ldif = rendered["default"][("ConfigMap", NS, "openldap-bootstrap")]["data"]["bootstrap.ldif"]
    entries = [block.splitlines()[0] for block in ldif.strip().split("\n\n")]
    assert entries == ["dn: ou=Users,dc=kubesphere,dc=io", "dn: ou=Groups,dc=kubesphere,dc=io",
                       "dn: uid=admin,ou=Users,dc=kubesphere,dc=io"]
    assert ldif.endswith("userPassword:: e1NTSEF9RHRIdmQxOWlkMnBINENyYWJYa0NsSzY1OFNXeUVHSDAK\n")


def test_images_through_the_registry_settings(rendered: dict[str, Objects]) -> None:
    assert container(rendered["registry"])["image"] == "reg.local:5000/mirror/openldap:1.3.0"
    assert container(rendered["zone_cn"])["image"] == "registry.cn-beijing.aliyuncs.com/kubesphereio/openldap:1.3.0"


def test_volume_size_and_storage_class(rendered: dict[str, Objects]) -> None:
    assert claim(rendered["default"]) == {"accessModes": ["ReadWriteOnce"],
                                          "resources": {"requests": {"storage": "2Gi"}}}
    assert claim(rendered["storage"]) == {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                                          "resources": {"requests": {"storage": "10Gi"}}}
    assert claim(rendered["storage_dash"])["storageClassName"] == ""
    # An existing volume keeps its size; an existing StatefulSet keeps its (immutable) claim template.
    assert claim(rendered["live_volume"])["resources"] == {"requests": {"storage": "5Gi"}}
    assert claim(rendered["live_statefulset"]) == LIVE_CLAIM


def test_scheduling(rendered: dict[str, Objects]) -> None:
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": SELECTOR}, "topologyKey": "kubernetes.io/hostname"}]}
    default = pod(rendered["default"])
    assert "nodeSelector" not in default
    assert default["tolerations"] == [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
                                      {"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert default["affinity"] == {"podAntiAffinity": anti, "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {"matchExpressions": [
            {"key": "node-role.kubernetes.io/master", "operator": "In", "values": [""]}]}}]}}
    glob = pod(rendered["global_scheduling"])
    assert glob["nodeSelector"] == {"global": "yes"} and glob["tolerations"] == TOLERATE_ALL
    assert glob["affinity"] == {"podAntiAffinity": anti, "nodeAffinity": ZONE_AFFINITY}
    module = pod(rendered["module_scheduling"])
    assert module["nodeSelector"] == {"ldap": "yes"}
    assert module["tolerations"] == [{"key": "ldap", "operator": "Exists"}]
    assert module["affinity"] == {"podAntiAffinity": anti, "nodeAffinity": ZONE_AFFINITY}


def test_replication_with_several_control_plane_nodes(rendered: dict[str, Objects]) -> None:
    objects = rendered["ha"]
    assert statefulset(objects)["spec"]["replicas"] == 2
    values = env(objects)
    assert values["LDAP_REPLICATION"] == "true"
    assert values["LDAP_REPLICATION_HOSTS"] == "#PYTHON2BASH:['ldap://openldap-0.openldap', 'ldap://openldap-1.openldap']"
    assert "credentials=$LDAP_CONFIG_PASSWORD" in values["LDAP_REPLICATION_CONFIG_SYNCPROV"]
    assert "credentials=$LDAP_ADMIN_PASSWORD" in values["LDAP_REPLICATION_DB_SYNCPROV"]


def test_no_task_shows_the_password() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yaml").read_text())
    handling = [t for t in tasks if "ks_random_secret" in t or "stringData" in json.dumps(t)
                or ("ks_info" in t and "Secret" in json.dumps(t.get("loop", "")))]
    assert len(handling) == 3
    # The generator takes and returns no value (its refusal of a found password must reach the status): not hidden.
    assert [t.get("no_log") is True for t in handling] == [True, True, False], [t["name"] for t in handling]
    uninstall = yaml.safe_load((ROLE / "tasks" / "uninstall.yaml").read_text())
    # The uninstall deletes the recorded inventory but the password, whose policy it carries (the volume stays too).
    assert [t["ks_manifest"] for t in uninstall] == [{"module": "{{ ks_module }}", "state": "absent"}]
    assert [t["ks_random_secret"]["annotations"] for t in handling if "ks_random_secret" in t] == [
        "{{ ks_kept_on_uninstall }}"]
