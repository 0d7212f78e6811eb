"""The fluent-bit Output that logging, events and auditing share (installer.log_store, filter ks_log_output)."""

from __future__ import annotations

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
