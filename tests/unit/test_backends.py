"""Which Services an apply waits for before it writes a webhook configuration or an APIService."""

from __future__ import annotations

from installer.objects.readiness import backends


def test_the_services_a_webhook_configuration_calls_once_each() -> None:
    hook = {"kind": "MutatingWebhookConfiguration", "webhooks": [
        {"clientConfig": {"service": {"namespace": "istio-system", "name": "istiod"}}},
        {"clientConfig": {"service": {"namespace": "istio-system", "name": "istiod"}}},
        {"clientConfig": {"url": "https://hooks.example.com/validate"}},  # no Service: nothing to wait for
        {"clientConfig": {"service": {"namespace": "kubesphere-system", "name": "ks-controller-manager"}}}]}
    assert backends(hook) == [("istio-system", "istiod"), ("kubesphere-system", "ks-controller-manager")]


def test_the_service_an_apiservice_calls_and_none_for_a_local_one() -> None:
    metrics = {"kind": "APIService", "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}}}
    local = {"kind": "APIService", "spec": {"service": None, "group": "apps"}}
    assert backends(metrics) == [("kube-system", "metrics-server")]
    assert backends(local) == [] and backends({"kind": "ValidatingWebhookConfiguration"}) == []
