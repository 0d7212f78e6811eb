"""The redis role's manifests, rendered by Ansible for several specs (no cluster needed)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from role_harness import Objects, filter_plugins, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults
from installer.objects.random_secret import random_letters

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "redis"
NS = "kubesphere-system"
SECRET = {"secretKeyRef": {"name": "redis-secret", "key": "auth"}}
TOLERATE_ALL = [{"operator": "Exists"}]
ZONE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
SPOT = {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 50, "preference": {"matchExpressions": [{"key": "spot", "operator": "NotIn", "values": ["true"]}]}}]}
HA = {"enabled": True, "enableHA": True}


def inventory(name: str) -> set[tuple[str, str, str]]:
    """Upstream's objects (tests/parity/upstream), without redis-secret, which ks_random_secret makes."""
    objects = json.loads((REPO / "tests" / "parity" / "upstream" / f"{name}.json").read_text())["objects"]
    return {(o["kind"], o["namespace"], o["name"]) for o in objects if o["kind"] != "Secret"}


# name → (spec changes, extra variables)
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({"common": {"redis": {"enabled": True}}}, {}),
    "ha": ({"common": {"redis": HA}}, {}),
    "registry": ({"common": {"redis": HA}, "local_registry": "registry.local:5000",
                  "namespace_override": "mirror"}, {}),
    "zone_cn": ({"common": {"redis": {"enabled": True}}, "zone": "cn"}, {}),
    "tuned": ({"common": {"redis": {"enabled": True, "volumeSize": "5Gi", "nodeSelector": {"redis": "yes"},
                                    "tolerations": TOLERATE_ALL, "affinity": ZONE_AFFINITY}},
               "persistence": {"storageClass": "fast"}, "nodeSelector": {"global": "yes"}}, {}),
    "global_scheduling": ({"common": {"redis": {"enabled": True}}, "nodeSelector": {"global": "yes"},
                           "tolerations": TOLERATE_ALL, "affinity": ZONE_AFFINITY}, {}),
    "ha_tuned": ({"common": {"redis": {**HA, "volumeSize": "5Gi", "nodeSelector": {"redis": "yes"},
                                       "tolerations": TOLERATE_ALL, "nodeAffinity": SPOT}},
                  "persistence": {"storageClass": "fast"}}, {}),
    "live": ({"common": {"redis": {"enabled": True, "volumeSize": "5Gi"}}, "persistence": {"storageClass": "fast"}},
             {"ks_redis_live_claim": {"storage": "10Gi", "storageClassName": "old"}}),
    "ha_live": ({"common": {"redis": {**HA, "volumeSize": "1Gi"}}}, {"ks_redis_live_claim": {"storage": "8Gi"}}),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: {**apply_defaults(changes), **extra} for name, (changes, extra) in SCENARIOS.items()}
    return render_scenarios("redis", "ks_redis_objects", scenarios, tmp_path_factory.mktemp("redis"))


def images(objects: Objects) -> set[str]:
    return {c["image"] for o in objects if o["kind"] in ("Deployment", "StatefulSet")
            for c in o["spec"]["template"]["spec"]["containers"] + o["spec"]["template"]["spec"]["initContainers"]}


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    assert keys(rendered["default"]) == inventory("redis")
    assert keys(rendered["ha"]) == inventory("redis-ha")
    for objects in rendered.values():
        assert len(objects) == len(keys(objects)), "an object is rendered twice"
        assert not [o for o in objects if o["kind"] == "Secret"], "redis-secret is never part of the applied set"


def test_single_redis(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    deployment = find(objects, "Deployment", "redis")
    assert deployment["metadata"]["labels"] == {"app": "redis", "tier": "database", "version": "redis-4.0"}
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "redis", "tier": "database"}}
    spec = deployment["spec"]["template"]["spec"]
    init, redis = spec["initContainers"][0], spec["containers"][0]
    assert init["env"] == [{"name": "KUBESPHERE_CACHE_OPTIONS_PASSWORD", "valueFrom": SECRET}]
    assert "sed \"s/REDIS_PASSWORD/$KUBESPHERE_CACHE_OPTIONS_PASSWORD/\" > /data/redis.conf" in init["command"][2]
    assert redis["image"] == init["image"] == "redis:5.0.14-alpine"
    assert redis["args"] == ["/data/redis.conf"]
    assert redis["ports"] == [{"containerPort": 6379, "protocol": "TCP"}]
    assert redis["resources"] == {"limits": {"cpu": "1000m", "memory": "1000Mi"},
                                  "requests": {"cpu": "20m", "memory": "100Mi"}}
    assert {"name": "redis-pvc", "persistentVolumeClaim": {"claimName": "redis-pvc"}} in spec["volumes"]
    assert find(objects, "ConfigMap", "redis-configmap")["data"] == {
        "redis.conf": "requirepass REDIS_PASSWORD\nmasterauth REDIS_PASSWORD\n"}
    service = find(objects, "Service", "redis")["spec"]
    assert service["selector"] == {"app": "redis", "tier": "database"}
    assert service["ports"] == [{"name": "redis", "port": 6379, "protocol": "TCP", "targetPort": 6379}]
    # upstream's defaults: prefer the control plane, tolerate its taint
    assert spec["tolerations"] == [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
                                   {"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 100
    assert "nodeSelector" not in spec


def test_volume_size_and_storage_class(rendered: dict[str, Objects]) -> None:
    default = find(rendered["default"], "PersistentVolumeClaim", "redis-pvc")["spec"]
    assert default == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}
    tuned = find(rendered["tuned"], "PersistentVolumeClaim", "redis-pvc")["spec"]
    assert tuned["resources"]["requests"]["storage"] == "5Gi" and tuned["storageClassName"] == "fast"
    # An existing volume keeps its size and StorageClass (never shrunk, never an immutable-field error).
    live = find(rendered["live"], "PersistentVolumeClaim", "redis-pvc")["spec"]
    assert live["resources"]["requests"]["storage"] == "10Gi" and live["storageClassName"] == "old"
    claim = find(rendered["ha_tuned"], "StatefulSet", "redis-ha-server")["spec"]["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}},
                             "storageClassName": "fast"}
    ha_live = find(rendered["ha_live"], "StatefulSet", "redis-ha-server")["spec"]["volumeClaimTemplates"][0]["spec"]
    assert ha_live == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "8Gi"}}}


def test_scheduling(rendered: dict[str, Objects]) -> None:
    tuned = pod(rendered["tuned"], "Deployment", "redis")
    assert tuned["nodeSelector"] == {"redis": "yes"}  # common.redis wins over the global key
    assert tuned["tolerations"] == TOLERATE_ALL and tuned["affinity"] == ZONE_AFFINITY
    glob = pod(rendered["global_scheduling"], "Deployment", "redis")
    assert glob["nodeSelector"] == {"global": "yes"}
    assert glob["tolerations"] == TOLERATE_ALL and glob["affinity"] == ZONE_AFFINITY


def test_images_come_from_the_catalogue(rendered: dict[str, Objects]) -> None:
    assert images(rendered["default"]) == {"redis:5.0.14-alpine"}
    assert images(rendered["ha"]) == {"redis:5.0.14-alpine", "haproxy:2.0.25-alpine"}
    assert images(rendered["registry"]) == {"registry.local:5000/mirror/redis:5.0.14-alpine",
                                            "registry.local:5000/mirror/haproxy:2.0.25-alpine"}
    assert images(rendered["zone_cn"]) == {"registry.cn-beijing.aliyuncs.com/kubesphereio/redis:5.0.14-alpine"}


def test_ha_server(rendered: dict[str, Objects]) -> None:
    objects = rendered["ha"]
    server = find(objects, "StatefulSet", "redis-ha-server")
    assert server["metadata"]["labels"] == {"app": "redis-ha", "heritage": "Helm", "release": "ks-redis",
                                            "chart": "redis-ha-3.9.0"}
    spec = server["spec"]
    assert spec["replicas"] == 3 and spec["serviceName"] == "redis-ha"
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["selector"] == {"matchLabels": {"release": "ks-redis", "app": "redis-ha"}}
    template = spec["template"]["spec"]
    assert template["serviceAccountName"] == "redis-ha"
    assert template["securityContext"] == {"runAsUser": 1000, "fsGroup": 1000, "runAsNonRoot": True}
    init = template["initContainers"][0]
    assert init["args"] == ["/readonly-config/init.sh"]
    ids = {e["name"]: e["value"] for e in init["env"] if "value" in e}
    assert ids["SENTINEL_ID_0"] == hashlib.sha1(b"redis-ha\nks-redis\nindex: 0").hexdigest()
    assert len(ids) == 3 and {"name": "AUTH", "valueFrom": SECRET} in init["env"]
    redis, sentinel = template["containers"]
    assert (redis["name"], redis["command"], redis["args"]) == ("redis", ["redis-server"], ["/data/conf/redis.conf"])
    assert redis["ports"] == [{"name": "redis", "containerPort": 6379}]
    assert redis["livenessProbe"] == {"tcpSocket": {"port": 6379}, "initialDelaySeconds": 15}
    assert sentinel["command"] == ["redis-sentinel"] and sentinel["args"] == ["/data/conf/sentinel.conf"]
    assert sentinel["ports"] == [{"name": "sentinel", "containerPort": 26379}]
    assert sentinel["env"] == redis["env"] == [{"name": "AUTH", "valueFrom": SECRET}]
    anti = template["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert template["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "preference"]["matchExpressions"][0]["key"] == "node-role.kubernetes.io/master"
    assert template["tolerations"][0] == {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}
    config = find(objects, "ConfigMap", "redis-ha-configmap")["data"]
    assert sorted(config) == ["haproxy.cfg", "haproxy_init.sh", "init.sh", "redis.conf", "sentinel.conf"]
    assert "requirepass replace-default-auth\n" in config["redis.conf"] and "min-replicas-to-write 1\n" in config[
        "redis.conf"]
    assert "sentinel down-after-milliseconds mymaster 10000\n" in config["sentinel.conf"]
    assert "sentinel auth-pass mymaster replace-default-auth" in config["sentinel.conf"]
    assert config["haproxy.cfg"].count("server R2 redis-ha-announce-2:26379 check inter 1s") == 3
    assert "bind *:6379" in config["haproxy.cfg"]


def test_ha_haproxy_and_services(rendered: dict[str, Objects]) -> None:
    objects = rendered["ha"]
    haproxy = find(objects, "Deployment", "redis-ha-haproxy")["spec"]
    assert haproxy["replicas"] == 3
    assert haproxy["selector"] == {"matchLabels": {"app": "redis-ha-haproxy", "release": "ks-redis"}}
    spec = haproxy["template"]["spec"]
    assert spec["serviceAccountName"] == "redis-ha-haproxy"
    container = spec["containers"][0]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8888}
    assert container["ports"] == [{"name": "redis", "containerPort": 6379}]
    assert spec["initContainers"][0]["env"] == [{"name": "AUTH", "valueFrom": SECRET}]
    # the haproxy Service keeps the name redis, so ks-apiserver finds it in either topology
    service = find(objects, "Service", "redis")["spec"]
    assert service["selector"] == {"release": "ks-redis", "app": "redis-ha-haproxy"}
    assert service["ports"] == [{"name": "haproxy", "port": 6379, "protocol": "TCP", "targetPort": "redis"}]
    assert find(objects, "Service", "redis-ha")["spec"]["clusterIP"] == "None"
    announce = find(objects, "Service", "redis-ha-announce-1")
    assert announce["spec"]["publishNotReadyAddresses"] is True
    assert announce["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == "redis-ha-server-1"
    binding = find(objects, "RoleBinding", "redis-ha")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "redis-ha"}]
    assert find(objects, "Role", "redis-ha")["rules"] == [
        {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get"]}]


def test_ha_scheduling(rendered: dict[str, Objects]) -> None:
    server = pod(rendered["ha_tuned"], "StatefulSet", "redis-ha-server")
    haproxy = pod(rendered["ha_tuned"], "Deployment", "redis-ha-haproxy")
    assert server["nodeSelector"] == haproxy["nodeSelector"] == {"redis": "yes"}
    assert server["tolerations"] == haproxy["tolerations"] == TOLERATE_ALL
    assert server["affinity"]["nodeAffinity"] == SPOT  # common.redis.nodeAffinity (the chart's additionalAffinities)
    assert "podAntiAffinity" in server["affinity"]


def test_live_claim_filter() -> None:
    live_claim = filter_plugins("kubesphere-defaults", "ks_volumes").FilterModule().filters()["ks_live_claim"]
    claim = {"resources": {"requests": {"storage": "3Gi"}}, "storageClassName": "x"}
    assert live_claim([]) == {}
    assert live_claim([{"kind": "PersistentVolumeClaim", "spec": claim}]) == {
        "storage": "3Gi", "storageClassName": "x"}
    statefulset = {"kind": "StatefulSet", "spec": {"volumeClaimTemplates": [{"spec": {
        "resources": {"requests": {"storage": "4Gi"}}}}]}}
    assert live_claim([statefulset, {"kind": "PersistentVolumeClaim", "spec": claim}]) == {
        "storage": "4Gi"}


def test_password_is_random_letters() -> None:
    a, b = random_letters(15), random_letters(15)
    assert len(a) == 15 and a.isalpha() and a.isascii() and a != b


def test_no_task_shows_the_password() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yaml").read_text())
    handling = [t for t in tasks if "ks_random_secret" in t]
    assert handling and not any(t.get("no_log") for t in handling)  # no value in or out; a refusal must show
    uninstall = yaml.safe_load((ROLE / "tasks" / "uninstall.yaml").read_text())
    # The uninstall deletes the recorded inventory; the password carries its policy (kept with the data).
    assert [t["ks_manifest"] for t in uninstall] == [{"module": "{{ ks_module }}", "state": "absent"}]
    assert [t["ks_random_secret"]["annotations"] for t in handling] == ["{{ ks_kept_on_uninstall }}"]
