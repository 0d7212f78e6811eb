"""The fluent-bit Output that logging, events and auditing share (installer.log_store, filter ks_log_output)."""

from __future__ import annotations

import pytest
from role_harness import filter_plugins

from installer.config.defaults import apply_defaults

FILTERS = filter_plugins("kubesphere-defaults", "ks_log_store").FilterModule().filters()


class f:
    ks_log_output = staticmethod(FILTERS["ks_log_output"])
    ks_log_output_name = staticmethod(FILTERS["ks_log_output_name"])


def common(**changes: object) -> dict:
    return apply_defaults({"common": changes})["common"]


def test_internal_opensearch_with_the_default_credentials_secret() -> None:
    out = f.ks_log_output(common(), "events")
    assert out == {"opensearch": {
        "host": "opensearch-cluster-data.kubesphere-logging-system.svc", "port": 9200, "logstashFormat": True,
        "logstashPrefix": "ks-whizard-events", "timeKey": "@timestamp", "suppressTypeName": True,
        "tls": {"verify": False},
        "httpUser": {"valueFrom": {"secretKeyRef": {"name": "opensearch-credentials", "key": "username"}}},
        "httpPassword": {"valueFrom": {"secretKeyRef": {"name": "opensearch-credentials", "key": "password"}}}}}
    assert f.ks_log_output_name(common(), "events") == "opensearch-events"
    assert f.ks_log_output_name(common()) == "opensearch"


def test_external_opensearch_without_auth() -> None:
    spec = common(opensearch={"externalOpensearchHost": "os.example", "externalOpensearchPort": 9201,
                              "opensearchPrefix": "prod", "basicAuth": {"enabled": False}})
    section = f.ks_log_output(spec, "logging", "log")["opensearch"]
    assert (section["host"], section["port"], section["logstashPrefix"]) == ("os.example", 9201, "ks-prod-logging")
    assert "httpUser" not in section and "httpPassword" not in section


def test_elasticsearch_writes_log_indices_for_logging_and_tls_only_over_https() -> None:
    spec = common(es={"enabled": True, "externalElasticsearchHost": "es.example", "elkPrefix": "team"})
    assert f.ks_log_output_name(spec, "auditing") == "es-auditing"
    section = f.ks_log_output(spec, "logging", "log")["es"]
    assert (section["host"], section["logstashPrefix"], section["generateID"]) == ("es.example", "ks-team-log", True)
    assert "tls" not in section and "httpUser" not in section
    https = common(es={"enabled": True, "externalElasticsearchHost": "es.example",
                       "externalElasticsearchProtocol": "https",
                       "basicAuth": {"enabled": True, "username": "u", "password": "canary-pw"}})
    section = f.ks_log_output(https, "events")["es"]
    assert section["tls"] == {"verify": False} and section["logstashPrefix"] == "ks-logstash-events"
    assert section["httpPassword"]["valueFrom"]["secretKeyRef"]["name"] == "elasticsearch-credentials"
    assert "canary-pw" not in str(section)


# (common changes) -> (store kind, external, the URL kubesphere.yaml gives ks-apiserver), by v3.4.1's kubesphere.yaml
# precedence: external Elasticsearch host, external OpenSearch host, common.es.enabled, the internal OpenSearch.
CHOICES = [
    ({}, ("opensearch", False, "https://opensearch-cluster-data.kubesphere-logging-system.svc:9200")),
    ({"es": {"enabled": True}}, ("es", False, "http://elasticsearch-logging-data.kubesphere-logging-system.svc:9200")),
    ({"opensearch": {"externalOpensearchHost": "os.example", "externalOpensearchPort": 9201}},
     ("opensearch", True, "https://os.example:9201")),
    # An external Elasticsearch without es.enabled: the console reads it, so fluent-bit writes there too (the
    # Outputs once followed es.enabled alone and wrote to the internal OpenSearch, which nothing read).
    ({"es": {"enabled": False, "externalElasticsearchHost": "es.example", "externalElasticsearchPort": 9200}},
     ("es", True, "http://es.example:9200")),
    ({"es": {"enabled": True}, "opensearch": {"externalOpensearchHost": "os.example"}},
     ("opensearch", True, "https://os.example:9200")),
]


@pytest.mark.parametrize("changes, expected", CHOICES)
def test_writers_readers_and_the_registry_choose_the_same_store(changes: dict, expected: tuple) -> None:
    from installer.log_store import external_store, store_choice, store_kind
    from installer.modules import internal_es_curator, internal_opensearch

    kind, external, url = expected
    spec = apply_defaults({"common": changes})
    cm = spec["common"]
    assert (store_kind(cm), external_store(cm), store_choice(cm)["host"]) == expected
    output = f.ks_log_output(cm, "events")
    assert list(output) == [kind]  # fluent-bit's Output: the same store, at the host the console reads
    assert url.split("://")[1] == f"{output[kind]['host']}:{output[kind]['port']}"
    assert internal_opensearch(spec) == (kind == "opensearch" and not external)  # what the opensearch module runs
    assert internal_es_curator(spec) == (kind == "es" and not external)
