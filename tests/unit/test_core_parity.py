"""ks-core rendered by Ansible against what ks-installer v3.4.1 created (no cluster needed).

Expected kinds and counts are the facts of the upstream inventory of module ks-core (tag v3.4.1, 183 objects).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from installer_state import upstream_kinds
from role_harness import engine_vars, run_play

from installer.config.defaults import apply_defaults

Obj = dict[str, Any]
CA_BUNDLE = "Q0EgY2VydGlmaWNhdGU="
# Upstream ks-core, v3.4.1: objects per kind (CRDs, chart ks-core, ks-init/role-templates.yaml, kubesphere-secret).
UPSTREAM_KINDS = upstream_kinds("ks-core")
# Created at run time by the role's modules rather than rendered: ks_core_secret, ks_webhook_cert.
GENERATED = [("Secret", "kubesphere-system", "kubesphere-secret"),
             ("Secret", "kubesphere-system", "ks-controller-manager-webhook-cert"), ("User", None, "admin")]
WEBHOOKS = {  # configuration → (webhook names, failurePolicy)
    ("ValidatingWebhookConfiguration", "users.iam.kubesphere.io"): (["users.iam.kubesphere.io"], "Fail"),
    ("ValidatingWebhookConfiguration", "network.kubesphere.io"): (["validating-network.kubesphere.io"], "Fail"),
    ("ValidatingWebhookConfiguration", "cluster.kubesphere.io"): (["validating-cluster.kubesphere.io"], "Fail"),
    ("ValidatingWebhookConfiguration", "resourcesquotas.quota.kubesphere.io"):
        (["resourcesquotas.quota.kubesphere.io"], "Ignore"),
    ("ValidatingWebhookConfiguration", "storageclass-accessor.storage.kubesphere.io"):
        (["storageclass-accessor.storage.kubesphere.io"], "Ignore"),
    ("ValidatingWebhookConfiguration", "rulegroups.alerting.kubesphere.io"):
        ([f"{p}.alerting.kubesphere.io" for p in ("rulegroups", "clusterrulegroups", "globalrulegroups")], "Ignore"),
    ("MutatingWebhookConfiguration", "rulegroups.alerting.kubesphere.io"):
        ([f"{p}.alerting.kubesphere.io" for p in ("rulegroups", "clusterrulegroups", "globalrulegroups")], "Ignore"),
}
# Mounted or referenced by the workloads but made elsewhere: by ks-config, ks_webhook_cert, ks_core_secret, redis.
MADE_ELSEWHERE = {("ConfigMap", "kubesphere-config"), ("Secret", "ks-controller-manager-webhook-cert"),
                  ("Secret", "kubesphere-secret"), ("Secret", "redis-secret"), ("Secret", "openldap-secret"),
                  ("Secret", "minio"), ("Secret", "kubesphere-config-credentials")}
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {}),
    "ha": ({"common": {"redis": {"enabled": True}}}, {"ks_master_num": 3}),
    "cn": ({"zone": "cn"}, {"ks_master_num": 0}),
}


def _play(out: Path) -> dict[str, Any]:
    tasks: list[dict[str, Any]] = []
    for name, (changes, extra) in VARIANTS.items():
        tasks += [{"ansible.builtin.include_role": {"name": "ks-core", "tasks_from": "render"},
                   "vars": {**apply_defaults(changes), **extra, "ks_core_webhook_cert": {"ca_bundle": CA_BUNDLE}}},
                  {"ansible.builtin.copy": {"dest": str(out / f"{name}.json"), "content": (
                      "{{ {'main': ks_core_objects, 'token': ks_core_token_objects, 'webhooks': ks_core_webhooks,"
                      " 'builtin': ks_core_builtin_annotations} | to_json }}")}}]
    return {"hosts": "localhost", "gather_facts": False, "roles": ["kubesphere-defaults"], "tasks": tasks,
            "vars": {**engine_vars("ks-core"), "nodeNum": 3, "kubernetes_version": "v1.34.4"}}


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("core-parity")
    run_play(_play(out), out)
    return out


def render(out: Path, name: str = "default") -> dict[str, list[Obj]]:
    return json.loads((out / f"{name}.json").read_text())


def by_key(objects: list[Obj]) -> dict[tuple[str, str], Obj]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_every_upstream_kind_and_count(out: Path) -> None:
    r = render(out)
    kinds = Counter(o["kind"] for o in r["main"] + r["token"] + r["webhooks"])
    kinds.update(kind for kind, _, _ in GENERATED)
    kinds["ClusterRole"] += len(r["builtin"])  # the built-in cluster-admin, annotated
    assert dict(kinds) == UPSTREAM_KINDS
    assert sum(kinds.values()) == 183
    assert [b["name"] for b in r["builtin"]] == ["cluster-admin"]
    assert not any(o["kind"] in ("Secret", "Namespace") for o in r["main"])  # never pruned with the main set
    assert [o["metadata"]["name"] for o in r["token"]] == ["kubesphere-sa-token"]


def test_webhooks_use_the_ca_and_the_controller_manager(out: Path) -> None:
    hooks = by_key(render(out)["webhooks"])
    assert set(hooks) == set(WEBHOOKS)
    for key, (names, policy) in WEBHOOKS.items():
        webhooks = hooks[key]["webhooks"]
        assert [w["name"] for w in webhooks] == names
        for w in webhooks:
            assert w["clientConfig"]["caBundle"] == CA_BUNDLE
            service = w["clientConfig"]["service"]
            assert (service["name"], service["namespace"], service["port"]) == \
                ("ks-controller-manager", "kubesphere-system", 443)
            assert service["path"].startswith("/") and w["failurePolicy"] == policy
            assert w["sideEffects"] == "None" and w["admissionReviewVersions"] == ["v1beta1"]
    users = hooks[("ValidatingWebhookConfiguration", "users.iam.kubesphere.io")]["webhooks"][0]
    assert users["clientConfig"]["service"]["path"] == "/validate-email-iam-kubesphere-io-v1alpha2"
    assert users["rules"] == [{"apiGroups": ["iam.kubesphere.io"], "apiVersions": ["v1alpha2"],
                               "operations": ["CREATE", "UPDATE"], "resources": ["users"], "scope": "*"}]
    assert users["namespaceSelector"] == {"matchExpressions": [{"key": "control-plane", "operator": "DoesNotExist"}]}
    assert users["timeoutSeconds"] == 30
    quota = hooks[("ValidatingWebhookConfiguration", "resourcesquotas.quota.kubesphere.io")]["webhooks"][0]
    assert quota["rules"][0]["resources"] == ["pods"] and "timeoutSeconds" not in quota


def test_webhook_service_serves_the_certificate(out: Path) -> None:
    main = by_key(render(out)["main"])
    service = main[("Service", "ks-controller-manager")]["spec"]
    assert {"name": "webhook", "port": 443, "targetPort": 8443, "protocol": "TCP"} in service["ports"]
    pod = main[("Deployment", "ks-controller-manager")]["spec"]["template"]["spec"]
    assert {"name": "webhook-secret", "secret": {"secretName": "ks-controller-manager-webhook-cert",
                                                 "defaultMode": 420}} in pod["volumes"]
    assert {"name": "webhook-secret", "mountPath": "/tmp/k8s-webhook-server/serving-certs"} \
        in pod["containers"][0]["volumeMounts"]
    assert {"containerPort": 8443, "protocol": "TCP"} in pod["containers"][0]["ports"]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_mounted_configmap_and_secret_exists(out: Path, variant: str) -> None:
    r = render(out, variant)
    have = {(o["kind"], o["metadata"]["name"]) for o in r["main"] + r["token"]} | MADE_ELSEWHERE
    for deployment in (o for o in r["main"] if o["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        names = {v["name"] for v in pod.get("volumes", [])}
        for container in pod["containers"]:
            assert {m["name"] for m in container.get("volumeMounts", [])} <= names
            refs = [("Secret", e["valueFrom"]["secretKeyRef"]["name"]) for e in container.get("env", [])
                    if "secretKeyRef" in e.get("valueFrom", {})]
            assert set(refs) <= have, deployment["metadata"]["name"]
        for volume in pod.get("volumes", []):
            if "configMap" in volume:
                assert ("ConfigMap", volume["configMap"]["name"]) in have
            if "secret" in volume:
                assert ("Secret", volume["secret"]["secretName"]) in have
    main = by_key(r["main"])
    apiserver = main[("Deployment", "ks-apiserver")]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "ks-router-config", "mountPath": "/etc/kubesphere/ingress-controller"} in apiserver["volumeMounts"]
    console = main[("Deployment", "ks-console")]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "sample-bookinfo", "mountPath": "/opt/kubesphere/console/server/sample"} in console["volumeMounts"]


def test_workloads_as_upstream(out: Path) -> None:
    main = by_key(render(out)["main"])
    for name in ("ks-apiserver", "ks-console", "ks-controller-manager"):
        spec = main[("Deployment", name)]["spec"]
        assert spec["replicas"] == 1  # no ks_master_num: one
        assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}
        anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert anti[0]["labelSelector"]["matchExpressions"] == [{"key": "app", "operator": "In", "values": [name]}]
    apiserver = main[("Deployment", "ks-apiserver")]["spec"]["template"]["spec"]["containers"][0]
    assert apiserver["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 9090, "scheme": "HTTP"}
    console = main[("Deployment", "ks-console")]["spec"]["template"]["spec"]["containers"][0]
    assert console["livenessProbe"]["tcpSocket"] == {"port": 8000}
    backend = main[("Deployment", "default-http-backend")]
    assert backend["metadata"]["namespace"] == "kubesphere-controls-system" and backend["spec"]["replicas"] == 1
    container = backend["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "mirrorgooglecontainers/defaultbackend-amd64:1.4"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert main[("Service", "default-http-backend")]["spec"]["ports"] == [{"port": 80, "targetPort": 8080}]
    for name in ("kubesphere-router-serviceaccount", "kubesphere-cluster-admin"):
        assert main[("ServiceAccount", name)]["metadata"]["namespace"] == "kubesphere-controls-system"
    assert main[("ClusterRoleBinding", "system:kubesphere-cluster-admin")]["roleRef"]["name"] == "cluster-admin"
    assert main[("RoleBinding", "nginx-ingress-role-nisa-binding")]["roleRef"]["name"] == \
        "system:kubesphere-router-role"
    router = main[("ConfigMap", "ks-router-config")]["data"]
    assert set(router) == {"ingress-controller.yaml", "ingress-controller-svc.yaml"}
    assert "kubesphere/nginx-ingress-controller:v1.3.1" in router["ingress-controller.yaml"]
    bookinfo = main[("ConfigMap", "sample-bookinfo")]["data"]["bookinfo.yaml"]
    assert bookinfo.count("apiVersion: apps/v1\nkind: Deployment") == 4
    assert "examples-bookinfo-ratings-v1:1.16.3" in bookinfo


def test_replicas_follow_the_control_plane(out: Path) -> None:
    ha, cn = by_key(render(out, "ha")["main"]), by_key(render(out, "cn")["main"])
    for name in ("ks-apiserver", "ks-console", "ks-controller-manager"):
        assert ha[("Deployment", name)]["spec"]["replicas"] == 3
        assert cn[("Deployment", name)]["spec"]["replicas"] == 1  # no node labelled control-plane: one
    assert ha[("Deployment", "default-http-backend")]["spec"]["replicas"] == 1
    env = ha[("Deployment", "ks-controller-manager")]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "KUBESPHERE_CACHE_OPTIONS_PASSWORD", "valueFrom": {"secretKeyRef": {
        "name": "redis-secret", "key": "auth", "optional": True}}} in env
    backend = cn[("Deployment", "default-http-backend")]["spec"]["template"]["spec"]["containers"][0]
    assert backend["image"] == "registry.cn-beijing.aliyuncs.com/kubesphereio/defaultbackend-amd64:1.4"


def test_crds(out: Path) -> None:
    crds = {o["metadata"]["name"]: o for o in render(out)["main"] if o["kind"] == "CustomResourceDefinition"}
    assert len(crds) == 34
    for name in ("applications.app.k8s.io", "helmreleases.application.kubesphere.io", "ippools.network.kubesphere.io",
                 "rulegroups.alerting.kubesphere.io", "federatedusers.iam.kubesphere.io",
                 "nginxes.gateway.kubesphere.io", "resourcequotas.quota.kubesphere.io",
                 "strategies.servicemesh.kubesphere.io", "accessors.storage.kubesphere.io"):
        assert name in crds, name
    for name, crd in crds.items():
        spec = crd["spec"]
        assert name == f"{spec['names']['plural']}.{spec['group']}"
        assert [v["storage"] for v in spec["versions"]].count(True) == 1
        assert all(v["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] for v in spec["versions"])
    app = crds["applications.app.k8s.io"]
    assert app["metadata"]["annotations"]["api-approved.kubernetes.io"]  # required for a *.k8s.io group
    release = crds["helmreleases.application.kubesphere.io"]["spec"]
    assert release["scope"] == "Cluster" and release["names"]["shortNames"] == ["hrls"]
    assert release["versions"][0]["subresources"] == {"status": {}}
    assert len(release["versions"][0]["additionalPrinterColumns"]) == 6
    workspace = crds["workspaces.tenant.kubesphere.io"]["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in workspace] == [("v1alpha1", True, True)]


def test_iam_model(out: Path) -> None:
    r = render(out)
    main = by_key(r["main"])
    assert ("ClusterRole", "cluster-admin") not in main  # the built-in one is only annotated
    admin = r["builtin"][0]["annotations"]
    assert "role-template-view-nodes" in json.loads(admin["iam.kubesphere.io/aggregation-roles"])
    for kind in ("ClusterRole", "GlobalRole", "WorkspaceRole"):
        names = {n for k, n in main if k == kind} | ({"cluster-admin"} if kind == "ClusterRole" else set())
        for (k, name), role in main.items():
            aggregated = (role["metadata"].get("annotations") or {}).get("iam.kubesphere.io/aggregation-roles")
            if k == kind and aggregated:
                assert set(json.loads(aggregated)) <= names, name
    templates = [o for (k, _), o in main.items() if k in ("GlobalRole", "WorkspaceRole", "ClusterRole")
                 and (o["metadata"].get("labels") or {}).get("iam.kubesphere.io/role-template") == "true"]
    assert templates and all(json.loads(t["metadata"]["annotations"]["iam.kubesphere.io/role-template-rules"])
                             for t in templates)
    authenticated = main[("GlobalRole", "authenticated")]["metadata"]["annotations"]
    assert authenticated["iam.kubesphere.io/rego-override"].startswith("package authz\n")
    project_admin = main[("RoleBase", "project-admin")]
    assert project_admin["role"]["kind"] == "Role" and project_admin["role"]["metadata"]["name"] == "admin"
    assert project_admin["metadata"]["labels"] == {"scope.kubesphere.io/namespace": "",
                                                   "scope.kubesphere.io/devops": ""}
    assert main[("RoleBase", "workspace-admin")]["role"]["apiVersion"] == "iam.kubesphere.io/v1alpha2"
    bindings = {n: o for (k, n), o in main.items() if k == "GlobalRoleBinding"}
    assert set(bindings) == {"admin", "anonymous", "authenticated", "pre-registration"}
    assert bindings["anonymous"]["subjects"][0]["name"] == "system:unauthenticated"
    assert main[("Workspace", "system-workspace")]["spec"] == {"manager": "admin", "networkIsolation": False}
    assert main[("WorkspaceTemplate", "system-workspace")]["spec"]["template"]["spec"]["manager"] == "admin"


def test_every_upstream_object_by_name(out: Path) -> None:
    inventory = Path(__file__).resolve().parents[1] / "parity" / "upstream" / "ks-core.json"
    if not inventory.exists():
        pytest.skip("no upstream inventory in tests/parity/upstream")
    expected = {(o["kind"], o["namespace"], o["name"]) for o in json.loads(inventory.read_text())["objects"]}
    r = render(out)
    have = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
            for o in r["main"] + r["token"] + r["webhooks"]}
    have |= set(GENERATED) | {("ClusterRole", None, b["name"]) for b in r["builtin"]}
    assert have == expected
