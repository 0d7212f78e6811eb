"""Every legacy-key migration: input -> output + description, input never mutated."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from installer.config import default_spec, prepare
from installer.config.migrate import MIGRATIONS, Move, migrate, migrate_notes

ISTIO = {"components": {"ingressGateways": [{"name": "istio-ingressgateway", "enabled": False}],
                        "cni": {"enabled": False}}}

# (input spec, expected migrated spec, expected descriptions). ``terminal`` is present in every input
# unless the case is about it, so that only the migration under test fires.
T = {"terminal": {"timeout": 600}}
CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    ("mysql volume", {**T, "common": {"mysqlVolumeSize": "20Gi"}}, {**T, "common": {}},
     ["removed common.mysqlVolumeSize (MySQL is no longer installed)"]),
    ("etcd volume", {**T, "common": {"etcdVolumeSize": "20Gi"}}, {**T, "common": {}},
     ["removed common.etcdVolumeSize (the built-in etcd is no longer installed)"]),
    ("redis volume", {**T, "common": {"redisVolumSize": "5Gi", "redis": {"enabled": True}}},
     {**T, "common": {"redis": {"enabled": True, "volumeSize": "5Gi"}}},
     ["moved common.redisVolumSize -> common.redis.volumeSize"]),
    ("openldap volume", {**T, "common": {"openldapVolumeSize": "3Gi"}},
     {**T, "common": {"openldap": {"volumeSize": "3Gi"}}},
     ["moved common.openldapVolumeSize -> common.openldap.volumeSize"]),
    ("minio volume", {**T, "common": {"minioVolumeSize": "30Gi", "minio": {}}},
     {**T, "common": {"minio": {"volumeSize": "30Gi"}}},
     ["moved common.minioVolumeSize -> common.minio.volumeSize"]),
    ("es master replicas", {**T, "common": {"es": {"elasticsearchMasterReplicas": 3}}},
     {**T, "common": {"es": {"master": {"replicas": 3}}}},
     ["moved common.es.elasticsearchMasterReplicas -> common.es.master.replicas"]),
    ("es data replicas", {**T, "common": {"es": {"elasticsearchDataReplicas": 2}}},
     {**T, "common": {"es": {"data": {"replicas": 2}}}},
     ["moved common.es.elasticsearchDataReplicas -> common.es.data.replicas"]),
    ("es master volume", {**T, "common": {"es": {"elasticsearchMasterVolumeSize": "8Gi"}}},
     {**T, "common": {"es": {"master": {"volumeSize": "8Gi"}}}},
     ["moved common.es.elasticsearchMasterVolumeSize -> common.es.master.volumeSize"]),
    ("es data volume", {**T, "common": {"es": {"elasticsearchDataVolumeSize": "40Gi"}}},
     {**T, "common": {"es": {"data": {"volumeSize": "40Gi"}}}},
     ["moved common.es.elasticsearchDataVolumeSize -> common.es.data.volumeSize"]),
    ("es url", {**T, "common": {"es": {"externalElasticsearchUrl": "es.local", "externalElasticsearchHost": ""}}},
     {**T, "common": {"es": {"externalElasticsearchHost": "es.local"}}},
     ["moved common.es.externalElasticsearchUrl -> common.es.externalElasticsearchHost"]),
    ("opensearch master replicas (upstream KeyError)", {**T, "common": {"opensearch": {"opensearchMasterReplicas": 3}}},
     {**T, "common": {"opensearch": {"master": {"replicas": 3}}}},
     ["moved common.opensearch.opensearchMasterReplicas -> common.opensearch.master.replicas"]),
    ("opensearch data replicas", {**T, "common": {"opensearch": {"opensearchDataReplicas": 2}}},
     {**T, "common": {"opensearch": {"data": {"replicas": 2}}}},
     ["moved common.opensearch.opensearchDataReplicas -> common.opensearch.data.replicas"]),
    ("opensearch master volume", {**T, "common": {"opensearch": {"opensearchMasterVolumeSize": "8Gi"}}},
     {**T, "common": {"opensearch": {"master": {"volumeSize": "8Gi"}}}},
     ["moved common.opensearch.opensearchMasterVolumeSize -> common.opensearch.master.volumeSize"]),
    ("opensearch data volume", {**T, "common": {"opensearch": {"opensearchDataVolumeSize": "40Gi"}}},
     {**T, "common": {"opensearch": {"data": {"volumeSize": "40Gi"}}}},
     ["moved common.opensearch.opensearchDataVolumeSize -> common.opensearch.data.volumeSize"]),
    ("opensearch url", {**T, "common": {"opensearch": {"externalOpensearchUrl": "os.local"}}},
     {**T, "common": {"opensearch": {"externalOpensearchHost": "os.local"}}},
     ["moved common.opensearch.externalOpensearchUrl -> common.opensearch.externalOpensearchHost"]),
    ("console", {**T, "console": {"enableMultiLogin": False, "port": 30881}},
     {**T, "common": {"core": {"console": {"enableMultiLogin": False, "port": 30881}}}},
     ["moved console -> common.core.console"]),
    ("logsidecar", {**T, "logging": {"enabled": True, "logsidecarReplicas": 3}},
     {**T, "logging": {"enabled": True, "logsidecar": {"enabled": True, "replicas": 3}}},
     ["moved logging.logsidecarReplicas -> logging.logsidecar.replicas"]),
    ("events ruler", {**T, "events": {"enabled": True}},
     {**T, "events": {"enabled": True, "ruler": {"enabled": True, "replicas": 2}}},
     ["added events.ruler (enabled: true, replicas: 2)"]),
    ("notification", {**T, "notification": {"enabled": True}}, {**T},
     ["removed notification (notification-manager settings moved out of the spec in v3.1)"]),
    ("openpitrix", {**T, "openpitrix": {"enabled": True}}, {**T, "openpitrix": {"store": {"enabled": True}}},
     ["moved openpitrix.enabled -> openpitrix.store.enabled"]),
    ("networkpolicy", {**T, "networkpolicy": {"enabled": True}},
     {**T, "network": {"networkpolicy": {"enabled": True}, "ippool": {"type": "none"}, "topology": {"type": "none"}}},
     ["moved networkpolicy -> network.networkpolicy"]),
    ("terminal", {"alerting": {"enabled": False}}, {"alerting": {"enabled": False}, **T},
     ["added terminal (timeout: 600)"]),
    ("servicemesh istio", {**T, "servicemesh": {"enabled": True}},
     {**T, "servicemesh": {"enabled": True, "istio": ISTIO}},
     ["added servicemesh.istio (default components)"]),
    ("kubeedge", {**T, "kubeedge": {"enabled": True, "cloudCore": {"service": {"cloudhubNodePort": "30000"}},
                                    "edgeWatcher": {"nodeSelector": {}}}},
     {**T, "edgeruntime": {"enabled": True, "kubeedge": {
         "enabled": True, "cloudCore": {"service": {"cloudhubNodePort": "30000"}},
         "iptables-manager": {"enabled": True, "mode": "external"}}}},
     ["moved kubeedge -> edgeruntime.kubeedge",
      "removed kubeedge.edgeWatcher (the edge watcher is no longer installed)"]),
    ("jenkins cpu", {**T, "devops": {"enabled": True}},
     {**T, "devops": {"enabled": True, "jenkinsCpuReq": 0.5, "jenkinsCpuLim": 1}},
     ["added devops.jenkinsCpuReq: 0.5", "added devops.jenkinsCpuLim: 1"]),
]


@pytest.mark.parametrize("name, before, after, described", CASES, ids=[c[0] for c in CASES])
def test_migration(name: str, before: dict[str, Any], after: dict[str, Any], described: list[str]) -> None:
    original = copy.deepcopy(before)
    out, done = migrate(before)
    assert before == original, "migrate must not mutate its input"
    assert out == after
    assert done == described
    again, more = migrate(out)
    assert again == out and more == [], "migrations are idempotent"


def test_every_migration_has_a_case() -> None:
    covered = {step.__name__ for _, before, _, _ in CASES for step in MIGRATIONS if step(copy.deepcopy(before))}
    assert covered == {step.__name__ for step in MIGRATIONS}
    assert len(MIGRATIONS) == 26


def test_default_spec_needs_no_migration() -> None:
    spec = default_spec()
    assert migrate(spec) == (spec, [])


def test_current_shape_wins_over_legacy_spelling() -> None:
    out, done = migrate({**T, "common": {"redisVolumSize": "9Gi", "redis": {"volumeSize": "3Gi"}},
                         "console": {"port": 30999, "type": "NodePort"},
                         "kubeedge": {"enabled": True}, "edgeruntime": {"enabled": False},
                         "networkpolicy": {"enabled": True}, "network": {"networkpolicy": {"enabled": False}}})
    assert out["common"]["redis"] == {"volumeSize": "3Gi"}
    assert out["edgeruntime"] == {"enabled": False} and "kubeedge" not in out
    assert out["network"]["networkpolicy"] == {"enabled": False} and "networkpolicy" not in out
    assert "dropped legacy common.redisVolumSize (common.redis.volumeSize is already set)" in done
    assert "dropped legacy kubeedge (edgeruntime is already set)" in done


def test_console_merges_under_existing_core_console() -> None:
    out, done = migrate({**T, "console": {"port": 30999, "enableMultiLogin": False},
                         "common": {"core": {"console": {"port": 30880}}}})
    assert out["common"]["core"]["console"] == {"port": 30880, "enableMultiLogin": False}
    assert done == ["dropped legacy console.port (common.core.console.port is already set)",
                    "moved console.enableMultiLogin -> common.core.console.enableMultiLogin"]


@pytest.mark.parametrize("spec, kept, note", [
    ({"logging": {"logsidecarReplicas": 5, "logsidecar": {"replicas": 2}}},
     {"logging": {"enabled": False, "logsidecar": {"replicas": 2}}},
     "dropped legacy logging.logsidecarReplicas (logging.logsidecar.replicas is already set)"),
    ({"networkpolicy": {"enabled": True}, "network": {"networkpolicy": {"enabled": False}}},
     {"network": {"networkpolicy": {"enabled": False}, "ippool": {"type": "none"}, "topology": {"type": "none"}}},
     "dropped legacy networkpolicy (network.networkpolicy is already set)"),
    ({"console": {"port": 30999}, "common": {"core": {"console": "x"}}}, {"common": {"core": {"console": "x"}}},
     "dropped legacy console (common.core.console is already set)"),
], ids=["logsidecar", "networkpolicy", "console"])
def test_a_legacy_value_that_gives_way_is_reported_dropped(spec: dict[str, Any], kept: dict[str, Any],
                                                           note: str) -> None:
    assert migrate({**T, **spec}) == ({**T, **kept}, [note])


def test_logsidecar_replicas_fill_an_existing_logsidecar_without_them() -> None:
    out, done = migrate({**T, "logging": {"enabled": True, "logsidecarReplicas": 3, "logsidecar": {"enabled": False}}})
    assert out["logging"]["logsidecar"] == {"enabled": False, "replicas": 3}
    assert done == ["moved logging.logsidecarReplicas -> logging.logsidecar.replicas"]


def test_notes_are_records_and_their_text() -> None:
    _, notes = migrate_notes({**T, "common": {"redisVolumSize": "9Gi", "redis": {"volumeSize": "3Gi"}},
                              "kubeedge": {}, "edgeruntime": {}, "events": {}})
    redis, ruler, kubeedge = notes
    assert isinstance(redis, Move) and (redis.src, redis.dst, redis.kind) == (
        "common.redisVolumSize", "common.redis.volumeSize", "dropped")
    assert ruler == "added events.ruler (enabled: true, replicas: 2)"
    assert isinstance(kubeedge, Move) and kubeedge.dst == "edgeruntime.kubeedge"
    assert str(kubeedge) == "dropped legacy kubeedge (edgeruntime is already set)"


def test_a_dropped_value_is_validated_where_written_and_the_kept_one_as_itself() -> None:
    spec = {**T, "logging": {"logsidecarReplicas": "x", "logsidecar": {"replicas": 2}}}
    prepared = prepare(spec)
    assert prepared.migrations == [
        "dropped legacy logging.logsidecarReplicas (logging.logsidecar.replicas is already set)"]
    assert [str(e) for e in prepared.errors] == [
        'logging.logsidecarReplicas (dropped: logging.logsidecar.replicas is already set): must be a replica count '
        '(integer 0-100); got string "x"']
    spec = {**T, "logging": {"logsidecarReplicas": 5, "logsidecar": {"replicas": "y"}}}
    assert [str(e) for e in prepare(spec).errors] == [
        'logging.logsidecar.replicas: must be a replica count (integer 0-100); got string "y"']
    spec = {**T, "console": {"port": "abc", "type": "NodePort"}, "common": {"core": {"console": {"port": 30880}}}}
    assert [str(e) for e in prepare(spec).errors] == [
        'console.port (dropped: common.core.console.port is already set): must be a NodePort (integer 30000-32767); '
        'got string "abc"']


def test_no_status_driven_rewrites() -> None:
    """Upstream rebuilt common.redis/openldap from status and flipped es/opensearch: never here."""
    spec = {**T, "common": {"redis": {"enabled": True, "enableHA": True, "volumeSize": "4Gi"},
                            "openldap": {"enabled": True, "volumeSize": "3Gi"},
                            "es": {"enabled": True}, "opensearch": {"enabled": False}}}
    assert migrate(spec) == (spec, [])


def test_missing_es_and_opensearch_are_fine() -> None:
    out, done = migrate({**T, "common": {"redisVolumSize": "2Gi"}})
    assert out == {**T, "common": {"redis": {"volumeSize": "2Gi"}}} and len(done) == 1


def test_devops_defaults_only_when_enabled() -> None:
    assert migrate({**T, "devops": {"enabled": False}})[1] == []
    assert migrate({**T, "devops": {"enabled": True, "jenkinsCpuReq": "1", "jenkinsCpuLim": 2}})[1] == []


def test_logsidecar_without_enabled_defaults_to_disabled() -> None:
    out, _ = migrate({**T, "logging": {"logsidecarReplicas": "x"}})
    assert out["logging"] == {"enabled": False, "logsidecar": {"enabled": False, "replicas": "x"}}
    assert [str(e) for e in prepare({**T, "logging": {"logsidecarReplicas": "x"}}).errors] == [
        'logging.logsidecarReplicas (moved to logging.logsidecar.replicas): must be a replica count (integer 0-100); '
        'got string "x"']


@pytest.mark.parametrize("garbage", [
    {"common": "x"}, {"common": {"es": 1, "opensearch": None, "redisVolumSize": "1Gi", "redis": "on"}},
    {"console": "x", "common": {"core": 5}}, {"kubeedge": "on"}, {"networkpolicy": True, "network": []},
    {"logging": [], "events": "x", "openpitrix": 1, "servicemesh": None, "devops": "on"},
])
def test_odd_shapes_never_raise(garbage: dict[str, Any]) -> None:
    original = copy.deepcopy(garbage)
    migrate(garbage)
    assert garbage == original
    assert prepare(garbage).errors  # reported by validation instead


def test_full_legacy_v3_0_spec_migrates_to_a_valid_spec() -> None:
    legacy = {
        "persistence": {"storageClass": ""},
        "authentication": {"jwtSecret": ""},
        "console": {"enableMultiLogin": False, "port": 30880},
        "common": {"mysqlVolumeSize": "20Gi", "minioVolumeSize": "20Gi", "etcdVolumeSize": "20Gi",
                   "openldapVolumeSize": "2Gi", "redisVolumSize": "2Gi",
                   "es": {"elasticsearchMasterReplicas": 1, "elasticsearchDataReplicas": 1,
                          "elasticsearchMasterVolumeSize": "4Gi", "elasticsearchDataVolumeSize": "20Gi",
                          "logMaxAge": 7, "elkPrefix": "logstash"}},
        "logging": {"enabled": True, "logsidecarReplicas": 2, "containerruntime": "docker"},
        "notification": {"enabled": True}, "openpitrix": {"enabled": False}, "networkpolicy": {"enabled": False},
        "servicemesh": {"enabled": False}, "events": {"enabled": False},
        "devops": {"enabled": True, "jenkinsMemoryLim": "2Gi", "jenkinsJavaOpts_Xms": "512m"},
        "monitoring": {"prometheusMemoryRequest": "400Mi", "prometheusVolumeSize": "20Gi"},
        "kubeedge": {"enabled": False, "cloudCore": {"nodeSelector": {"node-role.kubernetes.io/worker": ""},
                                                      "tolerations": [], "cloudhubPort": "10000",
                                                      "cloudHub": {"advertiseAddress": [""], "nodeLimit": "100"}},
                     "edgeWatcher": {"nodeSelector": {}}},
    }
    prepared = prepare(legacy)
    assert prepared.errors == []
    assert len(prepared.migrations) == 27
    kept = [line.split()[2] for line in prepared.migrations if line.startswith("kept legacy ")]
    assert kept == ["logging.containerruntime", "devops.jenkinsJavaOpts_Xms", "monitoring.prometheusMemoryRequest",
                    "monitoring.prometheusVolumeSize", "edgeruntime.kubeedge.cloudCore.cloudhubPort",
                    "edgeruntime.kubeedge.cloudCore.cloudHub.nodeLimit"]
    assert "removed kubeedge.edgeWatcher (the edge watcher is no longer installed)" in prepared.migrations
    assert prepared.spec["common"]["core"]["console"]["type"] == "NodePort"  # defaulted after migration


V332_COMMON = {"es": {"logMaxAge": 7, "elkPrefix": "logstash", "basicAuth": {"enabled": False},
                      "externalElasticsearchHost": "", "externalElasticsearchPort": ""}}
ES_ENABLED = {"status": "enabled", "enabledTime": "2026-11-01T10:00:00UTC"}


@pytest.mark.parametrize(("common", "status", "store"), [
    # 3.3.x: its cc names no store, its installer ran Elasticsearch (status.es): it stays the store, as upstream's
    # v3.4.1 kept it.
    (V332_COMMON, {"es": ES_ENABLED}, "es"),
    # ... without status.es (no log consumer was on), or with an OpenSearch of v3.4.x too: the default, OpenSearch.
    (V332_COMMON, {}, "opensearch"),
    (V332_COMMON, {"es": ES_ENABLED, "opensearch": ES_ENABLED}, "opensearch"),
    (V332_COMMON, {"es": {"status": "disabled"}}, "opensearch"),
    # A cc that names a store keeps it, whatever the status says.
    ({"es": {"enabled": False}}, {"es": ES_ENABLED}, "opensearch"),
    ({"opensearch": {"enabled": True}}, {"es": ES_ENABLED}, "opensearch"),
    ({"es": {"enabled": True}}, {}, "es"),
])
def test_a_3_3_cc_keeps_the_elasticsearch_its_installer_ran(common: dict[str, Any], status: dict[str, Any],
                                                             store: str) -> None:
    from installer.log_store import store_kind

    raw = {**T, "logging": {"enabled": True}, "common": copy.deepcopy(common)}
    before = copy.deepcopy(raw)
    prepared = prepare(raw, status=status)
    assert raw == before and not prepared.errors
    assert store_kind(prepared.spec["common"]) == store
    noted = [m for m in prepared.migrations if m.startswith("common.es.enabled: true")]
    assert len(noted) == (store == "es" and "enabled" not in common.get("es", {})), prepared.migrations


def test_the_store_from_status_survives_odd_shapes() -> None:
    for spec, status in (({"common": None}, {"es": ES_ENABLED}), ({"common": {"es": "x"}}, {"es": ES_ENABLED}),
                         ({**T}, "enabled"), ({**T}, {"es": "enabled"})):
        prepare(spec, status=status)  # never raises
