"""``python -m installer plan --objects``: what a reconcile would do, object by object.

The objects come from :mod:`installer.preview.render` (each planned module's real playbook, its ``ks_*`` tasks
recorded). Offline, they are listed (or printed as manifests). Against the cluster, the decisions are the run's own:
each module's objects go through the run's own decisions (installer.preview.foresight) as a dry run (``dryRun=All``,
nothing written), whose change set says what the run does to each (unchanged, created, updated, adopted, recreated,
kept); here the live object is compared with the dry-run result, field by field, without what the API server changes on
every write. Objects in a module's recorded inventory that its run no longer renders are pruned, and an uninstall
deletes, by the same dry run's deletion policy: PVCs, CRDs and namespaces holding PVCs are kept, and what a purge
would add is said. What a ``ks_*`` task would do is that task's own ``preview()``. Secrets show key names only;
generated credentials show as ``(generated)``.
"""

from __future__ import annotations

import base64
import copy
import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from installer.ansible_tasks import generators, preview_params
from installer.ansible_tasks import task as task_module
from installer.ansible_tasks._record import GENERATED, GENERATED_CA
from installer.config.secrets import REDACTED, credential_key, hidden, redact_keys, redact_text, redact_texts
from installer.engine.adoption import releases_to_retire
from installer.modules import get_module
from installer.objects.api_errors import api_reason
from installer.objects.change_set import Foreseen
from installer.objects.manifests import as_applied
from installer.objects.refs import KIND_ORDER, Obj, Ref, ident, ref_of
from installer.objects.repair import shown
from installer.objects.results import Change
from installer.preview.foresight import Foresight
from installer.preview.render import Rendered
from installer.settings import APPLIED_ANNOTATION

#: Metadata the API server sets or moves on every write (and the installer's own bookkeeping annotation).
VOLATILE_META = ("managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink")
VOLATILE_ANNOTATIONS = (APPLIED_ANNOTATION, "deployment.kubernetes.io/revision")
SYMBOL = {"create": "+", "update": "~", "adopt": "^", "recreate": "±", "delete": "-", "kept": "=", "roll": "↻",
          "error": "!"}
CHANGES = ("create", "update", "adopt", "recreate", "delete", "roll")


# --- Field-level diff (pure) ----------------------------------------------------------------------------------


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


def _named(items: list[Any]) -> bool:
    names = [i.get("name") for i in items if isinstance(i, dict)]
    return len(names) == len(items) and all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def _text_diff(path: str, old: str, new: str) -> list[str]:
    """A unified diff of two texts (a config file in a ConfigMap), with the values of credential keys redacted."""
    old, new = redact_texts(old, new)
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1)
    return [f"{path}:"] + [f"    {line}" for line in list(lines)[2:]]


def _value_diff(path: str, old: Any, new: Any, redacted: bool) -> list[str]:
    if redacted and (hidden(old) or hidden(new)):
        return [f"{path}: {REDACTED} (changed)" if old is not None and new is not None
                else f"{path}: {'+' if old is None else '-'} {REDACTED}"]
    if old is None:
        return [f"{path}: + {shown(new)}"]
    if new is None:
        return [f"{path}: - {shown(old)}"]
    if isinstance(old, str) and isinstance(new, str) and ("\n" in old or "\n" in new):
        return _text_diff(path, old, new)
    return [f"{path}: {shown(old)} -> {shown(new)}"]


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
            out += diff(old.get(key), new.get(key), sub, redacted or credential_key(key))
        return out
    if isinstance(old, list) and isinstance(new, list) and _named(old) and _named(new):
        before, after = {i["name"]: i for i in old}, {i["name"]: i for i in new}
        out = []
        for name in list(before) + [n for n in after if n not in before]:
            item = {**(before.get(name) or {}), **(after.get(name) or {})}
            secret = redacted or (credential_key(name) and "value" in item)  # an env variable holding a credential
            out += diff(before.get(name), after.get(name), f"{path}[{name}]", secret)
        if not out and [i["name"] for i in old] != [i["name"] for i in new]:
            out.append(f"{path}: order {shown([i['name'] for i in old])} -> {shown([i['name'] for i in new])}")
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
    elsewhere the credentials as every output hides them (installer.config.secrets.redact_keys: the value under a
    credential-named key, whole; an env variable's value by its name), and in the texts of a ConfigMap the same,
    line by line (installer.config.secrets.redact_text)."""
    out = json.loads(json.dumps(obj).replace(json.dumps(GENERATED_CA), json.dumps(GENERATED)))
    if out.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if isinstance(out.get(key), dict):
                out[key] = {k: v if v == GENERATED else REDACTED for k, v in out[key].items()}
        return out
    if out.get("kind") == "ConfigMap" and isinstance(out.get("data"), dict):
        out["data"] = {k: redact_text(v) if isinstance(v, str) else v for k, v in out["data"].items()}
    shown: Obj = redact_keys(out)
    return shown


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


def previewed() -> tuple[tuple[str, ...], ...]:
    """The ``ks_*`` tasks a preview asks what they would do (each its ``preview()``), in the order the plan lists
    them: those that generate credentials, ks_rollout, ks_metadata, ks_alert_rules."""
    return generators(), ("ks_rollout",), ("ks_metadata",), ("ks_alert_rules",)


def task_changes(run: Rendered, api: Any, groups: Iterable[tuple[str, ...]] | None = None) -> list[Change]:
    """What the run's ``ks_*`` task calls would change, each task's own ``preview(args, api, recorded)`` (``api``
    None: offline, what they write; ``groups``: those tasks only, default :func:`previewed`)."""
    out: list[Change] = []
    for names in groups if groups is not None else previewed():
        for call in run.calls_of(*names):
            task = task_module(call["module"])
            out += task.preview(call["args"], api, call.get("result"))
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
            module.notes.append("deletes what the module made (its recorded inventory); keeps its PVCs, CRDs and "
                                "namespaces holding PVCs unless purged")
            continue
        for obj in _ordered(run.objects()):
            module.add(ident(obj), "create")
            module.manifests.append(as_applied(obj, name))
        for change in task_changes(run, None, (generators(),)):
            module.add(change.ref, change.action, change.fields, change.note)
            if change.body is not None:
                module.manifests.append(change.body)
    return plan


def _bool(value: Any, default: bool | None) -> bool | None:
    if value is None:
        return default
    return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "yes", "1", "on")


class ClusterPlanner:
    """Compares each rendered module with the cluster: the run's own decisions as a dry run (reads and dry-run
    applies only), shown as field-level changes."""

    def __init__(self, api: Any, records: dict[str, Any]) -> None:
        self.api = api
        self.records = records
        self.foreseen = Foreseen()
        """Kinds whose CRDs the plan creates (objects of them cannot be dry-run yet), namespaces it creates."""
        self._labelled: dict[str, list[Ref]] | None = None
        """Every module's labelled objects (Manifests.labelled), read by the first install's prune."""

    def plan(self, rendered: dict[str, Rendered], steps: dict[str, Any]) -> ObjectPlan:
        out = ObjectPlan()
        for run in rendered.values():
            for obj in run.objects() if run.action != "uninstall" else ():
                if obj["kind"] == "CustomResourceDefinition":
                    spec = obj.get("spec") or {}
                    kind = (spec.get("names") or {}).get("kind")
                    self.foreseen.kinds |= {f"{spec.get('group')}/{v.get('name')}/{kind}"
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

    def _recorded(self, module: str) -> list[Any] | None:
        """The module's recorded inventory (None: no record, or one without an inventory)."""
        record = self.records.get(module)
        return list(record.inventory) if record is not None and record.inventory else None

    def _facts(self, module: str) -> dict[str, list[str]]:
        """The module's recorded objects (the UIDs it owns, what it left on them), as its run gets them."""
        record = self.records.get(module)
        return {k: list(v) for k, v in record.objects.items()} if record is not None else {}

    def _foresight(self, module: str) -> Foresight:
        """The module's objects as its run would treat them: its facts, namespaces and tenant kinds."""
        entry = get_module(module)
        return Foresight(self.api, module, self.foreseen, facts=self._facts(module), namespaces=entry.namespaces,
                         tenant_kinds=entry.tenant_kinds)

    # Install and upgrade.
    def _apply(self, run: Rendered, module: ModuleObjects) -> None:
        manifests = self._foresight(run.module)
        removed: dict[str, None] = {}
        for call in run.manifests("absent"):
            result = manifests.absent(call["objects"], self._recorded(run.module),
                                      purge=bool(_bool(call.get("purge"), False)), kinds=call.get("kinds") or ())
            removed |= dict.fromkeys(result.deleted)
        objects = run.objects()
        for change in manifests.apply(objects).changes:
            _show_change(change, module)
        applied = {ident(o) for o in objects}
        for ref in removed:
            if ref not in applied:
                module.add(ref, "delete")
        self._prune(manifests, run, module, set(removed) | applied)
        if run.action == "install":
            module.notes += [f"retires Helm release {r} (its release records, not its objects)"
                             for r in releases_to_retire(self.api, run.module)]
        for change in task_changes(run, self.api):
            _show_change(change, module)

    def _prune(self, manifests: Foresight, run: Rendered, module: ModuleObjects, shown: set[str]) -> None:
        """What the run's prune deletes (Manifests.prune_inventory, the run's own): what the module's recorded
        inventory (for an install, with the module's labelled objects: Manifests.prune_base) has and its run's
        inventory (what it renders and generates) lacks."""
        install = run.action == "install"
        recorded = self._recorded(run.module)
        if recorded is None and not install:
            return
        if install and self._labelled is None:
            self._labelled = manifests.labelled()
        current = [ref_of(o) for o in run.objects()] + generated_refs(run)
        pruned = manifests.prune_run(recorded or [], current, install, self._labelled)
        for change in pruned.changes if pruned is not None else ():
            if change.ref in shown:
                continue  # deleted by a removal of the run, shown as such
            module.add(change.ref, change.action, note="no longer rendered (pruned)" if change.action == "delete"
                       else "no longer rendered; kept by the deletion policy")

    # Uninstall.
    def _uninstall(self, run: Rendered, module: ModuleObjects, purge: bool) -> None:
        manifests = self._foresight(run.module)
        recorded = self._recorded(run.module)
        deleted: dict[str, None] = {}
        kept: dict[str, str] = {}
        purged: dict[str, None] = {}
        for call in run.manifests("absent"):
            args = {"kinds": call.get("kinds") or ()}
            explicit = _bool(call.get("purge"), None)
            result = manifests.absent(call["objects"], recorded, purge=purge if explicit is None else explicit,
                                      **args)
            deleted |= {c.ref: None for c in result.changes if c.action == "delete"}
            kept |= {c.ref: c.note for c in result.changes if c.action == "kept"}
            if not purge and explicit is None:
                purged |= dict.fromkeys(manifests.absent(call["objects"], recorded, purge=True, **args).deleted)
        for ref in deleted:
            module.add(ref, "delete")
        for ref, why in kept.items():
            if ref not in deleted:
                module.add(ref, "kept", note=why or "kept on uninstall")
        for ref in (ref for ref in purged if ref not in deleted):
            existing = next((o for o in module.objects if o.object == ref), None)
            note = "a purge annotation would delete it"
            if existing is not None:
                existing.note = f"{existing.note}; {note}" if existing.note else note
            else:
                module.add(ref, "kept", note=note)
        for change in task_changes(run, self.api, (("ks_metadata",),)):
            _show_change(change, module)


def generated_refs(run: Rendered) -> list[Any]:
    """The objects the run's generator tasks make or keep (each task's ``generated()``, as its run records them)."""
    out: list[Any] = []
    for call in run.calls_of(*generators()):
        task = task_module(call["module"])
        out += task.generated(preview_params(task.ARGUMENT_SPEC, call["args"]))
    return out


def _show_change(change: Change, module: ModuleObjects) -> None:
    """A change of the dry run as the plan shows it: the fields between the live object and the dry-run result first
    (an update that changes none is unchanged), a created object holding a generated certificate as generated."""
    if change.body is not None:
        module.manifests.append(change.body)
    fields = list(change.fields)
    if change.live is not None and change.after is not None:
        fields = object_diff(change.live, change.after) + fields
    action, note = change.action, change.note
    if action == "update" and not fields and change.after is not None:
        action = "unchanged"
    if action == "create" and not note and GENERATED_CA in json.dumps(change.body or {}):
        note = GENERATED
    module.add(change.ref, action, fields, note)
