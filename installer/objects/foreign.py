"""Fields other writers added to the installer's objects: which are kept, and how the denied ones are removed.

The installer shares its objects with the cluster, as Flux and Argo CD do: in the fields the render sets, the render
wins (the forced server-side apply takes them back); fields the render does not set are kept, whoever wrote them
(an ``imagePullSecrets`` entry, a cloud load balancer's annotations, a finalizer, a mesh's pod-template label,
``kubectl rollout pause``, a scale). The exception is a short deny-list of places where foreign content can take over
a workload or the API, :data:`DENIED` by kind (a path matches a rule and everything under it; ``*`` any key or item):

- workloads, Jobs, CronJobs and the custom resources that become pods (Prometheus, Alertmanager, ThanosRuler): the
  pod spec's containers, init and ephemeral containers, volumes, ``hostNetwork``/``hostPID``/``hostIPC``, its
  ``securityContext`` and ``serviceAccountName``;
- webhook configurations: an item the installer did not apply is removed whole, whatever leaf it carries; in its
  own items, ``clientConfig`` (but the ``caBundle`` a cainjector writes), ``rules`` and the selectors;
- APIServices: ``spec`` (but ``caBundle``); RBAC: rules, aggregation, subjects and roleRef;
- Services: ports (but the ``nodePort`` the API server allocates), selector and ``externalIPs``.

Denied content of other writers is moved into the installer's ``Apply`` entry (one JSON patch of
``metadata.managedFields``, what the Kubernetes docs call transferring ownership) and the next apply, which does not
set it, removes it. The decision reads field sets only: a manager's name or an entry's time can be forged by whoever
writes the object, so neither makes a field legitimate. Defaulted fields the API server sets are owned by nobody.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from installer.settings import FIELD_MANAGER

Path = tuple[str, ...]
"""A path in a ``FieldsV1`` tree: ``("f:spec", "f:template", ..., 'k:{"name":"c"}', ".")``."""

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")
RBAC = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
WEBHOOKS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")

#: What in a pod spec no writer but the installer may add (under the kind's pod-spec path).
_POD_SPEC = ("f:containers", "f:initContainers", "f:ephemeralContainers", "f:volumes", "f:hostNetwork", "f:hostPID",
             "f:hostIPC", "f:securityContext", "f:serviceAccountName", "f:serviceAccount")
_POD_SPECS: dict[str, Path] = {
    **{kind: ("f:spec", "f:template", "f:spec") for kind in (*WORKLOADS, "ReplicaSet", "Job")},
    "CronJob": ("f:spec", "f:jobTemplate", "f:spec", "f:template", "f:spec"),
    **{kind: ("f:spec",) for kind in ("Prometheus", "Alertmanager", "ThanosRuler")},
}
_WEBHOOK_ITEM: tuple[Path, ...] = (("f:webhooks", "*", "f:clientConfig"), ("f:webhooks", "*", "f:rules"),
                                   ("f:webhooks", "*", "f:namespaceSelector"), ("f:webhooks", "*", "f:objectSelector"),
                                   ("f:webhooks", "*", "f:matchConditions"))
#: Paths where only the installer may add content, by kind.
DENIED: dict[str, tuple[Path, ...]] = {
    **{kind: tuple((*base, f) for f in _POD_SPEC) for kind, base in _POD_SPECS.items()},
    **{kind: _WEBHOOK_ITEM for kind in WEBHOOKS},
    "APIService": (("f:spec",),),
    "Role": (("f:rules",),),
    "ClusterRole": (("f:rules",), ("f:aggregationRule",)),
    "RoleBinding": (("f:subjects",), ("f:roleRef",)),
    "ClusterRoleBinding": (("f:subjects",), ("f:roleRef",)),
    "Service": (("f:spec", "f:ports"), ("f:spec", "f:selector"), ("f:spec", "f:externalIPs")),
}
#: Paths under a denied one that other writers may own (a cainjector's caBundle, the API server's nodePort).
EXCEPTED: dict[str, tuple[Path, ...]] = {
    **{kind: (("f:webhooks", "*", "f:clientConfig", "f:caBundle"),) for kind in WEBHOOKS},
    "APIService": (("f:spec", "f:caBundle"),),
    "Service": (("f:spec", "f:ports", "*", "f:nodePort"),),
}
#: The kinds whose denied content is removed after each apply.
TAKEN_OVER_KINDS = frozenset(DENIED)


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


def _matches(path: Path, rules: tuple[Path, ...]) -> bool:
    return any(len(path) >= len(rule) and all(r in ("*", p) for r, p in zip(rule, path, strict=False))
               for rule in rules)


def denied(kind: str, path: Path, ours: frozenset[Path] = frozenset()) -> bool:
    """Whether only the installer may own ``path`` of an object of ``kind`` (``ours``: the paths of its own apply
    entry: a webhook item it did not apply is denied whole)."""
    if kind in WEBHOOKS and len(path) > 1 and path[0] == "f:webhooks" and not _held(path[:2], ours):
        return True
    if not _matches(path, DENIED.get(kind, ())):
        return False
    # An exception holds inside an item the installer applied (a port it renders), never in one another writer added.
    return not any(_matches(path, (rule,)) and _held(path[:rule.index("*") + 1] if "*" in rule else (), ours)
                   for rule in EXCEPTED.get(kind, ()))


def _held(prefix: Path, ours: frozenset[Path]) -> bool:
    """Whether the installer's entry owns something at or under ``prefix``."""
    return any(p[:len(prefix)] == prefix for p in ours)


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
    """The paths an entry of another writer owns that the installer takes: those the render (``body``) sets (its
    forced apply takes them back) and denied content (:func:`denied`; the apply removes it). Sharing the existence
    of an item the installer applied (``ours``: its entry's paths) is no foreign field (a caBundle injector names the
    webhook it writes to), nor is a field the installer's apply entry owns too: the API server keeps a field shared
    only while every owner's value is the one the installer applied (a namespace it created before applying it)."""
    if is_ours(entry):
        return []
    paths = leaves(entry.get("fieldsV1") or {})
    seen: dict[Path, Any] = {}
    shown = {p: rendered(body, p, seen) for p in paths}
    kept = [p for p in paths if not shown[p] and not denied(kind, p, ours)]
    kept_set = set(kept)
    out = []
    for path in paths:
        if path in kept_set or path in ours or (_structural(path) and (shown[path] or _holds(path, kept))):
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
    """How to take the denied content of other writers in ``entries`` (an object's managedFields after the
    installer applied ``body``) over: None when there is none (or the installer's apply entry is missing)."""
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


#: Fields the render sets that controllers rewrite as their job (istiod's webhook failurePolicy, a cainjector's
#: caBundle, a HorizontalPodAutoscaler's or ``kubectl scale``'s replicas): a drift check leaves them to those writers;
#: the module's next run sets the render's value again.
TOLERATED: tuple[Path, ...] = (("f:webhooks", "*", "f:failurePolicy"),
                               ("f:webhooks", "*", "f:clientConfig", "f:caBundle"),
                               ("f:spec", "f:caBundle"), ("f:spec", "f:replicas"))


def tolerated(path: Path) -> bool:
    """Whether ``path`` is one of the :data:`TOLERATED` fields."""
    return _matches(path, TOLERATED)


def _value_at(obj: dict[str, Any], path: Path) -> Any:
    """What ``obj`` holds at a ``FieldsV1`` path (an item or map owned as a whole: that it exists)."""
    node: Any = obj
    for key in path:
        if key == ".":
            return node is not None
        node = _child(node, key)
        if node is None:
            return None
    return node


def guard(obj: dict[str, Any]) -> str:
    """The digest of what the installer's own apply entry holds on ``obj``: which fields it owns (but the
    :data:`TOLERATED` ones) and their values. Recorded after each write; a drift check that reads another digest
    knows that someone took one of the installer's fields or wrote a value under its name, whatever the names and
    times the object's metadata carries."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    paths = sorted(p for p in installer_paths(entries) if not tolerated(p)
                   and p[:2] != ("f:metadata", "f:managedFields"))
    held = [[list(p), _value_at(obj, p)] for p in paths]
    text = json.dumps(held, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
