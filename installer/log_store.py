"""The log store logging, events and auditing ship to: the fluent-bit Output each of them applies.

Upstream wrote the same Output three times (``custom-output-{opensearch,elasticsearch}-<module>.yaml.j2``);
here one function builds it, exposed to the roles as the ``ks_log_output`` filter (kubesphere-defaults). It
imports nothing of the engine: every role loads it.
"""

from __future__ import annotations

from typing import Any

INTERNAL_HOSTS = {"opensearch": "opensearch-cluster-data.kubesphere-logging-system.svc",
                  "es": "elasticsearch-logging-data.kubesphere-logging-system.svc"}
#: The basic-auth Secrets the opensearch module keeps from ``common.{opensearch,es}.basicAuth``.
CREDENTIALS = {"opensearch": "opensearch-credentials", "es": "elasticsearch-credentials"}
DEFAULT_PORT = 9200


def store_kind(common: dict[str, Any]) -> str:
    """The store every writer (fluent-bit's Outputs, Jaeger) and reader (ks-apiserver's kubesphere.yaml) uses, by
    v3.4.1's kubesphere.yaml precedence: an external Elasticsearch host, an external OpenSearch host, the
    Elasticsearch path (``common.es.enabled``), else the internal OpenSearch. ``es`` or ``opensearch``."""
    es, opensearch = common.get("es") or {}, common.get("opensearch") or {}
    if es.get("externalElasticsearchHost"):
        return "es"
    if opensearch.get("externalOpensearchHost"):
        return "opensearch"
    return "es" if es.get("enabled") is True else "opensearch"


def external_store(common: dict[str, Any]) -> bool:
    """The chosen store is the user's own (an external host), not one the opensearch module runs."""
    kind = store_kind(common)
    key = "externalElasticsearchHost" if kind == "es" else "externalOpensearchHost"
    return bool((common.get(kind) or {}).get(key))


def store_choice(common: dict[str, Any]) -> dict[str, Any]:
    """What kubesphere.yaml's logging, events and auditing sections say of the store: ``host`` (a URL), ``auth``
    (its basicAuth section), ``prefix`` (``ks-<prefix>``) and ``log`` (the logging index suffix)."""
    kind = store_kind(common)
    store = common.get(kind) or {}
    external, default_protocol = ("externalElasticsearch", "http") if kind == "es" else ("externalOpensearch", "https")
    host = store.get(f"{external}Host")
    protocol = store.get(f"{external}Protocol") or default_protocol
    port = store.get(f"{external}Port") or DEFAULT_PORT
    if not host:
        host, protocol, port = INTERNAL_HOSTS[kind], default_protocol, DEFAULT_PORT
    prefix, log = (store.get("elkPrefix") or "logstash", "log") if kind == "es" else (
        store.get("opensearchPrefix") or "whizard", "logging")
    return {"host": f"{protocol}://{host}:{port}", "auth": store.get("basicAuth") or {}, "prefix": f"ks-{prefix}",
            "log": log}


def _secret_ref(name: str, key: str) -> dict[str, Any]:
    return {"valueFrom": {"secretKeyRef": {"name": name, "key": key}}}


def log_output(common: dict[str, Any], suffix: str, logging_suffix: str | None = None) -> dict[str, Any]:
    """The Output's store section (``{"opensearch": {...}}`` or ``{"es": {...}}``) for indices
    ``ks-<prefix>-<suffix>``; ``logging_suffix`` replaces the suffix on Elasticsearch (logging wrote ``-log``
    there). Credentials are references to the opensearch module's Secret, never values."""
    kind = store_kind(common)
    store = common.get(kind) or {}
    external = "externalOpensearch" if kind == "opensearch" else "externalElasticsearch"
    host = store.get(f"{external}Host") or INTERNAL_HOSTS[kind]
    port = store.get(f"{external}Port") or DEFAULT_PORT
    prefix = store.get("opensearchPrefix" if kind == "opensearch" else "elkPrefix") or (
        "whizard" if kind == "opensearch" else "logstash")
    index = logging_suffix if (kind == "es" and logging_suffix) else suffix
    section: dict[str, Any] = {"host": str(host), "port": int(port), "logstashFormat": True,
                               "logstashPrefix": f"ks-{prefix}-{index}", "timeKey": "@timestamp"}
    auth = store.get("basicAuth") or {}
    if auth.get("enabled") is True and auth.get("username") and auth.get("password"):
        section["httpUser"] = _secret_ref(CREDENTIALS[kind], "username")
        section["httpPassword"] = _secret_ref(CREDENTIALS[kind], "password")
    if kind == "opensearch":
        section["suppressTypeName"] = True
        section["tls"] = {"verify": False}
    else:
        section["generateID"] = True
        # Upstream's events/auditing Outputs turned TLS on for any Elasticsearch, which breaks a plain-HTTP one.
        if store.get("externalElasticsearchProtocol") == "https":
            section["tls"] = {"verify": False}
    return {kind: section}


def output_name(common: dict[str, Any], suffix: str = "") -> str:
    """Upstream's Output names: ``opensearch``/``es`` for logging, ``opensearch-<suffix>``/``es-<suffix>``."""
    kind = store_kind(common)
    return f"{kind}-{suffix}" if suffix else kind
