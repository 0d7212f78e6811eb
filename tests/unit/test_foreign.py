"""Which fields of other writers the installer keeps and which it takes over and removes: field sets, never names or
times. Fields the render does not set are kept unless they are denied content (a container, a volume, a webhook item,
an RBAC rule, a Service port)."""

from __future__ import annotations

from installer.objects.foreign import clean, eviction, guard, leaves, readable, rendered, tree

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
    # A scale to another value moves replicas off the installer's entry; the render sets it: the apply takes it back.
    unowned = {**OURS, "fieldsV1": tree([p for p in leaves(OURS["fieldsV1"]) if p != ("f:spec", "f:replicas")])}
    assert not clean("Deployment", [unowned, scaled], BODY)
    assert clean("Deployment", [OURS, scaled], BODY)  # shared: the scale wrote the value the installer applied
    cab = _entry("cainjector", ("f:webhooks", 'k:{"name":"w"}', "f:clientConfig", "f:caBundle"))
    hook = ("f:webhooks", 'k:{"name":"w"}')
    hooks = {**OURS, "fieldsV1": tree([(*hook, "."), (*hook, "f:name")])}
    assert clean("ValidatingWebhookConfiguration", [hooks, cab])
    ip = _entry("x", ("f:spec", "f:clusterIP"), ("f:spec", "f:externalIPs"))
    plan = eviction("Service", [OURS, ip], "t", {"kind": "Service", "spec": {}})
    assert plan is not None and plan.removed == {"x": ["spec.externalIPs"]}
    assert [leaves(e["fieldsV1"]) for e in plan.managed_fields if e["manager"] == "x"] == [[("f:spec", "f:clusterIP")]]


def test_neither_the_installers_name_nor_a_date_hides_a_taken_field() -> None:
    forged = _entry("ks-installer-rollout", ("f:data", "f:extra"))
    dated = {**OURS, "time": "2099-01-01T00:00:00Z"}
    body = {"kind": "ConfigMap", "data": {"extra": "rendered"}}
    assert not clean("ConfigMap", [dated, forged], body)  # the render sets it: the apply takes it back
    assert not clean("ConfigMap", [dated, {**forged, "manager": "ks-installer"}], body)  # an Update, not its apply
    assert clean("ConfigMap", [dated, forged], {"kind": "ConfigMap", "data": {}})  # not rendered: another's key
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


def test_annotations_on_a_pod_template_are_another_writers_to_keep() -> None:
    annotations = ("f:spec", "f:template", "f:metadata", "f:annotations")
    roll = _entry("ks-installer-rollout", (*annotations, "."), (*annotations, "f:installer.kubesphere.io/config-hash"))
    reloader = _entry("reloader", (*annotations, "."), (*annotations, "f:reloader.stakater.com/last-reloaded-from"))
    assert clean("Deployment", [OURS, roll, reloader], BODY)
    assert eviction("Deployment", [OURS, roll, reloader], "t", BODY) is None


def _item(name: str) -> str:
    return f'k:{{"name":"{name}"}}'


HONEST = [
    ("ServiceAccount", _entry("kubectl-patch", ("f:imagePullSecrets", _item("registry"), "."))),
    ("Service", _entry("cloud-controller-manager", ("f:metadata", "f:annotations",
                                                    "f:service.beta.kubernetes.io/aws-load-balancer-type"),
                       ("f:metadata", "f:finalizers", 'v:"service.kubernetes.io/load-balancer-cleanup"'))),
    ("Service", _entry("external-dns", ("f:metadata", "f:annotations", "f:external-dns.alpha.kubernetes.io/hostname"))),
    ("Deployment", _entry("istioctl", ("f:spec", "f:template", "f:metadata", "f:labels", "f:sidecar.istio.io/inject"))),
    ("Deployment", _entry("kubectl-rollout", ("f:spec", "f:paused"))),
    ("Deployment", _entry("kubectl-label", ("f:metadata", "f:labels", "f:team"))),
    ("Deployment", _entry("velero", ("f:metadata", "f:annotations", "f:backup.velero.io/backup-volumes"))),
    ("Deployment", _entry("horizontal-pod-autoscaler", ("f:spec", "f:replicas"), subresource="scale")),
    ("ConfigMap", _entry("kubectl-edit", ("f:data", "f:extra"))),
]


def test_what_honest_neighbours_add_where_the_render_is_silent_is_kept() -> None:
    unscaled = {**BODY, "spec": {k: v for k, v in BODY["spec"].items() if k != "replicas"}}
    for kind, entry in HONEST:
        assert clean(kind, [OURS, entry], {**unscaled, "kind": kind}), (kind, entry["manager"])
        assert eviction(kind, [OURS, entry], "t", {**unscaled, "kind": kind}) is None, (kind, entry["manager"])


DENIED = [
    ("ValidatingWebhookConfiguration", _entry("x", ("f:webhooks", _item("evil"), "."),
                                              ("f:webhooks", _item("evil"), "f:clientConfig", "f:caBundle")),
     ["webhooks[evil]"]),
    ("ClusterRole", _entry("x", ("f:rules",)), ["rules"]),
    ("ClusterRoleBinding", _entry("x", ("f:subjects",)), ["subjects"]),
    ("Service", _entry("x", ("f:spec", "f:ports", 'k:{"port":22,"protocol":"TCP"}', "."),
                       ("f:spec", "f:ports", 'k:{"port":22,"protocol":"TCP"}', "f:nodePort")),
     ["spec.ports[port=22,protocol=TCP]"]),
    ("Prometheus", _entry("x", ("f:spec", "f:containers"), ("f:spec", "f:volumes"), ("f:spec", "f:hostNetwork")),
     ["spec.containers", "spec.hostNetwork", "spec.volumes"]),
    ("CronJob", _entry("x", ("f:spec", "f:jobTemplate", "f:spec", "f:template", "f:spec", "f:hostPID")),
     ["spec.jobTemplate.spec.template.spec.hostPID"]),
    ("APIService", _entry("x", ("f:spec", "f:service", "f:namespace")), ["spec.service.namespace"]),
]


def test_denied_content_of_other_writers_is_removed_whatever_leaf_it_carries() -> None:
    for kind, entry, removed in DENIED:
        plan = eviction(kind, [OURS, entry], "t", {"kind": kind})
        assert plan is not None and plan.removed == {"x": removed}, kind


def test_the_guard_sees_a_value_written_under_the_installers_name_not_another_writers_label() -> None:
    live = {"metadata": {"managedFields": [OURS]}, **{k: v for k, v in BODY.items() if k != "metadata"}}
    before = guard(live)
    labelled = {**live, "metadata": {"labels": {"team": "a"}, "managedFields": [OURS, _entry(
        "kubectl-label", ("f:metadata", "f:labels", "f:team"))]}}
    assert guard(labelled) == before
    evil = {"spec": {"containers": [{"name": "main", "image": "evil"}]}}
    forged = {**live, "spec": {**live["spec"], "template": evil}}
    assert guard(forged) != before
    taken = {**live, "metadata": {"managedFields": [{**OURS, "fieldsV1": tree([p for p in leaves(OURS["fieldsV1"])
                                                                             if p[-1] != "f:image"])}]}}
    assert guard(taken) != before
    scaled = {**live, "spec": {**live["spec"], "replicas": 3}}
    assert guard(scaled) == before  # replicas are left to a scale until the module's next run


def test_a_service_account_is_planted_unless_the_originals_records_name_it_and_it_came_after_the_cc() -> None:
    from installer.objects.repair import planted

    cc = "2026-01-01T00:00:00Z"
    labelled = {"labels": {"installer.kubesphere.io/module": "m"}, "creationTimestamp": "2026-02-01T00:00:00Z",
                "managedFields": [{"manager": "ks-installer", "operation": "Apply", "fieldsV1": {}}]}
    assert planted(labelled, False, cc)  # a label and a manager's name are anyone's to write
    after = {"creationTimestamp": "2026-02-01T00:00:00Z"}
    assert not planted(after, True, cc)  # named by the original's records, created after the cc
    assert planted(after, False, cc)
    assert planted({"creationTimestamp": "2025-12-31T23:59:59Z"}, True, cc)  # before the cc existed
    assert planted(after, True, "~")  # no cc
