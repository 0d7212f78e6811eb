"""Naming a module's objects: refs, idents, kinds' apply order and stages, and loading definitions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from installer import yaml_c
from installer.settings import FIELD_MANAGER

Obj = dict[str, Any]
Ref = tuple[str, str, str, str]
"""(apiVersion, kind, namespace or "", name)."""

#: Apply order; uninstall runs it backwards. Kinds not listed go after the listed ones.
KIND_ORDER = (
    "Namespace", "CustomResourceDefinition", "PriorityClass", "StorageClass", "ServiceAccount", "ClusterRole",
    "ClusterRoleBinding", "Role", "RoleBinding", "Secret", "ConfigMap", "PersistentVolumeClaim", "Service",
    "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob",
)


def rank(kind: str) -> int:
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def uninstall_order(obj: Obj) -> tuple[int, int, int]:
    """Deletion order: the last apply stage first (webhooks and APIServices before custom resources), then kinds
    backwards."""
    late = obj["kind"] in LATE_KINDS
    return -stage(obj["apiVersion"], obj["kind"]), 0 if late else 1, -rank(obj["kind"])


def ident(obj: Obj) -> str:
    ns = obj["metadata"].get("namespace")
    return f"{obj['kind']}/{ns + '/' if ns else ''}{obj['metadata']['name']}"


def ref_of(obj: Obj) -> Ref:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"]


def parse_kind(ref: str) -> tuple[str, str]:
    """``"apps/v1/Deployment"`` → ``("apps/v1", "Deployment")``; ``"v1/Service"`` → ``("v1", "Service")``."""
    api_version, _, kind = ref.rpartition("/")
    if not api_version or not kind:
        raise ValueError(f"expected <apiVersion>/<Kind>, got {ref!r}")
    return api_version, kind


def kinds_of(objects: list[Obj], extra: Iterable[str]) -> set[tuple[str, str]]:
    return {(o["apiVersion"], o["kind"]) for o in objects} | {parse_kind(k) for k in extra}


#: Kinds of the last apply stage (with custom resources): they need the workloads serving them, and an uninstall
#: deletes them first, waiting until they are gone, while the operators that hold their finalizers still run.
LATE_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService")
#: API groups of Kubernetes itself (besides those ending in ``.k8s.io``): their kinds are not custom resources.
BUILTIN_GROUPS = ("", "apps", "batch", "policy", "autoscaling")


def stage(api_version: str, kind: str) -> int:
    """The apply stage of a kind: 0 Namespaces and CRDs, 1 the rest, 2 webhooks, APIServices and custom
    resources. An uninstall runs the stages backwards."""
    if kind in ("Namespace", "CustomResourceDefinition"):
        return 0
    group = api_version.rpartition("/")[0]
    if kind in LATE_KINDS or not (group in BUILTIN_GROUPS or group.endswith(".k8s.io")):
        return 2
    return 1


def group_key(ref: Ref) -> tuple[str, str, str, str]:
    """``ref`` without its API version: an object a role moves to another version of its group stays the same."""
    api_version, kind, namespace, name = ref
    return api_version.rpartition("/")[0], kind, namespace, name


def stale_refs(recorded: Iterable[Iterable[str]], current: Iterable[Iterable[str]]) -> list[Ref]:
    """What a module's prune looks at: the objects its recorded inventory has and this run's inventory lacks (the
    one answer for the run and its preview)."""
    now = {group_key(tuple(r)) for r in current}  # type: ignore[arg-type]
    return [tuple(r) for r in recorded if group_key(tuple(r)) not in now]  # type: ignore[misc]


def obj_of(ref: Iterable[str]) -> Obj:
    api_version, kind, namespace, name = tuple(ref)
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, **({"namespace": namespace}
                                                                                  if namespace else {})}}


def load_definitions(definition: str | Iterable[Any]) -> list[Obj]:
    """Objects from a multi-document YAML string or a list (nested lists and ``List`` kinds flattened)."""
    docs = yaml_c.load_all(definition) if isinstance(definition, str) else list(definition)
    out: list[Obj] = []
    for doc in docs:
        if not doc:
            continue
        if isinstance(doc, list):
            out += load_definitions(doc)
        elif doc.get("kind", "").endswith("List") and "items" in doc:
            out += load_definitions(doc["items"])
        else:
            out.append(doc)
    return out


#: The Accept header of a list that returns only the objects' metadata.
PARTIAL_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def applied_by_installer(item: Any) -> bool:
    """Whether the installer's field manager applied the object (not, e.g., Endpoints that the endpoints
    controller created for a labelled Service and gave that Service's labels)."""
    return installer_managed(item.metadata)


def installer_managed(meta: Any) -> bool:
    """Whether the installer's field manager wrote to the object whose metadata is ``meta``."""
    return any(f.get("manager") == FIELD_MANAGER for f in meta.get("managedFields") or [])
