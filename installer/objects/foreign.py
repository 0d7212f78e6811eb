"""Fields other writers added to the installer's objects, and how they are taken over so the object ends as rendered.

Server-side apply removes only fields the applier owned: a sidecar container, an env variable, ``privileged: true``
or an extra webhook that another field manager wrote survive every apply. For the kinds in :data:`TAKEN_OVER_KINDS`,
after the installer's (forced) apply every other managedFields entry is split into the fields a legitimate writer
may own (:data:`ALLOWED`) and the rest; the rest is moved into the installer's ``Apply`` entry (one JSON patch of
``metadata.managedFields``, what the Kubernetes docs call transferring ownership) and the next apply, which does
not set them, removes them. The decision reads field sets only: a manager's name or an entry's time can be forged
by whoever writes the object, so neither makes a field legitimate.

The allow-list, by kind (a path matches it and everything under it):

- every kind: ``status`` (kube-controller-manager, kubelet, operators);
- Deployment, StatefulSet: ``spec.replicas`` (a HorizontalPodAutoscaler or ``kubectl scale``; the installer's
  forced apply takes it back when the render sets it);
- workloads: the pod template's ``kubectl.kubernetes.io/restartedAt`` (``kubectl rollout restart``) and
  ``installer.kubesphere.io/config-hash`` (installer.objects.rollout) annotations, and the annotations the controllers
  stamp (``deployment.kubernetes.io/revision``, ``deprecated.daemonset.template.generation``);
- webhook configurations, APIServices: the ``caBundle`` (injected by cert-manager's cainjector);
- Service: ``spec.clusterIP``, ``spec.clusterIPs``, ``spec.healthCheckNodePort`` and each port's ``nodePort``
  (allocated by the API server);
- ServiceAccount: ``secrets`` (the token controller of Kubernetes before 1.24 lists the token Secrets it made).

Defaulted fields the API server sets are owned by nobody (or by whoever created the object: then they are taken
over, removed by the apply and defaulted again to the same value, so no pod template changes).
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass, field
from typing import Any

from installer.settings import FIELD_MANAGER

Path = tuple[str, ...]
"""A path in a ``FieldsV1`` tree: ``("f:spec", "f:template", ..., 'k:{"name":"c"}', ".")``."""

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")
RBAC = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
WEBHOOKS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
#: The kinds whose foreign fields are taken over and removed after each apply.
TAKEN_OVER_KINDS = frozenset((*WORKLOADS, *RBAC, *WEBHOOKS, "APIService", "Service", "ConfigMap", "ServiceAccount"))

_TEMPLATE_ANNOTATIONS = ("f:spec", "f:template", "f:metadata", "f:annotations")
_WORKLOAD_PATHS: tuple[Path, ...] = (
    (*_TEMPLATE_ANNOTATIONS, "f:kubectl.kubernetes.io/restartedAt"),
    (*_TEMPLATE_ANNOTATIONS, "f:installer.kubesphere.io/config-hash"),
    ("f:metadata", "f:annotations", "f:deployment.kubernetes.io/revision"),
    ("f:metadata", "f:annotations", "f:deprecated.daemonset.template.generation"),
)
#: Paths a writer other than the installer may own, by kind (``*``: any key or list item).
ALLOWED: dict[str, tuple[Path, ...]] = {
    "Deployment": (("f:spec", "f:replicas"), *_WORKLOAD_PATHS),
    "StatefulSet": (("f:spec", "f:replicas"), *_WORKLOAD_PATHS),
    "DaemonSet": _WORKLOAD_PATHS,
    "ValidatingWebhookConfiguration": (("f:webhooks", "*", "f:clientConfig", "f:caBundle"),),
    "MutatingWebhookConfiguration": (("f:webhooks", "*", "f:clientConfig", "f:caBundle"),),
    "APIService": (("f:spec", "f:caBundle"),),
    "ServiceAccount": (("f:secrets",),),
    "Service": (("f:spec", "f:clusterIP"), ("f:spec", "f:clusterIPs"), ("f:spec", "f:healthCheckNodePort"),
                ("f:spec", "f:ports", "*", "f:nodePort")),
}
ALWAYS_ALLOWED: tuple[Path, ...] = (("f:status",),)


def leaves(tree: dict[str, Any], prefix: Path = ()) -> list[Path]:
    """Every owned path of a ``FieldsV1`` tree (a node owned as a whole ends in ``"."``)."""
    out: list[Path] = []
    for key, value in tree.items():
        if key == "." or not value:
            out.append((*prefix, key))
        else:
            out += leaves(value, (*prefix, key))
    return out


def tree(paths: list[Path]) -> dict[str, Any]:
    """The ``FieldsV1`` tree of owned paths (the inverse of :func:`leaves`)."""
    out: dict[str, Any] = {}
    for path in paths:
        node = out
        for key in path:
            node = node.setdefault(key, {})
    return out


def allowed(kind: str, path: Path) -> bool:
    """Whether a writer other than the installer may own ``path`` of an object of ``kind``."""
    return any(len(path) >= len(rule) and all(r in ("*", p) for r, p in zip(rule, path, strict=False))
               for rule in (*ALWAYS_ALLOWED, *ALLOWED.get(kind, ())))


def is_ours(entry: dict[str, Any]) -> bool:
    """The installer's own apply entry (its other writes and helpers' managers are other writers)."""
    return entry.get("manager") == FIELD_MANAGER and entry.get("operation") == "Apply" and not entry.get("subresource")


@functools.lru_cache(maxsize=4096)
def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _child(node: Any, key: str) -> Any:
    """The part of an object a ``FieldsV1`` key names (None when absent)."""
    kind, _, rest = key.partition(":")
    if kind == "f":
        return node.get(rest) if isinstance(node, dict) else None
    if not isinstance(node, list):
        return None
    if kind == "i":
        return node[int(rest)] if rest.isdigit() and int(rest) < len(node) else None
    wanted = _decoded(rest)
    if wanted is None or (kind == "k" and not isinstance(wanted, dict)):
        return None
    if kind == "v":
        return wanted if wanted in node else None
    return next((i for i in node if isinstance(i, dict) and all(i.get(k) == v for k, v in wanted.items())), None)


_ABSENT = object()


def rendered(body: dict[str, Any] | None, path: Path, seen: dict[Path, Any] | None = None) -> bool:
    """Whether the object the installer applies (``body``) sets ``path`` (``seen``: the parts already looked up,
    by path, shared between the calls for one object)."""
    if body is None:
        return False
    seen = {} if seen is None else seen
    node: Any = body
    for depth, key in enumerate(path, 1):
        if key == ".":
            break
        prefix = path[:depth]
        if (found := seen.get(prefix, _ABSENT)) is _ABSENT:
            found = seen[prefix] = _child(node, key)
        if found is None:
            return False
        node = found
    return True


def _structural(path: Path) -> bool:
    """Whether ``path`` only says a list item or map exists (its ``.`` or a field of its key), not what it holds."""
    if path[-1] == ".":
        return True
    if len(path) < 2 or not path[-2].startswith("k:"):
        return False
    keys = _decoded(path[-2][2:])
    return isinstance(keys, dict) and path[-1][2:] in keys


def foreign_paths(kind: str, entry: dict[str, Any], body: dict[str, Any] | None = None,
                  ours: frozenset[Path] = frozenset()) -> list[Path]:
    """The paths an entry owns that no writer but the installer may own: not allow-listed, or set by the render
    (``body``; the installer's apply takes those back). Sharing the existence of an item the installer applied
    (``ours``: its entry's paths) is no foreign field (a caBundle injector names the webhook it writes to)."""
    if is_ours(entry):
        return []
    paths = leaves(entry.get("fieldsV1") or {})
    seen: dict[Path, Any] = {}
    shown = {p: rendered(body, p, seen) for p in paths}
    kept = [p for p in paths if not shown[p] and allowed(kind, p)]
    kept_set = set(kept)
    out = []
    for path in paths:
        if path in kept_set or (_structural(path) and (path in ours or shown[path] or _holds(path, kept))):
            continue
        out.append(path)
    return out


def _holds(path: Path, kept: list[Path]) -> bool:
    """Whether the map or item ``path`` says exists holds one of the allow-listed fields ``kept``."""
    base = path[:-1] if path[-1] == "." else path[:-2]
    return any(len(k) > len(base) and k[:len(base)] == base and k[len(base)] != "." for k in kept)


def installer_paths(entries: list[dict[str, Any]]) -> frozenset[Path]:
    """The paths the installer's apply entry owns."""
    return frozenset(p for e in entries if is_ours(e) for p in leaves(e.get("fieldsV1") or {}))


def clean(kind: str, entries: list[dict[str, Any]], body: dict[str, Any] | None = None) -> bool:
    """Whether only the installer's apply entry owns the fields only it may own (field sets: not names or times)."""
    ours = installer_paths(entries)
    return sum(1 for e in entries if is_ours(e)) == 1 and not any(foreign_paths(kind, e, body, ours)
                                                                  for e in entries)


def _segment(key: str) -> str:
    kind, _, rest = key.partition(":")
    if kind == "f":
        return f".{rest}"
    if kind == "k":
        try:
            keys = json.loads(rest)
        except ValueError:
            return "[?]"
        if set(keys) == {"name"}:
            return f"[{keys['name']}]"
        return "[" + ",".join(f"{k}={v}" for k, v in sorted(keys.items())) + "]"
    if kind == "i":
        return f"[{rest}]"
    return "[value]"  # "v:<value>": a member of a set of values, never shown


def readable(path: Path) -> str:
    """``spec.template.spec.containers[sidecar]`` for a path (a set member's value is never printed)."""
    return "".join(_segment(k) for k in path if k != ".").lstrip(".")


def tops(paths: list[Path]) -> list[str]:
    """The readable paths of ``paths`` without those under another of them."""
    bases = {p[:-1] if p[-1] == "." else p for p in paths}
    return sorted(readable(b) for b in bases if not any(b[:n] in bases for n in range(1, len(b))))


@dataclass
class Eviction:
    """The managedFields that move foreign fields to the installer, and what the next apply removes, by manager."""

    managed_fields: list[dict[str, Any]]
    removed: dict[str, list[str]] = field(default_factory=dict)

    def describe(self) -> str:
        return "; ".join(f"removed fields of manager {m}: {', '.join(p)}" for m, p in sorted(self.removed.items()))


def _manager(entry: dict[str, Any]) -> str:
    name = str(entry.get("manager") or "unknown")
    return f"{name} ({entry['subresource']})" if entry.get("subresource") else name


def eviction(kind: str, entries: list[dict[str, Any]], now: str, body: dict[str, Any] | None = None) -> Eviction | None:
    """How to take the foreign fields of ``entries`` (an object's managedFields after the installer applied
    ``body``) over: None when there are none (or the installer's apply entry is missing)."""
    if kind not in TAKEN_OVER_KINDS:
        return None
    ours = next((e for e in entries if is_ours(e)), None)
    owned = installer_paths(entries)
    found = [foreign_paths(kind, e, body, owned) for e in entries]
    if ours is None or not any(found):
        return None
    moved = {p for paths in found for p in paths}
    mine = {**copy.deepcopy(ours), "fieldsV1": tree(sorted(owned | moved)), "time": now}
    removed: dict[str, set[str]] = {}
    out: list[dict[str, Any]] = []
    seen: dict[Path, Any] = {}
    for entry, paths in zip(entries, found, strict=True):
        if entry is ours or not paths:
            out.append(mine if entry is ours else entry)
            continue
        if gone := [p for p in paths if p not in owned and not rendered(body, p, seen)]:
            removed.setdefault(_manager(entry), set()).update(tops(gone))
        dropped = set(paths)
        if rest := [p for p in leaves(entry.get("fieldsV1") or {}) if p not in dropped]:
            out.append({**entry, "fieldsV1": tree(rest)})
    return Eviction(out, {m: sorted(p) for m, p in removed.items()})
