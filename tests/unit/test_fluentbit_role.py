"""The fluentbit role's manifests, rendered by Ansible for each container runtime and spec variant (no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from installer_state import upstream_objects
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "fluentbit"
NS = "kubesphere-logging-system"
OPERATOR = "fluentbit-operator"
TOLERATE_ALL = [{"operator": "Exists"}]
ZONE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
LOGGING = {"logging": {"enabled": True}}
ENV_FILE = "/fluentbit-operator/fluent-bit.env"

# name → (spec changes, containerRuntimeVersion of the first node)
SCENARIOS: dict[str, tuple[dict[str, Any], str]] = {
    "containerd": (LOGGING, "containerd://1.7.2"),
    "docker": (LOGGING, "docker://20.10.8"),
    "crio": (LOGGING, "cri-o://1.25.1"),
    "no_node": (LOGGING, ""),
    "mounted_docker": ({**LOGGING, "common": {"containersLogMountedPath": "/data/docker/containers"}},
                       "docker://20.10.8"),
    "mounted_containerd": ({**LOGGING, "common": {"containersLogMountedPath": "/data/logs"}}, "containerd://1.7.2"),
    "registry": ({**LOGGING, "local_registry": "registry.local:5000", "namespace_override": "mirror"},
                 "containerd://1.7.2"),
    "zone_cn": ({**LOGGING, "zone": "cn"}, "containerd://1.7.2"),
    "own_scheduling": ({**LOGGING, "common": {"fluentbit": {"nodeSelector": {"logs": "yes"},
                                                            "tolerations": TOLERATE_ALL,
                                                            "affinity": ZONE_AFFINITY}},
                        "nodeSelector": {"global": "yes"}, "tolerations": [{"key": "g", "operator": "Exists"}]},
                       "containerd://1.7.2"),
    "global_scheduling": ({**LOGGING, "nodeSelector": {"global": "yes"}, "tolerations": TOLERATE_ALL,
                           "affinity": ZONE_AFFINITY}, "containerd://1.7.2"),
    "mixed_scheduling": ({**LOGGING, "common": {"fluentbit": {"nodeSelector": {"logs": "yes"}}},
                          "tolerations": TOLERATE_ALL}, "containerd://1.7.2"),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: {**apply_defaults(changes), "ks_node_runtime_version": runtime}
                 for name, (changes, runtime) in SCENARIOS.items()}
    return render_scenarios("fluentbit", "ks_fluentbit_objects", scenarios, tmp_path_factory.mktemp("fluentbit"))


def operator(objects: Objects) -> dict[str, Any]:
    return pod(objects, "Deployment", OPERATOR)


def setenv(objects: Objects) -> dict[str, Any]:
    (init,) = operator(objects)["initContainers"]
    assert init["name"] == "setenv"
    return init


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    for name, objects in rendered.items():
        assert len(objects) == len(keys(objects)), f"{name}: an object is rendered twice"
        # Upstream's objects, plus the namespace (upstream's init-namespaces.yaml made it in roles/common).
        assert keys(objects) == upstream_objects("fluentbit") | {("Namespace", "", NS)}, name


def test_namespace(rendered: dict[str, Objects]) -> None:
    ns = find(rendered["containerd"], "Namespace", NS)
    assert ns["metadata"]["labels"] == {"kubesphere.io/workspace": "system-workspace",
                                        "kubesphere.io/namespace": NS}


def test_crds(rendered: dict[str, Objects]) -> None:
    crds = {o["metadata"]["name"]: o for o in rendered["containerd"] if o["kind"] == "CustomResourceDefinition"}
    assert set(crds) == {f"{p}.logging.kubesphere.io" for p in
                         ("filters", "fluentbits", "fluentbitconfigs", "inputs", "outputs", "parsers")}
    short = {}
    for name, crd in crds.items():
        spec = crd["spec"]
        assert spec["group"] == "logging.kubesphere.io" and spec["scope"] == "Namespaced"
        assert spec["names"]["plural"] == name.split(".")[0]
        assert spec["names"]["listKind"] == spec["names"]["kind"] + "List"
        (version,) = spec["versions"]
        assert version["name"] == "v1alpha2" and version["served"] and version["storage"]
        schema = version["schema"]["openAPIV3Schema"]
        assert schema["type"] == "object"
        assert schema["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] is True
        short[spec["names"]["kind"]] = spec["names"].get("shortNames")
    assert short == {"Filter": None, "FluentBit": ["fb"], "FluentBitConfig": ["fbc"], "Input": None,
                     "Output": None, "Parser": None}
    assert "status" in crds["fluentbits.logging.kubesphere.io"]["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"]["properties"]


def test_rbac_and_lua(rendered: dict[str, Objects]) -> None:
    objects = rendered["containerd"]
    role = find(objects, "ClusterRole", "kubesphere:operator:fluentbit-operator")
    crud = ["create", "delete", "get", "list", "patch", "update", "watch"]
    assert {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": crud} in role["rules"]
    assert {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": crud} in role["rules"]
    assert len(role["rules"]) == 9
    binding = find(objects, "ClusterRoleBinding", "kubesphere:operator:fluentbit-operator")
    assert binding["roleRef"]["name"] == "kubesphere:operator:fluentbit-operator"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NS}]
    assert find(objects, "ServiceAccount", OPERATOR)["metadata"]["namespace"] == NS
    lua = find(objects, "ConfigMap", "fluent-bit-lua")["data"]["systemd.lua"]
    assert lua.startswith("function add_time(tag, timestamp, record)\n") and lua.endswith("end\n")
    assert '\t\ttimeStr["year"], timeStr["month"], timeStr["day"],\n' in lua
    assert 'kubernetes["namespace_name"] = "kube-system"' in lua


def test_operator_deployment(rendered: dict[str, Objects]) -> None:
    deployment = find(rendered["containerd"], "Deployment", OPERATOR)
    labels = {"app.kubernetes.io/component": "operator", "app.kubernetes.io/name": OPERATOR}
    assert deployment["metadata"]["labels"] == labels
    assert deployment["spec"]["selector"] == {"matchLabels": labels}
    spec = deployment["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == OPERATOR
    (container,) = spec["containers"]
    assert container["image"] == "kubesphere/fluentbit-operator:v0.14.0"
    assert container["resources"] == {"limits": {"cpu": "200m", "memory": "200Mi"},
                                      "requests": {"cpu": "10m", "memory": "20Mi"}}
    assert container["volumeMounts"] == [{"name": "env", "mountPath": "/fluentbit-operator"}]
    assert setenv(rendered["containerd"])["image"] == "docker:19.03"
    # Upstream's defaults: no nodeSelector or tolerations, `affinity: {}` (kept, so a switch keeps the pod).
    assert not {"nodeSelector", "tolerations"} & set(spec) and spec["affinity"] == {}


@pytest.mark.parametrize("scenario", ["containerd", "crio", "no_node"])
def test_cri_runtimes_log_under_var_log(rendered: dict[str, Objects], scenario: str) -> None:
    objects = rendered[scenario]
    init = setenv(objects)
    assert init["command"] == ["/bin/sh", "-c", f"set -ex; echo CONTAINER_ROOT_DIR=/var/log > {ENV_FILE}"]
    assert "env" not in init
    assert init["volumeMounts"] == [{"name": "env", "mountPath": "/fluentbit-operator"}]
    assert operator(objects)["volumes"] == [{"name": "env", "emptyDir": {}}]


def test_docker_asks_docker_for_its_root(rendered: dict[str, Objects]) -> None:
    objects = rendered["docker"]
    init = setenv(objects)
    assert init["command"] == [
        "/bin/sh", "-c", f"set -ex; echo CONTAINER_ROOT_DIR=$(docker info -f {{{{.DockerRootDir}}}}) > {ENV_FILE}"]
    assert init["volumeMounts"][1] == {"name": "dockersock", "readOnly": True, "mountPath": "/var/run/docker.sock"}
    assert operator(objects)["volumes"][1] == {"name": "dockersock", "hostPath": {"path": "/var/run/docker.sock"}}


@pytest.mark.parametrize(("scenario", "path"), [("mounted_docker", "/data/docker/containers"),
                                                ("mounted_containerd", "/data/logs")])
def test_mounted_path_wins_over_the_runtime(rendered: dict[str, Objects], scenario: str, path: str) -> None:
    objects = rendered[scenario]
    init = setenv(objects)
    # The path reaches the shell as a variable, never as part of the command.
    script = f'set -ex; echo CONTAINER_ROOT_DIR="${{CONTAINER_ROOT_DIR}}" > {ENV_FILE}'
    assert init["command"] == ["/bin/sh", "-c", script]
    assert init["env"] == [{"name": "CONTAINER_ROOT_DIR", "value": path}]
    assert len(init["volumeMounts"]) == 1 and len(operator(objects)["volumes"]) == 1, "no docker.sock"


def test_pipeline(rendered: dict[str, Objects]) -> None:
    objects = rendered["containerd"]
    selector = {"matchLabels": {"logging.kubesphere.io/enabled": "true"}}
    config = find(objects, "FluentBitConfig", "fluent-bit-config")
    assert config["apiVersion"] == "logging.kubesphere.io/v1alpha2"
    assert config["metadata"]["labels"] == {"app.kubernetes.io/name": "fluent-bit"}
    assert config["spec"] == {"service": {"parsersFile": "parsers.conf"}, "inputSelector": selector,
                              "filterSelector": selector, "outputSelector": selector}
    fluentbit = find(objects, "FluentBit", "fluent-bit")
    assert fluentbit["metadata"] == {"name": "fluent-bit", "namespace": NS,
                                     "labels": {"app.kubernetes.io/name": "fluent-bit"}}
    spec = fluentbit["spec"]
    assert spec["image"] == "kubesphere/fluent-bit:v1.9.4"
    assert spec["fluentBitConfigName"] == "fluent-bit-config"
    assert spec["positionDB"] == {"emptyDir": {}}
    assert spec["resources"] == {"limits": {"cpu": "500m", "memory": "200Mi"},
                                 "requests": {"cpu": "10m", "memory": "25Mi"}}
    assert spec["tolerations"] == TOLERATE_ALL
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "node-role.kubernetes.io/edge",
                                                     "operator": "DoesNotExist"}]}]}
    # Upstream's FluentBit is the same on every runtime and for every spec.
    for name, other in rendered.items():
        if name not in ("registry", "zone_cn"):
            assert find(other, "FluentBit", "fluent-bit") == fluentbit, name


def test_registry_override(rendered: dict[str, Objects]) -> None:
    objects = rendered["registry"]
    assert operator(objects)["containers"][0]["image"] == "registry.local:5000/mirror/fluentbit-operator:v0.14.0"
    assert setenv(objects)["image"] == "registry.local:5000/mirror/docker:19.03"
    assert find(objects, "FluentBit", "fluent-bit")["spec"]["image"] == \
        "registry.local:5000/mirror/fluent-bit:v1.9.4"
    zone = rendered["zone_cn"]
    assert operator(zone)["containers"][0]["image"].startswith("registry.cn-beijing.aliyuncs.com/kubesphereio/")
    assert find(zone, "FluentBit", "fluent-bit")["spec"]["image"].endswith("/fluent-bit:v1.9.4")


def test_scheduling(rendered: dict[str, Objects]) -> None:
    own = operator(rendered["own_scheduling"])
    assert own["nodeSelector"] == {"logs": "yes"}
    assert own["tolerations"] == TOLERATE_ALL
    assert own["affinity"] == ZONE_AFFINITY
    glob = operator(rendered["global_scheduling"])
    assert (glob["nodeSelector"], glob["tolerations"], glob["affinity"]) == (
        {"global": "yes"}, TOLERATE_ALL, ZONE_AFFINITY)
    mixed = operator(rendered["mixed_scheduling"])
    assert mixed["nodeSelector"] == {"logs": "yes"} and mixed["tolerations"] == TOLERATE_ALL
    assert mixed["affinity"] == {}
