"""Legacy spec keys -> the v3.4.1 shape (upstream ``generate_new_cluster_configuration``), as pure steps.

Each step takes the working copy, rewrites it in place and returns a one-line description, or ``None``
when it had nothing to do. :func:`migrate` runs them in upstream order on a deep copy.

Deliberate differences from upstream (upstream.md §2.4, §7.10):
- ``common.redis``/``common.openldap`` are never rebuilt from status, and ``es``/``opensearch.enabled``
  are never flipped from status: the spec is the user's.
- Missing ``common.es``/``common.opensearch`` is fine, and ``opensearchMasterReplicas`` moves correctly.
- A current-shape key the user already set wins over its legacy spelling (the legacy key is dropped).
- No CR delete/re-create: the caller records the descriptions in status.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

Spec = dict[str, Any]
Migration = Callable[[Spec], "str | None"]
_MISSING = object()


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


def _move(spec: Spec, src: str, dst: str, empty_is_unset: bool = False) -> str | None:
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
        return f"moved {src} -> {dst}"
    return f"dropped legacy {src} ({dst} is already set)"


def _mover(src: str, dst: str, empty_is_unset: bool = False) -> Migration:
    def step(spec: Spec) -> str | None:
        return _move(spec, src, dst, empty_is_unset)

    step.__name__ = f"move_{src.replace('.', '_')}"
    step.__doc__ = f"``{src}`` -> ``{dst}``."
    return moves(src, dst)(step)


def moves(src: str, dst: str) -> Callable[[Migration], Migration]:
    """Mark a step as carrying the user's value at ``src`` to ``dst`` (``prepare`` validates what it drops)."""
    def mark(step: Migration) -> Migration:
        step.moves = (src, dst)  # type: ignore[attr-defined]
        return step

    return mark


def moved_values(migrations: list[str]) -> list[tuple[Migration, str, str]]:
    """The steps that carried (or dropped) a user's value in a run that described itself as ``migrations``, with
    the value's legacy path and its destination."""
    out = []
    for step in MIGRATIONS:
        src, dst = getattr(step, "moves", ("", ""))
        if src and any(line.startswith((f"moved {src} -> ", f"dropped legacy {src} ")) for line in migrations):
            out.append((step, src, dst))
    return out


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


@moves("console", "common.core.console")
def move_console(spec: Spec) -> str | None:
    """Top-level ``console`` -> ``common.core.console`` (keys already under ``common.core.console`` win)."""
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
    elif isinstance(current, dict) and isinstance(legacy, dict):
        core["console"] = {**legacy, **current}
    else:
        return "dropped legacy console (common.core.console is already set)"
    return "moved console -> common.core.console"


@moves("logging.logsidecarReplicas", "logging.logsidecar.replicas")
def migrate_logsidecar_replicas(spec: Spec) -> str | None:
    """``logging.logsidecarReplicas`` -> ``logging.logsidecar {enabled: logging.enabled, replicas}``."""
    logging = spec.get("logging")
    if not isinstance(logging, dict) or "logsidecarReplicas" not in logging:
        return None
    replicas = logging.pop("logsidecarReplicas")  # not an integer: validation says so, under the key written
    logging.setdefault("enabled", False)
    logging.setdefault("logsidecar", {"enabled": logging["enabled"], "replicas": replicas})
    return "moved logging.logsidecarReplicas -> logging.logsidecar.replicas"


def add_events_ruler(spec: Spec) -> str | None:
    """``events`` without ``ruler`` gets the v3.1 default ruler ``{enabled: true, replicas: 2}``."""
    events = spec.get("events")
    if not isinstance(events, dict) or "ruler" in events:
        return None
    events["ruler"] = {"enabled": True, "replicas": 2}
    return "added events.ruler (enabled: true, replicas: 2)"


@moves("openpitrix.enabled", "openpitrix.store.enabled")
def migrate_openpitrix_store(spec: Spec) -> str | None:
    """``openpitrix.enabled`` (pre-v3.2) -> ``openpitrix.store.enabled``."""
    openpitrix = spec.get("openpitrix")
    if not isinstance(openpitrix, dict) or "store" in openpitrix:
        return None
    openpitrix["store"] = {"enabled": openpitrix.pop("enabled", False)}
    return "moved openpitrix.enabled -> openpitrix.store.enabled"


@moves("networkpolicy", "network.networkpolicy")
def migrate_networkpolicy(spec: Spec) -> str | None:
    """Top-level ``networkpolicy`` -> ``network.networkpolicy`` (plus ``ippool``/``topology`` ``none``)."""
    legacy = spec.get("networkpolicy", _MISSING)
    if not isinstance(legacy, dict | None):
        return None  # not the legacy shape: validation reports it
    network = _section(spec, "network", create=True)
    if network is None:
        return None
    enabled = (legacy or {}).get("enabled", False)
    network.setdefault("networkpolicy", {"enabled": enabled})
    network.setdefault("ippool", {"type": "none"})
    network.setdefault("topology", {"type": "none"})
    del spec["networkpolicy"]
    return "moved networkpolicy -> network.networkpolicy"


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


@moves("kubeedge", "edgeruntime.kubeedge")
def migrate_kubeedge(spec: Spec) -> str | None:
    """Top-level ``kubeedge`` (pre-v3.3) -> ``edgeruntime.kubeedge`` with the external iptables-manager."""
    legacy = spec.get("kubeedge", _MISSING)
    if not isinstance(legacy, dict | None):
        return None  # not the legacy shape: validation reports it
    del spec["kubeedge"]
    if "edgeruntime" in spec:
        return "dropped legacy kubeedge (edgeruntime is already set)"
    kubeedge = {k: v for k, v in (legacy or {}).items() if k != "edgeWatcher"}
    kubeedge.setdefault("enabled", False)
    kubeedge.setdefault("iptables-manager", {"enabled": True, "mode": "external"})
    spec["edgeruntime"] = {"enabled": kubeedge["enabled"], "kubeedge": kubeedge}
    return "moved kubeedge -> edgeruntime.kubeedge"


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


def migrate(spec: Spec) -> tuple[Spec, list[str]]:
    """Run every migration on a deep copy of ``spec``; return it and what changed (input untouched)."""
    out = copy.deepcopy(spec)
    done = [msg for step in MIGRATIONS if (msg := step(out))]
    return out, done
