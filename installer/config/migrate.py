"""Legacy spec keys -> the v3.4.1 shape (upstream ``generate_new_cluster_configuration``), as pure steps.

Each step takes the working copy, rewrites it in place and returns what it did: a :class:`Move` for a legacy
value it carried to its current key or dropped (a list of them when it merged a section key by key), a one-line
description otherwise, or ``None`` when it had nothing to do. :func:`migrate` runs them in upstream order on a
deep copy.

Deliberate differences from upstream (upstream.md §2.4, §7.10):
- ``common.redis``/``common.openldap`` are never rebuilt from status, and ``es``/``opensearch.enabled``
  are never flipped from status: the spec is the user's. A cc that names neither (3.3.x's, whose only store was
  Elasticsearch) takes the original's store from ``status.es`` (:func:`log_store_from_status`), as upstream did.
- Missing ``common.es``/``common.opensearch`` is fine, and ``opensearchMasterReplicas`` moves correctly.
- A current-shape key the user already set wins over its legacy spelling (the legacy key is dropped).
- No CR delete/re-create: the caller records the descriptions in status.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from installer.spec import has

Spec = dict[str, Any]
Migration = Callable[[Spec], "Move | list[Move] | list[Move | str] | str | None"]
_MISSING = object()


@dataclass(frozen=True)
class Move:
    """A legacy value at ``src`` that ``step`` carried to ``dst`` (``moved``), or dropped because its current key
    (``held_by``, default ``dst``) is already set."""

    step: Migration
    src: str
    dst: str
    kind: Literal["moved", "dropped"] = "moved"
    held_by: str = ""

    def __str__(self) -> str:
        if self.kind == "moved":
            return f"moved {self.src} -> {self.dst}"
        return f"dropped legacy {self.src} ({self.held_by or self.dst} is already set)"


def _section(spec: Spec, path: str, create: bool = False) -> dict[str, Any] | None:
    """The dict at dotted ``path``; created (when ``create``) if absent; ``None`` if not a dict."""
    node: Any = spec
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        if part not in node and create:
            node[part] = {}
        node = node.get(part)
    return node if isinstance(node, dict) else None


def _parent(spec: Spec, path: str, create: bool = False) -> tuple[dict[str, Any] | None, str]:
    head, _, leaf = path.rpartition(".")
    return (_section(spec, head, create) if head else spec), leaf


def _move(step: Migration, spec: Spec, src: str, dst: str, empty_is_unset: bool = False) -> Move | None:
    """Move the value at ``src`` to ``dst``; if ``dst`` is already set, the legacy ``src`` is dropped."""
    src_parent, src_key = _parent(spec, src)
    if src_parent is None or src_key not in src_parent:
        return None
    dst_parent, dst_key = _parent(spec, dst, create=True)
    if dst_parent is None:
        return None  # the target's parent is not a mapping: leave both for validation to report
    value = src_parent.pop(src_key)
    current = dst_parent.get(dst_key, _MISSING)
    if current is _MISSING or (empty_is_unset and current in ("", None)):
        dst_parent[dst_key] = value
        return Move(step, src, dst)
    return Move(step, src, dst, "dropped")


def _mover(src: str, dst: str, empty_is_unset: bool = False) -> Migration:
    def step(spec: Spec) -> Move | None:
        return _move(step, spec, src, dst, empty_is_unset)

    step.__name__ = f"move_{src.replace('.', '_')}"
    step.__doc__ = f"``{src}`` -> ``{dst}``."
    return step


def _dropper(path: str, why: str) -> Migration:
    def step(spec: Spec) -> str | None:
        parent, key = _parent(spec, path)
        if parent is None or key not in parent:
            return None
        del parent[key]
        return f"removed {path} ({why})"

    step.__name__ = f"drop_{path.replace('.', '_')}"
    step.__doc__ = f"Delete ``{path}``: {why}."
    return step


drop_mysql_volume_size = _dropper("common.mysqlVolumeSize", "MySQL is no longer installed")
drop_etcd_volume_size = _dropper("common.etcdVolumeSize", "the built-in etcd is no longer installed")
move_redis_volume_size = _mover("common.redisVolumSize", "common.redis.volumeSize")
move_openldap_volume_size = _mover("common.openldapVolumeSize", "common.openldap.volumeSize")
move_minio_volume_size = _mover("common.minioVolumeSize", "common.minio.volumeSize")
move_es_master_replicas = _mover("common.es.elasticsearchMasterReplicas", "common.es.master.replicas")
move_es_data_replicas = _mover("common.es.elasticsearchDataReplicas", "common.es.data.replicas")
move_es_master_volume = _mover("common.es.elasticsearchMasterVolumeSize", "common.es.master.volumeSize")
move_es_data_volume = _mover("common.es.elasticsearchDataVolumeSize", "common.es.data.volumeSize")
move_es_url = _mover("common.es.externalElasticsearchUrl", "common.es.externalElasticsearchHost", True)
move_opensearch_master_replicas = _mover("common.opensearch.opensearchMasterReplicas",
                                         "common.opensearch.master.replicas")
move_opensearch_data_replicas = _mover("common.opensearch.opensearchDataReplicas", "common.opensearch.data.replicas")
move_opensearch_master_volume = _mover("common.opensearch.opensearchMasterVolumeSize",
                                       "common.opensearch.master.volumeSize")
move_opensearch_data_volume = _mover("common.opensearch.opensearchDataVolumeSize",
                                     "common.opensearch.data.volumeSize")
move_opensearch_url = _mover("common.opensearch.externalOpensearchUrl", "common.opensearch.externalOpensearchHost",
                             True)
drop_notification = _dropper("notification", "notification-manager settings moved out of the spec in v3.1")


def move_console(spec: Spec) -> Move | list[Move] | None:
    """Top-level ``console`` -> ``common.core.console``; merged into an existing one key by key (keys already
    under ``common.core.console`` win)."""
    legacy = spec.get("console", _MISSING)
    if legacy is _MISSING:
        return None
    core = _section(spec, "common.core", create=True)
    if core is None:
        return None
    current = core.get("console", _MISSING)
    del spec["console"]
    if current is _MISSING:
        core["console"] = legacy
        return Move(move_console, "console", "common.core.console")
    if isinstance(current, dict) and isinstance(legacy, dict) and legacy:
        return [_merge_console_key(current, key, value) for key, value in legacy.items()]
    return Move(move_console, "console", "common.core.console", "dropped")


def _merge_console_key(console: dict[str, Any], key: str, value: Any) -> Move:
    move = Move(move_console, f"console.{key}", f"common.core.console.{key}")
    if key in console:
        return replace(move, kind="dropped")
    console[key] = value
    return move


def migrate_logsidecar_replicas(spec: Spec) -> Move | None:
    """``logging.logsidecarReplicas`` -> ``logging.logsidecar {enabled: logging.enabled, replicas}`` (into an
    existing ``logging.logsidecar`` that lacks ``replicas``)."""
    logging = spec.get("logging")
    if not isinstance(logging, dict) or "logsidecarReplicas" not in logging:
        return None
    replicas = logging.pop("logsidecarReplicas")  # not an integer: validation says so, under the key written
    logging.setdefault("enabled", False)
    move = Move(migrate_logsidecar_replicas, "logging.logsidecarReplicas", "logging.logsidecar.replicas")
    current = logging.setdefault("logsidecar", {"enabled": logging["enabled"]})
    if not isinstance(current, dict) or "replicas" in current:
        return replace(move, kind="dropped")
    current["replicas"] = replicas
    return move


def add_events_ruler(spec: Spec) -> str | None:
    """``events`` without ``ruler`` gets the v3.1 default ruler ``{enabled: true, replicas: 2}``."""
    events = spec.get("events")
    if not isinstance(events, dict) or "ruler" in events:
        return None
    events["ruler"] = {"enabled": True, "replicas": 2}
    return "added events.ruler (enabled: true, replicas: 2)"


def migrate_openpitrix_store(spec: Spec) -> Move | None:
    """``openpitrix.enabled`` (pre-v3.2) -> ``openpitrix.store.enabled``."""
    openpitrix = spec.get("openpitrix")
    if not isinstance(openpitrix, dict) or "store" in openpitrix:
        return None
    openpitrix["store"] = {"enabled": openpitrix.pop("enabled", False)}
    return Move(migrate_openpitrix_store, "openpitrix.enabled", "openpitrix.store.enabled")


def migrate_networkpolicy(spec: Spec) -> Move | None:
    """Top-level ``networkpolicy`` -> ``network.networkpolicy`` (plus ``ippool``/``topology`` ``none``)."""
    legacy = spec.get("networkpolicy", _MISSING)
    if not isinstance(legacy, dict | None):
        return None  # not the legacy shape: validation reports it
    network = _section(spec, "network", create=True)
    if network is None:
        return None
    move = Move(migrate_networkpolicy, "networkpolicy", "network.networkpolicy")
    if "networkpolicy" in network:
        move = replace(move, kind="dropped")
    else:
        network["networkpolicy"] = {"enabled": (legacy or {}).get("enabled", False)}
    network.setdefault("ippool", {"type": "none"})
    network.setdefault("topology", {"type": "none"})
    del spec["networkpolicy"]
    return move


def add_terminal(spec: Spec) -> str | None:
    """A spec without ``terminal`` (pre-v3.3) gets ``terminal.timeout: 600``."""
    if "terminal" in spec:
        return None
    spec["terminal"] = {"timeout": 600}
    return "added terminal (timeout: 600)"


def add_servicemesh_istio(spec: Spec) -> str | None:
    """``servicemesh`` without ``istio`` (pre-v3.3) gets the default istio components."""
    servicemesh = spec.get("servicemesh")
    if not isinstance(servicemesh, dict) or "istio" in servicemesh:
        return None
    servicemesh["istio"] = {"components": {"ingressGateways": [{"name": "istio-ingressgateway", "enabled": False}],
                                           "cni": {"enabled": False}}}
    return "added servicemesh.istio (default components)"


def migrate_kubeedge(spec: Spec) -> list[Move | str] | None:
    """Top-level ``kubeedge`` (pre-v3.3) -> ``edgeruntime.kubeedge`` with the external iptables-manager; its
    ``edgeWatcher`` is removed (upstream deletes it too)."""
    legacy = spec.get("kubeedge", _MISSING)
    if not isinstance(legacy, dict | None):
        return None  # not the legacy shape: validation reports it
    del spec["kubeedge"]
    if "edgeruntime" in spec:
        return [Move(migrate_kubeedge, "kubeedge", "edgeruntime.kubeedge", "dropped", held_by="edgeruntime")]
    kubeedge = {k: v for k, v in (legacy or {}).items() if k != "edgeWatcher"}
    watcher = ["removed kubeedge.edgeWatcher (the edge watcher is no longer installed)"] \
        if "edgeWatcher" in (legacy or {}) else []
    kubeedge.setdefault("enabled", False)
    kubeedge.setdefault("iptables-manager", {"enabled": True, "mode": "external"})
    spec["edgeruntime"] = {"enabled": kubeedge["enabled"], "kubeedge": kubeedge}
    return [Move(migrate_kubeedge, "kubeedge", "edgeruntime.kubeedge"), *watcher]


def _devops_default(key: str, value: float) -> Migration:
    def step(spec: Spec) -> str | None:
        devops = spec.get("devops")
        if not isinstance(devops, dict) or devops.get("enabled") is not True or key in devops:
            return None
        devops[key] = value
        return f"added devops.{key}: {value}"

    step.__name__ = f"add_devops_{key}"
    step.__doc__ = f"Enabled devops without ``{key}`` gets ``{value}`` (the default file's value)."
    return step


add_jenkins_cpu_req = _devops_default("jenkinsCpuReq", 0.5)
add_jenkins_cpu_lim = _devops_default("jenkinsCpuLim", 1)

#: Every migration, in upstream order.
MIGRATIONS: tuple[Migration, ...] = (
    drop_mysql_volume_size,
    drop_etcd_volume_size,
    move_redis_volume_size,
    move_openldap_volume_size,
    move_minio_volume_size,
    move_es_master_replicas,
    move_es_data_replicas,
    move_es_master_volume,
    move_es_data_volume,
    move_es_url,
    move_opensearch_master_replicas,
    move_opensearch_data_replicas,
    move_opensearch_master_volume,
    move_opensearch_data_volume,
    move_opensearch_url,
    move_console,
    migrate_logsidecar_replicas,
    add_events_ruler,
    drop_notification,
    migrate_openpitrix_store,
    migrate_networkpolicy,
    add_terminal,
    add_servicemesh_istio,
    migrate_kubeedge,
    add_jenkins_cpu_req,
    add_jenkins_cpu_lim,
)


#: Legacy keys the schema still accepts, because KubeKey's and older ks-installers' ccs carry them, that v3.4.1 no
#: longer reads, or reads only where the current key is unset. They stay in the spec (a cc KubeKey wrote is never
#: refused for them) and each one present is named in the notes.
LEGACY_KEPT: dict[str, str] = {
    "logging.containerruntime": "no longer read: the container runtime is read from the nodes",
    "devops.jenkinsJavaOpts_Xms": "no longer read",
    "devops.jenkinsJavaOpts_Xmx": "no longer read",
    "devops.jenkinsJavaOpts_MaxRAM": "no longer read",
    "monitoring.prometheusMemoryRequest": "no longer read: see monitoring.prometheus.resources",
    "monitoring.prometheusVolumeSize": "read only where monitoring.prometheus.volumeSize is unset",
    "monitoring.prometheusReplicas": "read only where monitoring.prometheus.replicas is unset",
    "monitoring.alertmanagerReplicas": "read only where monitoring.alertmanager.replicas is unset",
    **{f"edgeruntime.kubeedge.cloudCore.{port}": "no longer read: cloudcore listens on its default ports"
       for port in ("cloudhubPort", "cloudhubQuicPort", "cloudhubHttpsPort", "cloudstreamPort", "tunnelPort")},
    "edgeruntime.kubeedge.cloudCore.cloudHub.nodeLimit": "no longer read: cloudcore's node limit is 1000",
}


def kept_legacy(spec: Spec) -> list[str]:
    """One note per :data:`LEGACY_KEPT` key present in ``spec`` (after migration)."""
    return [f"kept legacy {path} ({why})" for path, why in LEGACY_KEPT.items() if has(spec, path)]


def log_store_from_status(spec: Spec, status: Any) -> str | None:
    """A 3.3.x cc names no log store (``common.es.enabled`` and ``common.opensearch.enabled`` both absent: its
    Elasticsearch was the only one); when the original installer's status says it runs one (``status.es``, and no
    ``status.opensearch``), ``spec`` gets ``common.es.enabled: true`` in place, so the logs stay where they are, as
    upstream v3.4.1's ``generate_new_cluster_configuration`` kept them. Returns the note, or ``None``."""
    if has(spec, "common.es.enabled") or has(spec, "common.opensearch.enabled") or not isinstance(status, dict):
        return None
    if not isinstance(spec.get("common", {}), dict) or not isinstance(spec.get("common", {}).get("es", {}), dict):
        return None

    def enabled(key: str) -> bool:
        entry = status.get(key)
        return isinstance(entry, dict) and entry.get("status") == "enabled"
    if not enabled("es") or enabled("opensearch"):
        return None
    spec.setdefault("common", {}).setdefault("es", {})["enabled"] = True
    return ("common.es.enabled: true (the cc names no log store and status.es says the original installer runs "
            "Elasticsearch: logging, events, auditing and Jaeger keep using it)")


def migrate_notes(spec: Spec) -> tuple[Spec, list[Move | str]]:
    """Run every migration on a deep copy of ``spec``; return it and what each step did (input untouched), then
    the legacy keys it keeps (:func:`kept_legacy`)."""
    out = copy.deepcopy(spec)
    notes = [note for step in MIGRATIONS for note in _listed(step(out))]
    return out, [*notes, *kept_legacy(out)]


def migrate(spec: Spec) -> tuple[Spec, list[str]]:
    """:func:`migrate_notes` with each note as the line status.migrations shows."""
    out, notes = migrate_notes(spec)
    return out, [str(note) for note in notes]


def _listed(result: Move | list[Move] | list[Move | str] | str | None) -> list[Move | str]:
    return [] if result is None else list(result) if isinstance(result, list) else [result]
