"""The events module (role events) through the engine on the simulated cluster, with an external OpenSearch (so the
opensearch module deploys only its curator), and logging and auditing switched on in the same edit: install
(opensearch and fluentbit once, before the three, which run side by side; the operator Available, the webhooks
registered with the generated certificate's CA, the Exporter, Ruler, default Rule and fluent-bit pipeline applied,
status events and events.ruler), the ruler switched off (events alone re-runs, the Ruler goes, status events.ruler
is cleared), uninstall of events alone (everything of it gone but the CRDs, status cleared, fluentbit's and
logging's objects untouched), and enabling it again after the user deleted the namespace by hand (fluentbit, which
events builds on, is repaired first)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_objects import delete_namespace, delete_quietly
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.engine import timeline
from installer.settings import MODULE_LABEL

from .conftest import Installer, between_cleanups

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-logging-system"
OPERATOR = "ks-events-operator"
ADMISSION = "ks-events-admission"
WEBHOOKS = {"mutating": f"{ADMISSION}-mutate", "validating": f"{ADMISSION}-validate"}
GROUP, VERSION = "events.kubesphere.io", "v1alpha1"
LOGGING_GROUP, LOGGING_VERSION = "logging.kubesphere.io", "v1alpha2"
CRDS = {f"CustomResourceDefinition//{p}.{GROUP}" for p in ("exporters", "rulers", "rules")}
INSTALLED = CRDS | {f"{kind}//{OPERATOR}" for kind in ("ClusterRole", "ClusterRoleBinding")} | {
    f"{kind}/{NS}/{name}" for kind, name in (("ServiceAccount", OPERATOR), ("Deployment", OPERATOR),
                                             ("Service", ADMISSION), ("Secret", ADMISSION))}
RULER = (GROUP, VERSION, "rulers", "ks-events-ruler")
# (group, version, plural, name) of the custom resources the module applies (all in NS), the Ruler apart.
CUSTOM = {(GROUP, VERSION, "exporters", "ks-events-exporter"),
          (GROUP, VERSION, "rules", "ks-events-cluster-rules-default"),
          (LOGGING_GROUP, LOGGING_VERSION, "inputs", "tail-events"),
          (LOGGING_GROUP, LOGGING_VERSION, "filters", "filter-events"),
          (LOGGING_GROUP, LOGGING_VERSION, "outputs", "opensearch-events")}
STORE = {"enabled": True, "externalOpensearchHost": "search.example.com"}
# fluentbit's own custom resources, which must outlive events while auditing uses them.
PIPELINE = {(LOGGING_GROUP, LOGGING_VERSION, "fluentbits", "fluent-bit"),
            (LOGGING_GROUP, LOGGING_VERSION, "fluentbitconfigs", "fluent-bit-config")}


LOG_USERS = ("auditing", "events", "logging")


def _spec(enabled: bool = True, **events: Any) -> dict[str, Any]:
    return {"events": {"enabled": enabled, **events}, "auditing": {"enabled": True}, "logging": {"enabled": True},
            "common__opensearch": STORE}


def assert_shared_services_once_then_users_side_by_side(installer: Installer, ran: list[str]) -> None:
    """opensearch and fluentbit ran once, and finished before the three log users started; these started together
    (the same dependencies let them start in one step) and so overlapped."""
    assert {"opensearch", "fluentbit", *LOG_USERS} <= set(ran) and len(ran) == len(set(ran)), ran
    spans = {m["module"]: (dt.datetime.fromisoformat(m["start"]), dt.datetime.fromisoformat(m["end"]))
             for m in timeline.load(installer.results)["modules"]}
    shared_done = max(spans[m][1] for m in ("opensearch", "fluentbit"))
    assert all(spans[m][0] >= shared_done for m in LOG_USERS), spans
    starts = sorted(spans[m][0] for m in LOG_USERS)
    assert starts[1] < min(spans[m][1] for m in LOG_USERS), spans  # at least two of them at once


def custom(api: client.ApiClient, group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object(group, version, NS, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def version_of(api: client.ApiClient, ref: tuple[str, str, str, str]) -> str:
    cr = custom(api, *ref)
    assert cr is not None, ref
    return str(cr["metadata"]["resourceVersion"])


def webhooks(api: client.ApiClient) -> dict[str, Any]:
    """The module's webhook configurations that exist, by name."""
    admission = client.AdmissionregistrationV1Api(api)
    found = {w.metadata.name: w for w in admission.list_mutating_webhook_configuration().items}
    found |= {w.metadata.name: w for w in admission.list_validating_webhook_configuration().items}
    return {name: found[name] for name in WEBHOOKS.values() if name in found}


def _clean(api: client.ApiClient) -> None:
    """Remove what a run leaves behind: the webhooks (they refuse every Rule once their backend is gone), cluster
    RBAC, the namespace; the CRDs stay by design. Auditing's leftovers are its own test's business."""
    admission = client.AdmissionregistrationV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    delete_quietly(lambda: admission.delete_mutating_webhook_configuration(WEBHOOKS["mutating"]),
                   lambda: admission.delete_validating_webhook_configuration(WEBHOOKS["validating"]),
                   lambda: rbac.delete_cluster_role_binding(OPERATOR), lambda: rbac.delete_cluster_role(OPERATOR))
    delete_namespace(api, NS)


@pytest.fixture
def events(installer: Installer) -> Iterator[Installer]:
    yield from between_cleanups(installer, _clean)


def assert_installed(installer: Installer, ruler: bool = True) -> None:
    api = installer.api
    assert set(installer.module_objects().get("events", {})) == INSTALLED
    assert client.AppsV1Api(api).read_namespaced_deployment(OPERATOR, NS).status.available_replicas == 1
    # Both webhooks trust the CA of the certificate the operator serves.
    ca = client.CoreV1Api(api).read_namespaced_secret(ADMISSION, NS).data["ca.crt"]
    registered = webhooks(api)
    assert set(registered) == set(WEBHOOKS.values())
    for configuration in registered.values():
        (hook,) = configuration.webhooks
        assert hook.client_config.ca_bundle == ca and hook.failure_policy == "Fail"
        assert configuration.metadata.labels[MODULE_LABEL] == "events"
    for ref in CUSTOM | ({RULER} if ruler else set()):
        cr = custom(api, *ref)
        assert cr is not None and cr["metadata"]["labels"][MODULE_LABEL] == "events", ref
    output = custom(api, LOGGING_GROUP, LOGGING_VERSION, "outputs", "opensearch-events")
    assert output is not None and output["spec"]["opensearch"]["host"] == "search.example.com"
    status = installer.status()
    assert status["events"]["status"] == "enabled" and status["events"]["enabledTime"]


def test_events_install_ruler_off_uninstall_and_reenable(events: Installer) -> None:
    api = events.api
    events.apply_cc(**_spec())
    assert_shared_services_once_then_users_side_by_side(events, events.reconcile_ok())
    assert_installed(events)
    ruler = custom(api, *RULER)
    assert ruler is not None and ruler["spec"]["replicas"] == 2
    exporter = custom(api, GROUP, VERSION, "exporters", "ks-events-exporter")
    assert exporter is not None and exporter["spec"]["sinks"]["webhooks"][0]["service"]["name"] == "ks-events-ruler"
    assert events.status()["events"]["ruler"]["status"] == "enabled"
    assert events.status()["migrations"] == ["added events.ruler (enabled: true, replicas: 2)"]  # a v3.1 spec
    ca = client.CoreV1Api(api).read_namespaced_secret(ADMISSION, NS).data["ca.crt"]

    # The ruler off: events alone re-runs; the Ruler goes, the exporter stops sending to it, status events.ruler
    # is cleared while status events stays; the certificate is kept.
    events.apply_cc(**_spec(ruler={"enabled": False, "replicas": 2}))
    assert events.reconcile_ok() == ["events"]
    assert_installed(events, ruler=False)
    assert custom(api, *RULER) is None
    exporter = custom(api, GROUP, VERSION, "exporters", "ks-events-exporter")
    assert exporter is not None and "webhooks" not in exporter["spec"]["sinks"]
    assert "ruler" not in events.status()["events"]
    assert "migrations" not in events.status()  # the spec needs no migration any more: the note goes
    assert client.CoreV1Api(api).read_namespaced_secret(ADMISSION, NS).data["ca.crt"] == ca

    # Uninstall while auditing still uses fluentbit: the webhooks, custom resources, operator, RBAC and certificate
    # go; the CRDs stay; status events is cleared; fluentbit's objects are untouched.
    fluentbit, logging = events.module_objects()["fluentbit"], events.module_objects()["logging"]
    pipeline = {ref: version_of(api, ref) for ref in PIPELINE}
    events.apply_cc(**_spec(enabled=False))
    assert events.reconcile_ok() == ["events", "ks-config"]
    assert events.leftovers("events") == set()
    assert set(events.module_objects().get("events", {})) == CRDS
    assert webhooks(api) == {}
    assert all(custom(api, *ref) is None for ref in CUSTOM | {RULER})
    status = events.status()
    assert "events" not in status and status["modules"]["events"]["phase"] == "Uninstalled"
    assert events.module_objects()["fluentbit"] == fluentbit and events.module_objects()["logging"] == logging
    assert {ref: version_of(api, ref) for ref in PIPELINE} == pipeline

    # The user deletes the namespace by hand (as KubeSphere's docs told), then enables events again: fluentbit's
    # operator and pipeline, which events builds on, are found missing and re-applied first; events is back, the
    # ruler too.
    delete_namespace(api, NS)
    events.apply_cc(**_spec())
    proc = events.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    ran = events.ran(proc)
    assert {"events", "fluentbit"} <= set(ran), ran
    assert "Drift in fluentbit, which events build on: " in proc.stderr
    spans = {m["module"]: m for m in timeline.load(events.results)["modules"]}
    assert dt.datetime.fromisoformat(spans["fluentbit"]["end"]) <= dt.datetime.fromisoformat(spans["events"]["start"])
    assert client.AppsV1Api(api).read_namespaced_deployment("fluentbit-operator", NS).status.available_replicas
    assert all(custom(api, *ref) is not None for ref in PIPELINE)
    assert_installed(events)
    assert events.status()["events"]["ruler"]["status"] == "enabled"
