"""Which fields of other writers the installer takes over and removes: field sets, never names or times."""

from __future__ import annotations

from installer.objects.foreign import clean, eviction, leaves, readable, rendered, tree

SIDE = 'k:{"name":"sidecar"}'
MAIN = 'k:{"name":"main"}'
CONTAINERS = ("f:spec", "f:template", "f:spec", "f:containers")
BODY = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1, "template": {"spec": {
    "containers": [{"name": "main", "image": "i"}]}}}}
OURS = {"manager": "ks-installer", "operation": "Apply", "time": "2026-01-01T00:00:00Z",
        "fieldsV1": tree([("f:spec", "f:replicas"), (*CONTAINERS, MAIN, "."), (*CONTAINERS, MAIN, "f:image"),
                          (*CONTAINERS, MAIN, "f:name")])}


def _entry(manager: str, *paths: tuple[str, ...], **extra: str) -> dict:
    return {"manager": manager, "operation": "Update", "time": "2026-01-01T00:00:00Z", "fieldsV1": tree(list(paths)),
            **extra}


PLANTED = _entry("kube-controller-manager", (*CONTAINERS, SIDE, "."), (*CONTAINERS, SIDE, "f:image"),
                 (*CONTAINERS, MAIN, 'f:env', 'k:{"name":"LD_PRELOAD"}', "."),
                 (*CONTAINERS, MAIN, 'f:env', 'k:{"name":"LD_PRELOAD"}', "f:value"),
                 (*CONTAINERS, MAIN, "f:securityContext", "f:privileged"),
                 ("f:metadata", "f:annotations", "f:deployment.kubernetes.io/revision"),
                 ("f:status", "f:replicas"))


def test_leaves_and_tree_are_inverse() -> None:
    assert tree(leaves(OURS["fieldsV1"])) == OURS["fieldsV1"]


def test_a_forged_system_manager_name_does_not_make_a_sidecar_legitimate() -> None:
    plan = eviction("Deployment", [OURS, PLANTED], "2026-01-02T00:00:00Z", BODY)
    assert plan is not None
    assert plan.removed == {"kube-controller-manager": [
        "spec.template.spec.containers[main].env[LD_PRELOAD]",
        "spec.template.spec.containers[main].securityContext.privileged",
        "spec.template.spec.containers[sidecar]"]}
    ours, theirs = plan.managed_fields
    assert (*CONTAINERS, SIDE, ".") in leaves(ours["fieldsV1"]) and ours["time"] == "2026-01-02T00:00:00Z"
    # What the controller may own stays with it.
    assert sorted(leaves(theirs["fieldsV1"])) == [
        ("f:metadata", "f:annotations", "f:deployment.kubernetes.io/revision"), ("f:status", "f:replicas")]
    assert plan.describe().startswith("removed fields of manager kube-controller-manager: spec.template")


def test_allow_listed_fields_are_kept_unless_the_render_sets_them() -> None:
    scaled = _entry("kubectl", ("f:spec", "f:replicas"), subresource="scale")
    restarted = _entry("kubectl-rollout", ("f:spec", "f:template", "f:metadata", "f:annotations",
                                           "f:kubectl.kubernetes.io/restartedAt"))
    unscaled = {**BODY, "spec": {k: v for k, v in BODY["spec"].items() if k != "replicas"}}
    assert clean("Deployment", [OURS, scaled, restarted], unscaled)
    assert eviction("Deployment", [OURS, scaled, restarted], "t", unscaled) is None
    assert not clean("Deployment", [OURS, scaled], BODY)  # the render sets replicas: the apply takes it back
    cab = _entry("cainjector", ("f:webhooks", 'k:{"name":"w"}', "f:clientConfig", "f:caBundle"))
    assert clean("ValidatingWebhookConfiguration", [OURS, cab])
    ip = _entry("x", ("f:spec", "f:clusterIP"), ("f:spec", "f:externalIPs"))
    plan = eviction("Service", [OURS, ip], "t", {"kind": "Service", "spec": {}})
    assert plan is not None and plan.removed == {"x": ["spec.externalIPs"]}
    assert [leaves(e["fieldsV1"]) for e in plan.managed_fields if e["manager"] == "x"] == [[("f:spec", "f:clusterIP")]]


def test_neither_the_installers_name_nor_a_date_hides_foreign_fields() -> None:
    forged = _entry("ks-installer-rollout", ("f:data", "f:extra"))
    dated = {**OURS, "time": "2099-01-01T00:00:00Z"}
    assert not clean("ConfigMap", [dated, forged])
    assert not clean("ConfigMap", [dated, {**forged, "manager": "ks-installer"}])  # an Update, not its apply
    assert not clean("ConfigMap", [dated, {**forged, "subresource": "status"}])
    assert clean("ConfigMap", [dated])
    assert not clean("ConfigMap", [])  # nothing says the installer applied it


def test_other_kinds_and_a_missing_apply_entry_are_left_alone() -> None:
    assert eviction("Secret", [OURS, PLANTED], "t") is None
    assert eviction("Deployment", [PLANTED], "t") is None


def test_a_set_members_value_is_never_printed() -> None:
    assert readable(("f:metadata", "f:finalizers", 'v:"secret-value"')) == "metadata.finalizers[value]"
    assert readable(("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', ".")) == "spec.ports[port=80,protocol=TCP]"


def test_rendered_follows_keys_of_list_items() -> None:
    assert rendered(BODY, (*CONTAINERS, MAIN, "f:image"))
    assert not rendered(BODY, (*CONTAINERS, SIDE, "."))
    assert not rendered(None, ("f:spec",))


def test_the_map_an_allow_listed_annotation_lives_in_is_not_foreign() -> None:
    annotations = ("f:spec", "f:template", "f:metadata", "f:annotations")
    roll = _entry("ks-installer-rollout", (*annotations, "."), (*annotations, "f:installer.kubesphere.io/config-hash"))
    assert clean("Deployment", [OURS, roll], BODY)
    extra = _entry("x", (*annotations, "."), (*annotations, "f:evil"))
    plan = eviction("Deployment", [OURS, extra], "t", BODY)
    assert plan is not None and plan.removed == {"x": ["spec.template.metadata.annotations"]}


def test_a_service_account_is_planted_unless_labelled_or_the_originals_made_after_the_cc() -> None:
    from installer.objects.manifests import planted

    cc = "2026-01-01T00:00:00Z"
    legacy = {"manager": "kubectl-client-side-apply", "operation": "Update", "fieldsV1": {}}
    assert not planted({"labels": {"installer.kubesphere.io/module": "m"}}, "m", cc)
    assert planted({"labels": {"installer.kubesphere.io/module": "other"}}, "m", cc)
    assert planted({"creationTimestamp": "2026-02-01T00:00:00Z"}, "m", cc)  # no sign of the original
    original = {"creationTimestamp": "2026-02-01T00:00:00Z", "managedFields": [legacy]}
    assert not planted(original, "m", cc)
    assert planted({**original, "creationTimestamp": "2025-12-31T23:59:59Z"}, "m", cc)  # before the cc existed
    assert planted(original, "m", "~")  # no cc
