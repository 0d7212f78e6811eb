"""The minio role's manifests, rendered by Ansible for several specs (no cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import upstream_fixture
import yaml
from installer_state import upstream_objects
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "minio"
NS = "kubesphere-system"
DIGEST = "installer.kubesphere.io/spec-hash"
STORE = {"openpitrix": {"store": {"enabled": True}}}
TOLERATE_ALL = [{"operator": "Exists"}]
ZONE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
CHART_LABELS = {"app": "minio", "chart": "minio-2.5.16", "release": "ks-minio", "heritage": "Helm"}


# name → (spec changes, extra variables)
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": (STORE, {}),
    "registry": ({**STORE, "local_registry": "registry.local:5000", "namespace_override": "mirror"}, {}),
    "zone_cn": ({**STORE, "zone": "cn"}, {}),
    "sized": ({**STORE, "common": {"minio": {"volumeSize": "50Gi"}}, "persistence": {"storageClass": "fast"}}, {}),
    "tuned": ({**STORE, "common": {"minio": {"nodeSelector": {"minio": "yes"}, "tolerations": TOLERATE_ALL,
                                             "affinity": ZONE_AFFINITY}},
               "nodeSelector": {"global": "yes"}, "tolerations": [{"key": "global", "operator": "Exists"}]}, {}),
    "global_scheduling": ({**STORE, "nodeSelector": {"global": "yes"}, "tolerations": TOLERATE_ALL,
                           "affinity": ZONE_AFFINITY}, {}),
    "live": ({**STORE, "common": {"minio": {"volumeSize": "50Gi"}}, "persistence": {"storageClass": "fast"}},
             {"ks_minio_live_claim": {"storage": "20Gi", "storageClassName": "old"}}),
    "live_no_class": ({**STORE, "persistence": {"storageClass": "fast"}}, {"ks_minio_live_claim": {"storage": "8Gi"}}),
    # Secret minio as the original's chart made it (its fixed keys, base64 as the Secret holds them).
    "upstream_keys": (STORE, {"ks_minio_live_keys": {"accesskey": "b3BlbnBpdHJpeG1pbmlvYWNjZXNza2V5",
                                                     "secretkey": "b3BlbnBpdHJpeG1pbmlvc2VjcmV0a2V5"}}),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: {**apply_defaults(changes), **extra} for name, (changes, extra) in SCENARIOS.items()}
    return render_scenarios("minio", "ks_minio_objects", scenarios, tmp_path_factory.mktemp("minio"))


def images(objects: Objects) -> dict[str, str]:
    return {o["kind"]: c["image"] for o in objects if o["kind"] in ("Deployment", "Job")
            for c in o["spec"]["template"]["spec"]["containers"]}


def digest(objects: Objects) -> str:
    return find(objects, "Job", "minio-make-bucket-job")["metadata"]["annotations"][DIGEST]


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    # Secret minio is ks_random_secret's, not rendered.
    assert keys(rendered["default"]) == {o for o in upstream_objects("minio") if o[0] != "Secret"}
    for objects in rendered.values():
        assert len(objects) == len(keys(objects)), "an object is rendered twice"
        assert all(o["metadata"]["namespace"] == NS for o in objects)
        assert not [o for o in objects if o["kind"] == "Secret"], "Secret minio is never part of the applied set"
    for kind, name in (("ConfigMap", "minio"), ("PersistentVolumeClaim", "minio"), ("Service", "minio"),
                       ("Deployment", "minio")):
        assert find(rendered["default"], kind, name)["metadata"]["labels"] == CHART_LABELS


def test_server(rendered: dict[str, Objects]) -> None:
    deployment = find(rendered["default"], "Deployment", "minio")["spec"]
    assert deployment["selector"] == {"matchLabels": {"app": "minio", "release": "ks-minio"}}
    assert deployment["strategy"] == {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 0}}
    assert "replicas" not in deployment  # the chart's standalone Deployment leaves it to the default, 1
    spec = deployment["template"]["spec"]
    assert spec["serviceAccountName"] == "ks-minio"
    assert not {"nodeSelector", "tolerations", "affinity"} & spec.keys()  # the chart's defaults are empty
    (server,) = spec["containers"]
    assert server["image"] == "minio/minio:RELEASE.2019-08-07T01-59-21Z"
    assert server["command"] == ["/bin/sh", "-ce",
                                 "/usr/bin/docker-entrypoint.sh minio -C /root/.minio/ server /data"]
    assert server["ports"] == [{"name": "service", "containerPort": 9000}]
    assert server["resources"] == {"requests": {"cpu": "250m", "memory": "256Mi"}}
    assert server["volumeMounts"] == [{"name": "export", "mountPath": "/data"},
                                      {"name": "minio-config-dir", "mountPath": "/root/.minio/"}]
    # The credentials come from Secret minio, never from a rendered value.
    assert server["env"] == [
        {"name": "MINIO_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "minio", "key": "accesskey"}}},
        {"name": "MINIO_SECRET_KEY", "valueFrom": {"secretKeyRef": {"name": "minio", "key": "secretkey"}}},
        {"name": "MINIO_BROWSER", "value": "on"}]
    assert server["livenessProbe"] == {
        "httpGet": {"path": "/minio/health/live", "port": "service", "scheme": "HTTP"}, "initialDelaySeconds": 5,
        "periodSeconds": 30, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    assert server["readinessProbe"] == {
        "httpGet": {"path": "/minio/health/ready", "port": "service"}, "initialDelaySeconds": 5,
        "periodSeconds": 15, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    assert spec["volumes"] == [{"name": "export", "persistentVolumeClaim": {"claimName": "minio"}},
                               {"name": "minio-user", "secret": {"secretName": "minio"}},
                               {"name": "minio-config-dir", "emptyDir": {}}]
    service = find(rendered["default"], "Service", "minio")["spec"]
    assert service == {"type": "ClusterIP", "selector": {"app": "minio", "release": "ks-minio"},
                       "ports": [{"name": "service", "port": 9000, "protocol": "TCP", "targetPort": 9000}]}


def test_pod_template_digests_are_the_charts(rendered: dict[str, Objects]) -> None:
    """The pod template carries the chart's checksum/secrets and checksum/config, computed as Helm did from its
    rendered Secret and ConfigMap: with the original's keys, v3.4.1's very pod template annotations (a switch keeps
    the pod); other keys or another bucket script give other digests (the pod rolls onto them)."""
    fixture = upstream_fixture.load("pluggable")
    theirs = next(o for step in fixture.modules["minio"] for o in step.objects if o["kind"] == "Deployment")

    def annotations(name: str) -> dict[str, str]:
        return find(rendered[name], "Deployment", "minio")["spec"]["template"]["metadata"]["annotations"]

    assert annotations("upstream_keys") == theirs["spec"]["template"]["metadata"]["annotations"]
    assert annotations("default")["checksum/config"] == annotations("upstream_keys")["checksum/config"]
    assert annotations("default")["checksum/secrets"] != annotations("upstream_keys")["checksum/secrets"]


def test_bucket_job(rendered: dict[str, Objects]) -> None:
    job = find(rendered["default"], "Job", "minio-make-bucket-job")
    assert job["metadata"]["labels"] == {**CHART_LABELS, "app": "minio-make-bucket-job"}
    assert job["spec"]["backoffLimit"] == 100
    template = job["spec"]["template"]
    assert template["metadata"]["labels"] == {"app": "minio-job", "release": "ks-minio"}
    spec = template["spec"]
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["volumes"] == [{"name": "minio-configuration", "projected": {"sources": [
        {"configMap": {"name": "minio"}}, {"secret": {"name": "minio"}}]}}]
    (mc,) = spec["containers"]
    assert (mc["name"], mc["image"]) == ("minio-mc", "minio/mc:RELEASE.2019-08-07T23-14-43Z")
    assert mc["command"] == ["/bin/sh", "/config/initialize"]
    assert mc["env"] == [{"name": "MINIO_ENDPOINT", "value": "minio"}, {"name": "MINIO_PORT", "value": "9000"}]
    assert mc["volumeMounts"] == [{"name": "minio-configuration", "mountPath": "/config"}]
    script = find(rendered["default"], "ConfigMap", "minio")["data"]["initialize"]
    assert script.startswith("#!/bin/sh\nset -e ;")
    assert "ACCESS=$(cat /config/accesskey) ; SECRET=$(cat /config/secretkey) ;" in script
    assert script.endswith("connectToMinio $scheme\n# Create the buckets\n"
                           "createBucket app-store none false\ncreateBucket s2i-binaries none false")


def test_job_digest_follows_what_the_job_runs(rendered: dict[str, Objects]) -> None:
    base = digest(rendered["default"])
    assert len(base) == 64
    assert digest(rendered["sized"]) == digest(rendered["live"]) == base  # the volume is not the Job's business
    assert digest(rendered["zone_cn"]) != base and digest(rendered["registry"]) != base
    assert digest(rendered["tuned"]) != base  # scheduling is in its pod template


def test_volume_size_and_storage_class(rendered: dict[str, Objects]) -> None:
    def claim(name: str) -> dict[str, Any]:
        return find(rendered[name], "PersistentVolumeClaim", "minio")["spec"]

    assert claim("default") == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}
    assert claim("sized") == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}},
                              "storageClassName": "fast"}
    # An existing claim keeps its size and StorageClass (never shrunk, never an immutable-field error).
    assert claim("live")["resources"]["requests"]["storage"] == "20Gi" and claim("live")["storageClassName"] == "old"
    assert claim("live_no_class") == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "8Gi"}}}


def test_scheduling(rendered: dict[str, Objects]) -> None:
    for kind, name in (("Deployment", "minio"), ("Job", "minio-make-bucket-job")):
        tuned = pod(rendered["tuned"], kind, name)
        assert tuned["nodeSelector"] == {"minio": "yes"}  # common.minio wins over the global keys
        assert tuned["tolerations"] == TOLERATE_ALL and tuned["affinity"] == ZONE_AFFINITY
        glob = pod(rendered["global_scheduling"], kind, name)
        assert glob["nodeSelector"] == {"global": "yes"}
        assert glob["tolerations"] == TOLERATE_ALL and glob["affinity"] == ZONE_AFFINITY


def test_images_come_from_the_catalogue(rendered: dict[str, Objects]) -> None:
    assert images(rendered["registry"]) == {
        "Deployment": "registry.local:5000/mirror/minio:RELEASE.2019-08-07T01-59-21Z",
        "Job": "registry.local:5000/mirror/mc:RELEASE.2019-08-07T23-14-43Z"}
    assert images(rendered["zone_cn"]) == {
        "Deployment": "registry.cn-beijing.aliyuncs.com/kubesphereio/minio:RELEASE.2019-08-07T01-59-21Z",
        "Job": "registry.cn-beijing.aliyuncs.com/kubesphereio/mc:RELEASE.2019-08-07T23-14-43Z"}


def test_credentials_are_random_kept_and_never_logged() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yaml").read_text())
    assert defaults["ks_minio_secret"] == "minio"
    assert [c["key"] for c in defaults["ks_minio_credentials"]] == ["accesskey", "secretkey"]
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yaml").read_text())
    handling = [t for t in tasks if "ks_random_secret" in t]
    assert handling and not any(t.get("no_log") for t in handling)  # no value in or out; a refusal must show
    assert "openpitrixminio" not in (ROLE / "templates" / "minio.yaml.j2").read_text()
    uninstall = yaml.safe_load((ROLE / "tasks" / "uninstall.yaml").read_text())
    # The uninstall deletes the recorded inventory; the credentials carry their policy (kept with the data).
    assert [t["ks_manifest"] for t in uninstall] == [{"module": "{{ ks_module }}", "state": "absent"}]
    assert [t["ks_random_secret"]["annotations"] for t in handling] == ["{{ ks_kept_on_uninstall }}"]
