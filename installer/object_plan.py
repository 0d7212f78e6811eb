"""``python -m installer plan --objects``: what a reconcile would do, object by object.

The objects come from :mod:`installer.render` (each planned module's real playbook, its ``ks_*`` tasks recorded).
Offline, they are listed (or printed as manifests). Against the cluster, each is what ``ks_manifest`` would apply
(the same labels and applied-digest annotation): one the installer would leave alone (same digest, nobody wrote to
it since) is unchanged; any other is applied in dry-run mode (``dryRun=All``, field manager ``ks-installer``) and
the live object is compared with the result, field by field, without what the API server changes on every write.
Objects in a module's recorded inventory that its run no longer renders are pruned, and an uninstall deletes, by
the rules of :class:`installer.manifests.Manifests` (read, never written here): PVCs, CRDs and namespaces holding
PVCs are kept, and what a purge would add is said. Secrets show key names only; generated credentials show as
``(generated)``.
"""

from __future__ import annotations

import base64
import copy
import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.adoption import dropped_by_takeover, legacy_entries, now_rfc3339, releases_to_retire
from installer.config.secrets import REDACTED, SECRET_KEY, redact_text, redact_texts
from installer.core_secret import ADMIN, SECRET_NAME, USER_API
from installer.foreign import eviction
from installer.manifests import (
    KIND_ORDER,
    NEVER_RECREATED,
    ORPHANED_KINDS,
    PLANTED_NOTE,
    ApplyResult,
    Manifests,
    Obj,
    api_reason,
    digest,
    ident,
    immutable_fields,
    ref_of,
    unchanged_since_applied,
)
from installer.render import GENERATORS, Rendered
from installer.render_plugins import GENERATED, GENERATED_CA
from installer.settings import APPLIED_ANNOTATION, FIELD_MANAGER, MANAGED_BY, MODULE_LABEL

#: Metadata the API server sets or moves on every write (and the installer's own bookkeeping annotation).
VOLATILE_META = ("managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink")
VOLATILE_ANNOTATIONS = (APPLIED_ANNOTATION, "deployment.kubernetes.io/revision")
MAX_VALUE = 160
SYMBOL = {"create": "+", "update": "~", "adopt": "^", "recreate": "±", "delete": "-", "kept": "=", "roll": "↻",
          "error": "!"}
CHANGES = ("create", "update", "adopt", "recreate", "delete", "roll")


# --- Field-level diff (pure) ----------------------------------------------------------------------------------


def selector_change(live: Obj, body: Obj) -> str | None:
    """For a workload whose takeover makes its selector the render's: the change (which the API server refuses,
    so the run recreates it), else None."""
    if body["kind"] not in ORPHANED_KINDS:
        return None
    old = (live.get("spec") or {}).get("selector")
    new = (body.get("spec") or {}).get("selector")
    if new is None or normalised_selector(old) == normalised_selector(new):
        return None
    return f"spec.selector: {_show(old)} -> {_show(new)}"


def normalised_selector(selector: Any) -> Any:
    """A label selector without empty parts (``matchExpressions: []`` is no expression)."""
    return {k: v for k, v in (selector or {}).items() if v} if isinstance(selector, dict) else selector


def foreign_removed(obj: Obj, after: Obj, body: Obj) -> list[str]:
    """What the run's apply removes of other writers' fields (installer.foreign, as :class:`Manifests` decides it),
    judged on the dry-run apply's result."""
    plan = eviction(obj["kind"], (after.get("metadata") or {}).get("managedFields") or [], now_rfc3339(), body)
    return [f"removed fields of manager {m}: {', '.join(p)}" for m, p in sorted((plan.removed if plan else {}).items())]


def recreate_note(kind: str, fields: list[str]) -> str:
    pods = "; its pods are left to the new one" if kind in ORPHANED_KINDS else ""
    return f"{', '.join(fields)} cannot change: deleted and created again by the run{pods}"



def normalised(obj: Obj | None) -> Obj | None:
    """``obj`` without status and what the API server changes on every write."""
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata") or {}
    for key in VOLATILE_META:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    for key in VOLATILE_ANNOTATIONS:
        annotations.pop(key, None)
    if "annotations" in meta and not annotations:
        meta.pop("annotations")
    return out


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":")) if not isinstance(value, str) else json.dumps(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


def _credential(key: Any) -> bool:
    return isinstance(key, str) and bool(SECRET_KEY.search(key))


def _named(items: list[Any]) -> bool:
    names = [i.get("name") for i in items if isinstance(i, dict)]
    return len(names) == len(items) and all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def _text_diff(path: str, old: str, new: str) -> list[str]:
    """A unified diff of two texts (a config file in a ConfigMap), with the values of credential keys redacted."""
    old, new = redact_texts(old, new)
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1)
    return [f"{path}:"] + [f"    {line}" for line in list(lines)[2:]]


def _value_diff(path: str, old: Any, new: Any, redacted: bool) -> list[str]:
    if redacted:
        return [f"{path}: {REDACTED} (changed)" if old is not None and new is not None
                else f"{path}: {'+' if old is None else '-'} {REDACTED}"]
    if old is None:
        return [f"{path}: + {_show(new)}"]
    if new is None:
        return [f"{path}: - {_show(old)}"]
    if isinstance(old, str) and isinstance(new, str) and ("\n" in old or "\n" in new):
        return _text_diff(path, old, new)
    return [f"{path}: {_show(old)} -> {_show(new)}"]


def diff(old: Any, new: Any, path: str = "", redacted: bool = False) -> list[str]:
    """The fields that differ between ``old`` and ``new``, one line each (``path: old -> new``, ``+``/``-`` for
    a field added or removed): maps key by key, lists of named items (containers, ports, env) by name, other
    lists as a whole. Values under a credential-looking key are never shown."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            out += diff(old.get(key), new.get(key), sub, redacted or _credential(key))
        return out
    if isinstance(old, list) and isinstance(new, list) and _named(old) and _named(new):
        before, after = {i["name"]: i for i in old}, {i["name"]: i for i in new}
        out = []
        for name in list(before) + [n for n in after if n not in before]:
            item = {**(before.get(name) or {}), **(after.get(name) or {})}
            hidden = redacted or (_credential(name) and "value" in item)  # an env variable holding a credential
            out += diff(before.get(name), after.get(name), f"{path}[{name}]", hidden)
        if not out and [i["name"] for i in old] != [i["name"] for i in new]:
            out.append(f"{path}: order {_show([i['name'] for i in old])} -> {_show([i['name'] for i in new])}")
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [line for i, (a, b) in enumerate(zip(old, new, strict=True))
                for line in diff(a, b, f"{path}[{i}]", redacted)]
    return _value_diff(path, old, new, redacted)


def _secret_values(obj: Obj) -> dict[str, str]:
    """A Secret's values by key (``stringData`` as ``data`` has it)."""
    data = dict(obj.get("data") or {})
    for key, value in (obj.get("stringData") or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    return data


def secret_diff(old: Obj, new: Obj) -> list[str]:
    """A Secret's difference: its keys (``changed``, ``added``, ``removed``, never a value) and its other fields."""
    before, after = _secret_values(old), _secret_values(new)
    out = [f"data.{key}: {'added' if key not in before else 'removed' if key not in after else 'changed'}"
           for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]
    rest = {k: v for k, v in old.items() if k not in ("data", "stringData")}
    return out + diff(rest, {k: v for k, v in new.items() if k not in ("data", "stringData")})


def object_diff(live: Obj, after: Obj) -> list[str]:
    """The field-level difference between a live object and what applying the manifest makes of it."""
    old, new = normalised(live), normalised(after)
    assert old is not None and new is not None
    if live.get("kind") == "Secret":
        return secret_diff(old, new)
    return diff(old, new)


def redacted_manifest(obj: Obj) -> Obj:
    """``obj`` as printed: a Secret's values replaced by ``<redacted>``, a generated CA bundle by ``(generated)``;
    elsewhere the string under a credential-named key (an env variable's value by its name) and, in the texts of a
    ConfigMap, the values of credential keys (installer.config.secrets.redact_text)."""
    out = json.loads(json.dumps(obj).replace(json.dumps(GENERATED_CA), json.dumps(GENERATED)))
    if out.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if isinstance(out.get(key), dict):
                out[key] = {k: v if v == GENERATED else REDACTED for k, v in out[key].items()}
        return out
    if out.get("kind") == "ConfigMap" and isinstance(out.get("data"), dict):
        out["data"] = {k: redact_text(v) if isinstance(v, str) else v for k, v in out["data"].items()}
    _redact_fields(out)
    return out


def _redact_fields(node: Any) -> None:
    """Hide, in place, every non-empty string under a credential-named key and every env variable's ``value``
    whose name is one."""
    if isinstance(node, dict):
        named = isinstance(node.get("name"), str) and _credential(node["name"]) and isinstance(node.get("value"), str)
        for key, value in node.items():
            if isinstance(value, str) and value and (_credential(key) or (named and key == "value")):
                node[key] = REDACTED
            else:
                _redact_fields(value)
    elif isinstance(node, list):
        for item in node:
            _redact_fields(item)


# --- The plan -------------------------------------------------------------------------------------------------


@dataclass
class ObjectChange:
    object: str
    """``Kind/namespace/name``."""
    action: str
    """create, update, adopt (made by the original installer: taken over), recreate, delete, roll, kept, unchanged
    or error."""
    fields: list[str] = field(default_factory=list)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"object": self.object, "action": self.action, "fields": self.fields, "note": self.note}


@dataclass
class ModuleObjects:
    module: str
    action: str
    objects: list[ObjectChange] = field(default_factory=list)
    manifests: list[Obj] = field(default_factory=list)
    """What the run applies, labelled as the installer applies it (for ``-o yaml``)."""
    notes: list[str] = field(default_factory=list)

    def add(self, ref: str, action: str, fields: Iterable[str] = (), note: str = "") -> None:
        self.objects.append(ObjectChange(ref, action, list(fields), note))

    @property
    def changes(self) -> list[ObjectChange]:
        return [c for c in self.objects if c.action in CHANGES or c.action == "error"]

    def to_json(self) -> dict[str, Any]:
        return {"module": self.module, "action": self.action, "objects": [o.to_json() for o in self.objects],
                "notes": self.notes}


@dataclass
class ObjectPlan:
    modules: list[ModuleObjects] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    offline: bool = False

    @property
    def changed(self) -> bool:
        return any(c.action in CHANGES for m in self.modules for c in m.objects)

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(c.action == "error" for m in self.modules for c in m.objects)

    @property
    def exit_code(self) -> int:
        """0: nothing would change, 1: changes, 2: errors (as ``kubectl diff``)."""
        return 2 if self.failed else 1 if self.changed else 0

    def to_json(self) -> dict[str, Any]:
        return {"offline": self.offline, "changed": self.changed, "errors": self.errors,
                "modules": [m.to_json() for m in self.modules]}

    def text(self) -> str:
        lines = []
        for module in self.modules:
            shown = module.objects if self.offline else [o for o in module.objects if o.action != "unchanged"]
            if not shown and not module.notes:
                continue
            count = f": {len(module.objects)} objects" if self.offline else ""
            lines.append(f"{module.module} ({module.action}){count}")
            for change in shown:
                note = f" ({change.note})" if change.note else ""
                lines.append(f"  {SYMBOL.get(change.action, ' ')} {_spaced(change.object)}{note}")
                lines += [f"      {line}" for line in change.fields]
            lines += [f"  note: {n}" for n in module.notes]
        lines += [f"error: {e}" for e in self.errors]
        counts: dict[str, int] = {}
        for module in self.modules:
            for change in module.objects:
                counts[change.action] = counts.get(change.action, 0) + 1
        summary = ", ".join(f"{counts[a]} {'to ' + a if a in CHANGES else a}" for a in (*CHANGES, "kept", "error")
                            if counts.get(a))
        if lines and summary:
            lines.append(summary)
        return "\n".join(lines)


def _spaced(ref: str) -> str:
    """``Kind/ns/name`` as ``Kind ns/name``."""
    kind, _, rest = ref.partition("/")
    return f"{kind} {rest}"


def _ordered(objects: list[Obj]) -> list[Obj]:
    return sorted(objects, key=lambda o: KIND_ORDER.index(o["kind"]) if o["kind"] in KIND_ORDER else len(KIND_ORDER))


def _generated_secrets(rendered: Rendered) -> list[tuple[str, list[str], dict[str, Any]]]:
    """(``Kind/ns/name``, generated keys, the call's arguments) of what the run's generators write."""
    from installer.ansible_tasks import ks_webhook_cert

    out = []
    for call in rendered.calls_of(*GENERATORS):
        args = call["args"]
        ns = args.get("namespace") or ""
        if call["module"] == "ks_random_secret":
            out.append((f"Secret/{ns}/{args['name']}", [str(args["key"])], call))
        elif call["module"] == "ks_core_secret":
            out.append((f"Secret/{ns}/{SECRET_NAME}", ["secret", "token", "initAdminPassword"], call))
        else:
            spec = ks_webhook_cert.ARGUMENT_SPEC
            keys = args.get("keys") or spec["keys"]["default"]
            out.append((f"Secret/{ns}/{args.get('secret') or spec['secret']['default']}", list(keys), call))
    return out


def offline_plan(rendered: dict[str, Rendered], actions: dict[str, str]) -> ObjectPlan:
    """Every object each rendered module applies (a list, no cluster to compare with)."""
    plan = ObjectPlan(offline=True)
    for name, run in rendered.items():
        module = ModuleObjects(name, actions[name])
        plan.modules.append(module)
        if run.failure:
            task, msg = run.failure
            plan.errors.append(f"{name}: task {task!r} failed: {msg}")
            continue
        if run.action == "uninstall":
            kinds = sorted({k for c in run.manifests("absent") for k in c.get("kinds") or []}
                           | {f"{o['apiVersion']}/{o['kind']}" for c in run.manifests("absent") for o in c["objects"]})
            module.notes.append("deletes the module's labelled objects of the kinds " + ", ".join(kinds)
                                + "; keeps its PVCs, CRDs and namespaces holding PVCs unless purged")
            continue
        for obj in _ordered(run.objects()):
            module.add(ident(obj), "create")
            labelled = copy.deepcopy(obj)
            labelled["metadata"].setdefault("labels", {}).update({**MANAGED_BY, MODULE_LABEL: name})
            labelled["metadata"].setdefault("annotations", {})[APPLIED_ANNOTATION] = digest(labelled)
            module.manifests.append(labelled)
        for ref, keys, call in _generated_secrets(run):
            module.add(ref, "create", note=f"keys {', '.join(keys)}: {GENERATED}")
            if call["module"] == "ks_core_secret":
                module.add(f"User/{ADMIN}", "create", note="once, its password from initAdminPassword")
            kind, ns, secret = ref.split("/", 2)
            module.manifests.append({"apiVersion": "v1", "kind": kind, "metadata": {
                "name": secret, "namespace": ns, "labels": {**MANAGED_BY, MODULE_LABEL: name}},
                "stringData": dict.fromkeys(keys, GENERATED)})
    return plan


class _DryRun(Manifests):
    """:class:`Manifests` that only reads: what it would delete is recorded (if it exists), nothing is waited for."""

    def _delete(self, obj: Obj, result: ApplyResult, propagation: str = "Background") -> None:
        if self._get(self._resource(obj["apiVersion"], obj["kind"]), obj) is None:
            return
        result.deleted.append(ident(obj))
        result.deleted_refs.append(ref_of(obj))

    def _wait_gone(self, objects: list[Obj], timeout: int) -> None:
        return


def _bool(value: Any, default: bool | None) -> bool | None:
    if value is None:
        return default
    return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "yes", "1", "on")


class ClusterPlanner:
    """Compares each rendered module with the cluster (reads and dry-run applies only)."""

    def __init__(self, api: Any, records: dict[str, Any]) -> None:
        self.api = api
        self.records = records
        self._versions: dict[tuple[str, str, str], dict[tuple[str, str], Obj]] = {}
        self.crds: set[str] = set()
        """Kinds (``apiVersion/Kind``) whose CRDs the plan creates: objects of them cannot be dry-run yet."""
        self.namespaces: set[str] = set()
        """Namespaces the plan creates."""

    def plan(self, rendered: dict[str, Rendered], steps: dict[str, Any]) -> ObjectPlan:
        out = ObjectPlan()
        for run in rendered.values():
            for obj in run.objects() if run.action != "uninstall" else ():
                if obj["kind"] == "CustomResourceDefinition":
                    spec = obj.get("spec") or {}
                    self.crds |= {f"{spec.get('group')}/{v.get('name')}/{(spec.get('names') or {}).get('kind')}"
                                  for v in spec.get("versions") or []}
        for name, run in rendered.items():
            step = steps[name]
            module = ModuleObjects(name, step.action.value)
            out.modules.append(module)
            if run.failure:
                task, msg = run.failure
                out.errors.append(f"{name}: task {task!r} failed: {msg}")
                continue
            try:
                if run.action == "uninstall":
                    self._uninstall(run, module, bool(step.purge))
                else:
                    self._apply(run, module)
            except Exception as exc:  # an API error: the plan cannot tell, say why
                reason = api_reason(exc) if hasattr(exc, "body") else f"{type(exc).__name__}: {exc}"
                out.errors.append(f"{name}: {reason}")
        return out

    # Install and upgrade.
    def _apply(self, run: Rendered, module: ModuleObjects) -> None:
        manifests = _DryRun(self.api, run.module)
        removed: dict[str, str] = {}
        for call in run.manifests("absent"):
            result = manifests.delete(call["objects"], purge=bool(_bool(call.get("purge"), False)),
                                      kinds=call.get("kinds") or (), tenants=call.get("tenants") or ())
            removed |= dict.fromkeys(result.deleted, "delete")
        applied = set()
        for obj in _ordered(run.objects()):
            applied.add(ident(obj))
            self._object(manifests, obj, module, recreated=ident(obj) in removed)
        for ref in removed:
            if ref not in applied:
                module.add(ref, "delete")
        self._prune(manifests, run, module)
        if run.action == "install":
            module.notes += [f"retires Helm release {r} (its release records, not its objects)"
                             for r in releases_to_retire(self.api, run.module)]
        self._generated(run, module)
        self._rollouts(run, module)
        self._metadata(run, module)

    def _kind_served(self, manifests: _DryRun, obj: Obj) -> Any:
        try:
            return manifests._resource(obj["apiVersion"], obj["kind"])
        except Exception:  # not served (yet)
            return None

    def _object(self, manifests: _DryRun, obj: Obj, module: ModuleObjects, recreated: bool) -> None:
        ref, meta = ident(obj), obj["metadata"]
        res = self._kind_served(manifests, obj)
        if res is None:
            if f"{obj['apiVersion']}/{obj['kind']}" in self.crds:
                module.add(ref, "create", note="its CustomResourceDefinition is created first")
                module.manifests.append(manifests._labelled(obj, True))
                return
            module.add(ref, "error", note=f"kind {obj['apiVersion']}/{obj['kind']} is not served")
            return
        live_meta: Obj | None
        adopt = True
        if obj["kind"] == "Namespace":
            live = manifests._get(res, obj)
            live_meta = live.to_dict()["metadata"] if live is not None else None
            owner = ((live_meta or {}).get("labels") or {}).get(MODULE_LABEL)
            adopt = live_meta is None or owner == module.module
            if live_meta is not None and not adopt and owner:
                return  # another module's namespace: the apply leaves it to its owner
            if live_meta is None:
                self.namespaces.add(meta["name"])
        else:
            key = (module.module, obj["apiVersion"], obj["kind"])
            if key not in self._versions:
                self._versions[key] = manifests._versions(res)
            live_meta = self._versions[key].get((meta.get("namespace") or "", meta["name"]))
        body = manifests._labelled(obj, adopt)
        body["metadata"].setdefault("annotations", {})[APPLIED_ANNOTATION] = digest(manifests._labelled(obj, adopt))
        module.manifests.append(body)
        if recreated:
            module.add(ref, "recreate", note="deleted and applied again by the run")
            return
        if live_meta is not None and unchanged_since_applied(live_meta, body["metadata"]["annotations"][
                APPLIED_ANNOTATION], body):
            module.add(ref, "unchanged")
            return
        live = manifests._get(res, obj)
        if live_meta is None and live is not None and obj["kind"] == "ServiceAccount" and manifests.planted(
                live.to_dict()["metadata"]):
            module.add(ref, "recreate", note=PLANTED_NOTE.format(module=module.module))
            return
        try:
            after = json.loads(res.server_side_apply(
                body=body, name=meta["name"], namespace=meta.get("namespace"), field_manager=FIELD_MANAGER,
                force_conflicts=True, dry_run="All", serialize=False).data)
        except Exception as exc:
            status = getattr(exc, "status", None)
            if live is None and status == 404 and meta.get("namespace") in self.namespaces:
                module.add(ref, "create", note=f"namespace {meta['namespace']} is created first")
                return
            if live is not None and status == 422:
                self._refused(ref, obj, live.to_dict(), body, exc, module)
                return
            module.add(ref, "error", note=api_reason(exc) if hasattr(exc, "body") else str(exc))
            return
        if live is None:
            module.add(ref, "create", note=self._generated_note(obj))
            return
        current = live.to_dict()
        fields = object_diff(current, after)
        legacy = sorted({e["manager"] for e in legacy_entries(current["metadata"])})
        if legacy and MODULE_LABEL not in (current["metadata"].get("labels") or {}):
            if (changed := selector_change(current, body)) is not None:
                module.add(ref, "recreate", [changed], note=recreate_note(obj["kind"], ["spec.selector"]))
                return
            dropped = [f"{path}: removed (only {', '.join(legacy)} set it)" for path in dropped_by_takeover(
                current, body)]
            module.add(ref, "adopt", [*fields, *dropped, *foreign_removed(obj, after, body)],
                       note=f"made by {', '.join(legacy)}: taken over in place")
            return
        fields += foreign_removed(obj, after, body)
        module.add(ref, "update" if fields else "unchanged", fields)

    @staticmethod
    def _refused(ref: str, obj: Obj, current: Obj, body: Obj, exc: Any, module: ModuleObjects) -> None:
        """A dry-run apply the API server refused (422) for an object that exists: one whose fields cannot change is
        recreated by the run (a PVC kept as it is); the original installer's object whose fields merged with the
        render are invalid is taken over first, which the dry-run cannot show; anything else is an error."""
        fields = immutable_fields(exc)
        legacy = sorted({e["manager"] for e in legacy_entries(current["metadata"])})
        if fields and obj["kind"] == "PersistentVolumeClaim":
            module.add(ref, "kept", note=f"{', '.join(fields)} cannot change: kept as it is, reported")
        elif fields and obj["kind"] not in NEVER_RECREATED:
            module.add(ref, "recreate", note=recreate_note(obj["kind"], fields))
        elif legacy and MODULE_LABEL not in (current["metadata"].get("labels") or {}):
            dropped = [f"{path}: removed (only {', '.join(legacy)} set it)"
                       for path in dropped_by_takeover(current, body)]
            module.add(ref, "adopt", dropped, note=f"made by {', '.join(legacy)}: taken over in place; its fields "
                       f"merged with the render are refused ({api_reason(exc)}), so the takeover moves them first "
                       "and the result is the render")
        else:
            module.add(ref, "error", note=api_reason(exc))

    @staticmethod
    def _generated_note(obj: Obj) -> str:
        return GENERATED if GENERATED_CA in json.dumps(obj) else ""

    def _prune(self, manifests: _DryRun, run: Rendered, module: ModuleObjects) -> None:
        record = self.records.get(run.module)
        if record is None:
            return
        rendered = {ref_of(o) for o in run.objects()}
        prunable = run.pruned_kinds()
        stale = [{"apiVersion": a, "kind": k, "metadata": {"name": n, **({"namespace": ns} if ns else {})}}
                 for a, k, ns, n in record.inventory if (a, k, ns, n) not in rendered]
        result = ApplyResult()
        for obj in _ordered(stale)[::-1]:
            if (obj["apiVersion"], obj["kind"]) in prunable:  # else the run leaves it (created once, then the user's)
                manifests._remove(obj, result, purge=False)
        for ref in result.deleted:
            module.add(ref, "delete", note="no longer rendered (pruned)")
        for ref in result.kept:
            module.add(ref, "kept", note="no longer rendered; kept by the deletion policy")

    def _generated(self, run: Rendered, module: ModuleObjects) -> None:
        """The Secrets (and admin User) the run's generators write: created, completed, or left as they are."""
        core = client.CoreV1Api(self.api)
        for ref, keys, call in _generated_secrets(run):
            _, ns, name = ref.split("/", 2)
            try:
                live = core.read_namespaced_secret(name, ns)
            except Exception as exc:
                if getattr(exc, "status", None) != 404:
                    raise
                live = None
            args = call["args"]
            if live is None:
                module.add(ref, "create", note=f"keys {', '.join(keys)}: {GENERATED}")
                continue
            data = live.data or {}
            labels = live.metadata.labels or {}
            labelled = labels.get(MODULE_LABEL) == run.module
            meta = self.api.sanitize_for_serialization(live.metadata)
            legacy = [] if MODULE_LABEL in labels else sorted({e["manager"] for e in legacy_entries(meta)})
            action, note = ("adopt", f"made by {', '.join(legacy)}: taken over, its values kept") if legacy else (
                "update", "")
            if call["module"] == "ks_webhook_cert":
                reason = (call.get("result") or {}).get("reason", "kept")
                if reason not in ("kept", "labelled"):
                    module.add(ref, "update", [f"data.{k}: changed {GENERATED}" for k in keys], note=reason)
                elif reason == "labelled":
                    module.add(ref, action, [f"metadata.labels.{MODULE_LABEL}: + {run.module}"], note=note)
                continue
            fields = [f"data.{k}: added {GENERATED}" for k in keys if k not in data]
            if call["module"] == "ks_core_secret":
                fields = self._core_secret_fields(data, args)
            if not labelled:
                fields.append(f"metadata.labels.{MODULE_LABEL}: + {run.module}")
            if fields:
                module.add(ref, action, fields, note=note)
        if run.calls_of("ks_core_secret"):
            try:
                DynamicClient(self.api).resources.get(api_version=USER_API, kind="User").get(name=ADMIN)
            except (NotFoundError, ResourceNotFoundError):
                module.add(f"User/{ADMIN}", "create", note="its password from initAdminPassword")

    @staticmethod
    def _core_secret_fields(data: dict[str, str], args: dict[str, Any]) -> list[str]:
        """What ensure_core_secret would change in ``kubesphere-secret`` (key names only)."""
        current = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
        fields = []
        jwt = args.get("jwt_secret") or ""
        if "secret" not in current:
            fields += [f"data.secret: added {GENERATED}", "data.token: changed"]
        elif jwt and jwt != current["secret"]:
            fields += ["data.secret: changed", "data.token: changed"]
        return fields

    def _rollouts(self, run: Rendered, module: ModuleObjects) -> None:
        from ansible.module_utils.parsing.convert_bool import boolean
        from kubernetes import client

        from installer.rollout import CONFIG_HASH, rolls
        apps = client.AppsV1Api(self.api)
        for call in run.calls_of("ks_rollout"):
            args = call["args"]
            keep_unstamped = boolean(args.get("keep_unstamped") or False)
            for name in args.get("deployments") or []:
                try:
                    dep = apps.read_namespaced_deployment(name, args["namespace"])
                except Exception:
                    continue  # missing: nothing to roll (its creation is listed)
                annotations = (dep.spec.template.metadata.annotations if dep.spec.template.metadata else None) or {}
                if rolls(annotations.get(CONFIG_HASH), str(args.get("value")), keep_unstamped):
                    module.add(f"Deployment/{args['namespace']}/{name}", "roll",
                               note=f"pod template annotation {CONFIG_HASH} changes: its pods restart")

    def _metadata(self, run: Rendered, module: ModuleObjects) -> None:
        """Labels and annotations ``ks_metadata`` would set on (or take off) objects the installer does not own."""
        dyn = DynamicClient(self.api)
        for call in run.calls_of("ks_metadata"):
            args = call["args"]
            res = dyn.resources.get(api_version=args.get("api_version") or "v1", kind=args.get("kind") or "Namespace")
            for name in args.get("names") or []:
                try:
                    live = res.get(name=name, namespace=args.get("namespace")).to_dict()
                except NotFoundError:
                    continue
                fields = []
                for section in ("labels", "annotations"):
                    have = (live["metadata"].get(section) or {})
                    for key, value in (args.get(section) or {}).items():
                        present = (args.get("state") or "present") == "present"
                        if present and have.get(key) != str(value):
                            fields.append(f"metadata.{section}.{key}: {_show(have.get(key))} -> {_show(str(value))}"
                                          if key in have else f"metadata.{section}.{key}: + {_show(str(value))}")
                        elif not present and key in have:
                            fields.append(f"metadata.{section}.{key}: - {_show(have[key])}")
                if fields:
                    ns = args.get("namespace")
                    module.add(f"{res.kind}/{ns + '/' if ns else ''}{name}", "update", fields)

    # Uninstall.
    def _uninstall(self, run: Rendered, module: ModuleObjects, purge: bool) -> None:
        manifests = _DryRun(self.api, run.module)
        deleted: dict[str, None] = {}
        kept: dict[str, str] = {}
        purged: dict[str, None] = {}
        for call in run.manifests("absent"):
            args = {"kinds": call.get("kinds") or (), "tenants": call.get("tenants") or ()}
            explicit = _bool(call.get("purge"), None)
            result = manifests.delete(call["objects"], purge=purge if explicit is None else explicit, **args)
            deleted |= dict.fromkeys(result.deleted)
            kept |= {k: "" for k in result.kept}
            if not purge and explicit is None:
                purged |= dict.fromkeys(manifests.delete(call["objects"], purge=True, **args).deleted)
        for ref in deleted:
            module.add(ref, "delete")
        for ref in kept:
            base = re.sub(r" \(.*\)$", "", ref)
            if base in deleted:
                continue
            why = ref[len(base):].strip(" ()")
            module.add(base, "kept", note=why or "kept on uninstall")
        extra = [ref for ref in purged if ref not in deleted]
        for ref in extra:
            existing = next((o for o in module.objects if o.object == ref), None)
            note = "a purge annotation would delete it"
            if existing is not None:
                existing.note = f"{existing.note}; {note}" if existing.note else note
            else:
                module.add(ref, "kept", note=note)
        self._metadata(run, module)
