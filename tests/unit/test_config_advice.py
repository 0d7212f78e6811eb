"""Warnings for valid specs that do not do what a user likely expects."""

from __future__ import annotations

from installer.config import prepare
from installer.modules import switch_paths


def warnings_of(spec: dict) -> list[str]:
    prepared = prepare(spec, None, switch_paths())
    assert not prepared.errors
    return prepared.warnings


def test_edge_runtime_needs_both_switches() -> None:
    (warning,) = warnings_of({"edgeruntime": {"enabled": True}})
    assert "edgeruntime.kubeedge.enabled" in warning and "not installed" in warning
    assert warnings_of({"edgeruntime": {"enabled": True, "kubeedge": {"enabled": True}}}) == []
    assert warnings_of({"edgeruntime": {"enabled": False}}) == []


def test_log_store_warning_names_every_consumer_that_is_on() -> None:
    no_store = {"common": {"opensearch": {"enabled": False}}}
    (warning,) = warnings_of({**no_store, "logging": {"enabled": True}, "servicemesh": {"enabled": True}})
    assert warning.startswith("logging, servicemesh need a log store")
    (warning,) = warnings_of({**no_store, "events": {"enabled": True}})
    assert warning.startswith("events needs a log store")
    assert warnings_of({"logging": {"enabled": True}}) == []  # the default OpenSearch stores it


def test_elasticsearch_warning_reads_the_store_the_run_uses() -> None:
    es = {"common": {"es": {"enabled": True}}, "logging": {"enabled": True}}
    (warning,) = warnings_of(es)  # a fresh cc on the ES path: v3.4 ships no Elasticsearch
    assert warning.startswith("logging writes to Elasticsearch") and "nothing stores their data" in warning
    # A 3.3.x installation's Elasticsearch, named by status.es: it stores the logs, whether the cc says
    # common.es.enabled or names no store at all (the status decides, as upstream's upgrade did).
    running = {"es": {"status": "enabled", "enabledTime": "2023-01-01T00:00:00CST"}}
    assert prepare(es, None, switch_paths(), status=running).warnings == []
    legacy = {"common": {"es": {"elkPrefix": "logstash"}}, "logging": {"enabled": True}}
    prepared = prepare(legacy, None, switch_paths(), status=running)
    assert prepared.spec["common"]["es"]["enabled"] is True and prepared.warnings == []
    # An external Elasticsearch, or an external OpenSearch that takes precedence: no warning.
    external = {"common": {"es": {"enabled": True, "externalElasticsearchHost": "es.example.com"}},
                "logging": {"enabled": True}}
    assert warnings_of(external) == []
    opensearch = {"common": {"es": {"enabled": True}, "opensearch": {"externalOpensearchHost": "os.example.com"}},
                  "logging": {"enabled": True}}
    assert warnings_of(opensearch) == []
    # A status.es that is not enabled names no Elasticsearch.
    failed = {"es": {"status": "failed"}}
    assert len(prepare(es, None, switch_paths(), status=failed).warnings) == 1
