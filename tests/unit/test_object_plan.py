"""The field-level diff of ``plan --objects`` (installer.preview.object_plan), without a cluster."""

from __future__ import annotations

import base64

from installer.ansible_tasks._record import GENERATED, GENERATED_CA
from installer.preview.object_plan import (
    ModuleObjects,
    ObjectPlan,
    diff,
    normalised,
    object_diff,
    offline_plan,
    redacted_manifest,
)
from installer.preview.render import Rendered
from installer.settings import APPLIED_ANNOTATION


def _deployment(cpu: str, **meta: object) -> dict[str, object]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "api", "namespace": "ns", **meta},
            "spec": {"template": {"spec": {"containers": [
                {"name": "sidecar", "image": "s:1"},
                {"name": "api", "image": "a:1", "resources": {"limits": {"cpu": cpu}},
                 "env": [{"name": "MODE", "value": "x"}]}]}}},
            "status": {"replicas": 1}}


def test_one_changed_field_is_named_by_its_path_with_containers_by_name() -> None:
    live = _deployment("1", resourceVersion="5", generation=2, uid="u", creationTimestamp="t",
                       managedFields=[{"manager": "x"}], annotations={APPLIED_ANNOTATION: "old"})
    after = _deployment("2", resourceVersion="6", generation=3, uid="u", creationTimestamp="t",
                        managedFields=[{"manager": "y"}], annotations={APPLIED_ANNOTATION: "new"})
    after["status"] = {"replicas": 2}
    assert object_diff(live, after) == ['spec.template.spec.containers[api].resources.limits.cpu: "1" -> "2"']


def test_only_server_bookkeeping_differs_means_no_difference() -> None:
    live = _deployment("1", resourceVersion="5", annotations={APPLIED_ANNOTATION: "a",
                                                              "deployment.kubernetes.io/revision": "3"})
    after = _deployment("1", resourceVersion="9", annotations={APPLIED_ANNOTATION: "b",
                                                               "deployment.kubernetes.io/revision": "4"})
    assert object_diff(live, after) == []
    assert "annotations" not in normalised(live)["metadata"]  # type: ignore[index]


def test_added_removed_and_reordered_fields() -> None:
    assert diff({"a": 1}, {"a": 1, "b": [1, 2]}) == ["b: + [1,2]"]
    assert diff({"a": 1, "b": "x"}, {"a": 1}) == ['b: - "x"']
    assert diff({"l": [1, 2]}, {"l": [1, 3]}) == ["l[1]: 2 -> 3"]
    assert diff({"l": [1]}, {"l": [1, 2]}) == ["l: [1] -> [1,2]"]
    named = [{"name": "a", "v": 1}, {"name": "b", "v": 2}]
    assert diff({"c": named}, {"c": named[::-1]}) == ['c: order ["a","b"] -> ["b","a"]']
    assert diff({"c": named}, {"c": [named[0]]}) == ['c[b]: - {"name":"b","v":2}']


def test_multi_line_text_shows_the_changed_lines() -> None:
    lines = diff({"data": {"k.yaml": "a: 1\nb: 2\nc: 3\n"}}, {"data": {"k.yaml": "a: 1\nb: 20\nc: 3\n"}})
    assert lines[0] == "data.k.yaml:"
    assert "    -b: 2" in lines and "    +b: 20" in lines


def test_credentials_are_never_shown() -> None:
    assert diff({"spec": {"password": "old"}}, {"spec": {"password": "new"}}) == \
        ["spec.password: <redacted> (changed)"]
    assert diff({"auth": {"adminToken": "a"}}, {"auth": {}}) == ["auth.adminToken: - <redacted>"]
    env = [{"name": "DB_PASSWORD", "value": "s3cret"}]
    assert diff({"env": env}, {"env": [{"name": "DB_PASSWORD", "value": "other"}]}) == \
        ["env[DB_PASSWORD].value: <redacted> (changed)"]
    assert "s3cret" not in "".join(diff({"env": env}, {"env": []}))


def test_secrets_show_key_names_and_a_mark_never_values() -> None:
    def secret(data: dict[str, str], **more: object) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}, **more}

    live = secret({"user": "admin", "pass": "old", "gone": "x"}, type="Opaque")
    after = secret({"user": "admin", "pass": "new", "new": "y"}, type="kubernetes.io/basic-auth")
    lines = object_diff(live, after)
    assert lines == ["data.gone: removed", "data.new: added", "data.pass: changed",
                     'type: "Opaque" -> "kubernetes.io/basic-auth"']
    assert not any(v in "".join(lines) for v in ("old", "new\"", "admin"))
    # stringData (as a manifest gives it) compares as the data it becomes
    assert object_diff(live, {**live, "data": {}, "stringData": {"user": "admin", "pass": "old", "gone": "x"}}) == []
    shown = redacted_manifest({**after, "stringData": {"k": GENERATED}})
    assert set(shown["data"].values()) == {"<redacted>"} and shown["stringData"] == {"k": GENERATED}


def test_a_generated_ca_bundle_is_shown_as_generated() -> None:
    webhook = {"kind": "ValidatingWebhookConfiguration", "webhooks": [{"clientConfig": {"caBundle": GENERATED_CA}}]}
    assert redacted_manifest(webhook)["webhooks"][0]["clientConfig"]["caBundle"] == GENERATED


def test_exit_code_is_that_of_kubectl_diff() -> None:
    plan = ObjectPlan([ModuleObjects("m", "upgrade")])
    plan.modules[0].add("ConfigMap/ns/c", "unchanged")
    assert (plan.exit_code, plan.text()) == (0, "")
    plan.modules[0].add("ConfigMap/ns/d", "kept", note="no longer rendered; its kind is not pruned")
    assert plan.exit_code == 0
    plan.modules[0].add("Deployment/ns/api", "update", ['spec.replicas: 1 -> 2'])
    assert plan.exit_code == 1
    assert plan.text().splitlines() == [
        "m (upgrade)", "  = ConfigMap ns/d (no longer rendered; its kind is not pruned)", "  ~ Deployment ns/api",
        "      spec.replicas: 1 -> 2", "1 to update, 1 kept"]
    plan.errors.append("m: task 't' failed: boom")
    assert plan.exit_code == 2


def test_offline_lists_every_object_once_and_generated_credentials() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}, "data": {"a": "1"}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    calls = [{"module": "ks_manifest", "args": {"module": "m", "definition": [ns, cm]}},
             {"module": "ks_random_secret", "args": {"module": "m", "namespace": "ns", "name": "pw", "key": "auth"}},
             {"module": "ks_manifest", "args": {"module": "m", "definition": [cm], "prune": False, "wait": True}}]
    plan = offline_plan({"m": Rendered("m", "install", calls)}, {"m": "install"})
    assert [(o.object, o.action, o.note) for o in plan.modules[0].objects] == [
        ("Namespace/ns", "create", ""), ("ConfigMap/ns/c", "create", ""),
        ("Secret/ns/pw", "create", f"keys auth: {GENERATED}")]
    manifests = plan.modules[0].manifests
    assert manifests[1]["metadata"]["labels"]["installer.kubesphere.io/module"] == "m"
    assert manifests[1]["metadata"]["annotations"][APPLIED_ANNOTATION]
    assert plan.exit_code == 1
    failed = Rendered("m", "install", [*calls, {"module": "ks_failed", "args": {"task": "Check", "msg": "no"}}])
    assert offline_plan({"m": failed}, {"m": "install"}).exit_code == 2
