"""The simulated cluster answers admission webhooks at their pods' IPs, with the certificate the pod mounts."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_objects import eventually
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from simcluster import SimCluster

from installer.objects.certs import dns_names, generate

pytestmark = pytest.mark.cluster
SELECTOR = "sim-webhooks.test/target"
ADMISSION = "admissionregistration.k8s.io/v1"



def responder_log(cluster: SimCluster) -> str:
    return (cluster.logs / "sim-webhooks.log").read_text(errors="replace")


@pytest.fixture
def target(kube_api: client.ApiClient, namespace: str) -> Iterator[str]:
    """A second namespace, labelled so that only this test's webhooks select it."""
    core = client.CoreV1Api(kube_api)
    name = f"{namespace}-t"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={SELECTOR: namespace})))
    yield name
    core.delete_namespace(name)


def webhook(name: str, namespace: str, service: str, path: str, ca: bytes | None, policy: str,
            selected: str) -> dict[str, Any]:
    """A webhook on Pod creation in the namespaces labelled for ``selected``."""
    config: dict[str, Any] = {"service": {"namespace": namespace, "name": service, "path": path, "port": 443}}
    if ca is not None:
        config["caBundle"] = base64.b64encode(ca).decode()
    return {"name": name, "clientConfig": config, "failurePolicy": policy, "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 5,
            "namespaceSelector": {"matchLabels": {SELECTOR: selected}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "example.invalid/app:1"}], **spec}}


def try_create_pod(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    """Create a Pod; None when admitted, else the API server's message."""
    try:
        core.create_namespaced_pod(namespace, pod(name))
    except ApiException as exc:
        return str(exc.body)
    return None


def admitted_with_call(cluster: SimCluster, core: client.CoreV1Api, namespace: str, call: str) -> bool:
    """Create a Pod; whether it was admitted after a call the responder logged as ``<call> CREATE pods ns/name``
    (the API server may not know a new webhook configuration yet: then the Pod is admitted without a call)."""
    name = f"p{time.monotonic_ns()}"
    return try_create_pod(core, namespace, name) is None and \
        f"{call} CREATE pods {namespace}/{name} " in responder_log(cluster)


def endpoint_ip(kube_api: client.ApiClient, namespace: str, service: str) -> str:
    """The first ready endpoint address of a Service (raw JSON: the client's model rejects a slice without
    endpoints)."""
    def ready() -> str | None:
        resp = kube_api.call_api(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", "GET",
                                 query_params=[("labelSelector", f"kubernetes.io/service-name={service}")],
                                 auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True)
        for eps in json.loads(resp.data)["items"]:
            for endpoint in eps.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") and endpoint.get("addresses"):
                    return str(endpoint["addresses"][0])
        return None
    return eventually(ready, what=f"an endpoint of Service {namespace}/{service}")


def test_webhook_served_with_the_mounted_certificate(sim_cluster: SimCluster, kube_api: client.ApiClient,
                                                     namespace: str, target: str) -> None:
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    admission = client.AdmissionregistrationV1Api(kube_api)
    pki = generate(dns_names("hook", namespace))
    core.create_namespaced_secret(namespace, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook-cert"}, "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in pki.items()}})
    labels = {"app": "hook"}
    template = pod("hook", volumes=[{"name": "certs", "secret": {"secretName": "hook-cert"}}])
    template["spec"]["containers"][0] |= {"ports": [{"containerPort": 8443}],
                                          "volumeMounts": [{"name": "certs", "mountPath": "/certs"}]}
    apps.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hook"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": template["spec"]}}})
    core.create_namespaced_service(namespace, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook"},
        "spec": {"selector": labels, "ports": [{"port": 443, "targetPort": 8443}]}})
    ip = endpoint_ip(kube_api, namespace, "hook")
    name = f"sim-webhooks-{namespace}"
    hook = webhook(f"pods.{namespace}.sim-webhooks.test", namespace, "hook", "/mutate", pki["ca.crt"], "Fail",
                   namespace)
    admission.create_mutating_webhook_configuration(
        {"apiVersion": ADMISSION, "kind": "MutatingWebhookConfiguration", "metadata": {"name": name},
         "webhooks": [hook]})
    try:
        eventually(lambda: f"listen {ip}:8443: hook.{namespace}.svc" in responder_log(sim_cluster), what="listener")
        eventually(lambda: admitted_with_call(sim_cluster, core, target, f"hook.{namespace}.svc/mutate"),
                   what="a Pod admitted through the webhook")

        wrong = generate(dns_names("hook", namespace))["ca.crt"]
        admission.patch_mutating_webhook_configuration(
            name, [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle",
                    "value": base64.b64encode(wrong).decode()}])
        refused = eventually(lambda: try_create_pod(core, target, f"q{time.monotonic_ns()}"), what="refusal")
        assert "failed calling webhook" in refused and "certificate signed by unknown authority" in refused, refused
    finally:
        admission.delete_mutating_webhook_configuration(name)
    after = f"r{uuid.uuid4().hex[:8]}"
    eventually(lambda: try_create_pod(core, target, f"{after}-{time.monotonic_ns()}") is None, what="no webhook")
    eventually(lambda: f"stop {ip}:8443" in responder_log(sim_cluster), what="listener stopped")
    # no call of this test's webhook for the Pod created after it went (another module's webhook may still see it)
    assert not [line for line in responder_log(sim_cluster).splitlines()
                if after in line and f"hook.{namespace}.svc" in line]


def test_istiod_makes_its_ca_and_patches_its_webhooks(sim_cluster: SimCluster, kube_api: client.ApiClient,
                                                      namespace: str, target: str) -> None:
    """istiod's runtime steps: its CA Secret, the injector's caBundle, the validator's caBundle and failurePolicy."""
    core = client.CoreV1Api(kube_api)
    admission = client.AdmissionregistrationV1Api(kube_api)
    rev = f"t{uuid.uuid4().hex[:6]}"
    istiod = pod("istiod")
    istiod["metadata"]["labels"] = {"app": "istiod", "istio.io/rev": rev}
    istiod["spec"]["containers"][0] |= {"image": "docker.io/istio/pilot:1.14.6", "args": ["discovery"],
                                        "env": [{"name": "REVISION", "value": rev}]}
    core.create_namespaced_pod(namespace, istiod)
    core.create_namespaced_service(namespace, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": f"istiod-{rev}"},
        "spec": {"selector": {"app": "istiod"}, "ports": [{"port": 443, "targetPort": 15017}]}})
    labels = {"istio.io/rev": rev, "app": "istiod"}
    injector = webhook("rev.object.sidecar-injector.istio.io", namespace, f"istiod-{rev}", "/inject", None, "Fail",
                       namespace)
    validator = webhook("rev.validation.istio.io", namespace, f"istiod-{rev}", "/validate", None, "Ignore", "none")
    validator |= {"rules": [{"apiGroups": ["networking.istio.io"], "apiVersions": ["*"],
                             "operations": ["CREATE", "UPDATE"], "resources": ["*"]}],
                  "namespaceSelector": {}, "objectSelector": {"matchLabels": {"istio.io/rev": rev}}}
    names = f"istio-sidecar-injector-{rev}", f"istio-validator-{rev}"
    admission.create_mutating_webhook_configuration({
        "apiVersion": ADMISSION, "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": names[0], "labels": labels}, "webhooks": [injector]})
    admission.create_validating_webhook_configuration({
        "apiVersion": ADMISSION, "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": names[1], "labels": labels}, "webhooks": [validator]})
    try:
        secret = eventually(lambda: next(iter(core.list_namespaced_secret(
            namespace, field_selector="metadata.name=istio-ca-secret").items), None), what="istio-ca-secret")
        assert secret.type == "istio.io/ca-root"
        root = secret.data["ca-cert.pem"]

        def patched() -> bool:
            mutating = admission.read_mutating_webhook_configuration(names[0]).webhooks[0]
            validating = admission.read_validating_webhook_configuration(names[1]).webhooks[0]
            return (mutating.client_config.ca_bundle == root == validating.client_config.ca_bundle
                    and validating.failure_policy == "Fail")
        eventually(patched, what="caBundles and the validator's failurePolicy")
        eventually(lambda: admitted_with_call(sim_cluster, core, target, f"istiod-{rev}.{namespace}.svc/inject"),
                   what="a Pod admitted through the injector")
    finally:
        admission.delete_mutating_webhook_configuration(names[0])
        admission.delete_validating_webhook_configuration(names[1])
