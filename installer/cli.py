"""Command line: ``python -m installer plan|reconcile|state``.

plan       print what a reconcile would do. With ``--desired`` it needs no cluster: without
           ``--last-applied`` it plans a first install. Without ``--desired`` it plans from the live cc and
           the stored state. ``--objects``: object by object (offline: every object the planned modules apply;
           against the cluster: a dry-run apply and a field-level diff of each, what is pruned, deleted, kept);
           exit 0 when nothing would change, 1 with changes, 2 on errors.
reconcile  run one reconcile against the cluster in $KUBECONFIG (``--all`` re-runs every enabled module).
state      show the installer's stored state (secrets redacted), or reset it, whole or one module's entry.
uninstall  --all: remove every module (dependents first), then the installer's state and the cc, like
           upstream's kubesphere-delete.sh; PVCs and CRDs stay unless --purge.
images     list the images the spec deploys and the installer's own (to mirror them before an air-gapped install),
           with the spec's local_registry, namespace_override and zone applied; ``--upstream``: their public names.
"""

from __future__ import annotations

import argparse
import collections.abc
import dataclasses
import json
import os
import re
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from installer import hooklog
from installer.config import Prepared, prepare, redact
from installer.config.validate import MAX_NODES, PARSE_DEPTH, SpecError, format_errors, format_path
from installer.engine import timeline
from installer.engine.fingerprint import files_digest
from installer.engine.lease import LeaseHeld
from installer.engine.member_clusters import offline_caveat
from installer.engine.plan import Plan, records_for
from installer.engine.planning import REPAIR_STATE, STATE_TOO_NEW, STATE_UNREADABLE, Planned, plan_cc, unreadable_state
from installer.engine.reconcile import Reconciler, check_drift
from installer.engine.records import Record
from installer.engine.state import StateStore
from installer.engine.state_codec import decode
from installer.engine_settings import Settings
from installer.modules import MODULES, Module, switch_paths
from installer.objects.api_errors import api_reason
from installer.objects.cluster import ClusterConfigurations
from installer.objects.images import catalogue, spec_refs
from installer.objects.kube import ApiUnavailable, api_client
from installer.spec_structure import depth_error
from installer.version import INSTALLER_IMAGE


class UsageError(Exception):
    pass


class _TooDeep(Exception):
    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts


_MERGE = "tag:yaml.org,2002:merge"


MAX_DESIRED_BYTES = 1 << 20
"""The largest ``--desired``/``--last-applied`` file read (a cc is about 10 KB; the API server keeps an object under
1.5 MB)."""
MAX_MESSAGE = 1 << 16
"""The most of an error message printed (the errors themselves are bounded: installer.config.validate)."""
MAX_COMPOSED = 3 * MAX_NODES
"""YAML nodes (keys count) a file may compose, aliases counted as often as they are used: bounded while composing,
before anything is built or merged (a spec holds at most MAX_NODES values, with their keys)."""


class _StrictLoader(yaml.SafeLoader):
    """YAML as the API server reads it: a key given twice is an error, not "the last one wins"; merge keys
    (``<<: *anchor``) are merged. Nothing is composed deeper than PARSE_DEPTH (PyYAML's composer recurses); the size
    of what it composes is bounded before, by :func:`_prescan`."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._at: list[Any] = []  # where the composer is: keys and indexes from the root
        self._paths: dict[int, list[Any]] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if parent is None:  # a document's root
            root = super().compose_node(parent, index)
            self._paths[id(root)] = []
            return root
        part = index if isinstance(index, int) else "?" if index is None else getattr(index, "value", "?")
        self._at.append(part if isinstance(part, int | str) else "?")
        try:
            if len(self._at) > PARSE_DEPTH:
                raise _TooDeep(list(self._at))
            node = super().compose_node(parent, index)
            self._paths.setdefault(id(node), list(self._at))
            return node
        finally:
            self._at.pop()

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        merges = any(key.tag == _MERGE for key, _ in node.value)
        super().flatten_mapping(node)
        if len(node.value) > MAX_NODES:
            where = format_path(self._paths.get(id(node), ["?"]))
            what = "merge keys build" if merges else "a mapping holds"
            raise yaml.constructor.ConstructorError(None, None, f"{what} more than {MAX_NODES} keys ({where})",
                                                    node.start_mark)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue  # merged keys may be overridden: only the mapping's own keys must be unique
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, collections.abc.Hashable) and key in seen:
                where = format_path([*self._paths.get(id(node), ["?"]), str(key)])
                raise yaml.constructor.ConstructorError(None, None, f"found the key {repr(key)[:80]} twice ({where})",
                                                        key_node.start_mark)
            if isinstance(key, collections.abc.Hashable):
                seen.add(key)
        return super().construct_mapping(node, deep)


_EVENT_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _prescan(text: str) -> None:
    """Refuse a document with more than MAX_COMPOSED nodes, aliases counted with everything under their anchor, from
    LibYAML's parse events alone (fast, and nothing is built): a flow list of a million items or an alias or merge
    bomb is refused in a fraction of a second, before the strict loader composes anything."""
    anchors: dict[str, int] = {}
    open_: list[list[Any]] = []  # [size so far, anchor] of each collection being parsed

    def add(size: int, mark: Any) -> None:
        if open_:
            open_[-1][0] += size
            if open_[-1][0] <= MAX_COMPOSED:
                return
        elif size <= MAX_COMPOSED:
            return
        raise yaml.composer.ComposerError(None, None, f"too many values: more than {MAX_COMPOSED} nodes, aliases and "
                                          "merges counted as often as they are used", mark)

    for events, event in enumerate(yaml.parse(text, Loader=_EVENT_LOADER), 1):
        if events > MAX_COMPOSED:
            add(MAX_COMPOSED + 1, event.start_mark)
        if isinstance(event, yaml.AliasEvent):
            add(anchors.get(event.anchor or "", 1), event.start_mark)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                anchors[event.anchor] = 1
            add(1, event.start_mark)
        elif isinstance(event, yaml.CollectionStartEvent):
            open_.append([1, event.anchor])
        elif isinstance(event, yaml.CollectionEndEvent) and open_:
            size, anchor = open_.pop()
            if anchor:
                anchors[anchor] = size
            add(size, event.start_mark)
        elif isinstance(event, yaml.DocumentEndEvent):
            anchors.clear()


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """What PyYAML found wrong and on which lines, without the source lines it quotes (a secret may stand there)."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return str(exc)
    parts = ((exc.context, exc.context_mark), (exc.problem, exc.problem_mark))
    return "; ".join(f"line {mark.line + 1}, column {mark.column + 1}: {text}" if mark else text
                     for text, mark in parts if text)


def _read_bounded(path: str) -> str:
    """The text of a regular file of at most MAX_DESIRED_BYTES: a device (``/dev/zero``), a FIFO (which would
    block), a directory or a larger file is refused with a message, without reading more than the limit."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)  # a FIFO opens at once, unread
    except OSError as exc:
        raise UsageError(f"{path}: cannot read YAML: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
        raise UsageError(f"{path}: cannot read YAML: {what}; give a regular file")
    with os.fdopen(fd, "rb") as src:
        data = src.read(MAX_DESIRED_BYTES + 1)
    if len(data) > MAX_DESIRED_BYTES:
        raise UsageError(f"{path}: cannot read YAML: larger than {MAX_DESIRED_BYTES} bytes")
    return data.decode("utf-8")


def _load_spec(path: str) -> Any:
    try:
        text = _read_bounded(path)
        _prescan(text)
        doc = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader
    except UnicodeDecodeError as exc:  # the line, not the byte offset; no text around it (a secret may stand there)
        line = exc.object[: exc.start].count(b"\n") + 1
        raise UsageError(f"{path}: cannot read YAML: line {line}: not UTF-8 (byte {exc.object[exc.start]:#04x})") \
            from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read YAML: {exc}") from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: cannot read YAML: {_yaml_problem(exc)}") from None
    except _TooDeep as exc:  # the spec's own path, as structure_errors names values it finds too deep
        parts = exc.parts[1:] if exc.parts[0] == "spec" else exc.parts
        raise UsageError(_invalid(path, [depth_error(parts)])) from None
    if isinstance(doc, dict) and doc.get("kind") == "ClusterConfiguration":
        return doc.get("spec")
    return doc


def _valid(raw: Any, previous: dict[str, Any] | None, label: str) -> Prepared:
    prepared = prepare(raw, previous, switch_paths())
    if prepared.errors:
        raise UsageError(_invalid(label, prepared.errors))
    return prepared


def _invalid(label: str, errors: list[SpecError]) -> str:
    return f"{label} is invalid:\n{format_errors(errors)}"


def _offline_plan(args: argparse.Namespace, settings: Settings) -> tuple[Plan, Prepared]:
    def files(m: Module) -> str:
        return files_digest(m, settings.roles_dir, plays_dir=settings.playbooks_dir)

    last = _valid(_load_spec(args.last_applied), None, args.last_applied).spec if args.last_applied else None
    planned = plan_cc({"spec": _load_spec(args.desired)}, records_for(last, files) if last else {}, last, files,
                      force=args.all)
    if planned.errors:
        raise UsageError(_invalid(args.desired, planned.errors))
    assert planned.plan is not None and planned.prepared is not None
    desired = planned.prepared
    caveat = offline_caveat(last, desired.spec)
    if caveat:
        desired = dataclasses.replace(desired, warnings=[*desired.warnings, caveat])
    return planned.plan, desired


def _cluster_if_any(args: argparse.Namespace) -> Any:
    """The cluster ``plan --objects`` diffs against: always without ``--desired``; with it, when there are
    credentials (as ``kubectl diff -f``), else None (offline)."""
    if not args.desired:
        return api_client()
    try:
        return api_client()
    except ApiUnavailable:
        return None


def _live_planned(args: argparse.Namespace, settings: Settings, api: Any,
                  desired: dict[str, Any] | None = None) -> Planned:
    """The plan of the live cc (or of ``desired``'s spec in its place) and the stored state (the reconcile's), or
    the error it would report."""
    cc = ClusterConfigurations(api).get()
    if desired is not None:
        cc = {"metadata": (cc or {}).get("metadata") or {}, "spec": desired["spec"]}
    if cc is None:
        raise UsageError("ClusterConfiguration kubesphere-system/ks-installer not found")
    planned = _planned(Reconciler(api, settings).plan(cc, force=args.all))
    assert planned.plan is not None and planned.prepared is not None
    return planned


def _live_plan(args: argparse.Namespace, settings: Settings) -> tuple[Plan, Prepared]:
    planned = _live_planned(args, settings, api_client())
    assert planned.plan is not None and planned.prepared is not None
    return planned.plan, planned.prepared


def _planned(planned: Planned) -> Planned:
    """``planned``, or the error the reconcile would report for it (the state, or the spec)."""
    if planned.reason == STATE_UNREADABLE:
        raise UsageError(f"{unreadable_state(planned)}. {REPAIR_STATE}")
    if planned.reason == STATE_TOO_NEW:
        raise UsageError(planned.errors[0].message)
    if planned.errors:
        raise UsageError(_invalid("the cc spec", planned.errors))
    return planned


def _print_plan(plan: Plan, prepared: Prepared, output: str) -> None:
    data = {**plan.to_json(), "migrations": prepared.migrations, "warnings": prepared.warnings}
    if output == "json":
        print(json.dumps(data, sort_keys=True))
        return
    if output == "yaml":
        print(yaml.safe_dump(data, sort_keys=True), end="")
        return
    for action in ("install", "upgrade", "uninstall", "blocked", "unchanged"):
        if data[action]:
            print(f"{action:>9}: {', '.join(data[action])}")
    for module, changes in data["changes"].items():
        for change in changes:
            print(f"  {module}: {change}")
    for module, reason in data["reasons"].items():
        print(f"  {module}: blocked: {reason}")
    for module, note in data["notes"].items():
        print(f"  {module}: {note}")
    for line in data["migrations"]:
        print(f"migrated: {line}")
    for line in data["warnings"]:
        print(f"warning: {line}")


def _plan_objects(args: argparse.Namespace, settings: Settings) -> int:
    """``plan --objects``: render the planned modules' playbooks and say what each object would become."""
    from installer.engine.runner import run_variables
    from installer.objects.cluster import cluster_facts
    from installer.preview import object_plan, render

    known = {m.name for m in MODULES}
    if args.module and args.module not in known:
        raise UsageError(f"--module: no module {args.module!r} (modules: {', '.join(sorted(known))})")
    api = None if args.offline else _cluster_if_any(args)
    if api is None:
        plan, prepared = _offline_plan(args, settings)
        records: dict[str, Any] = {}
    else:
        desired = {"spec": _load_spec(args.desired)} if args.desired else None
        planned = _live_planned(args, settings, api, desired)
        assert planned.plan is not None and planned.prepared is not None
        plan, prepared, records = planned.plan, planned.prepared, planned.records
    for warning in prepared.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    steps = [s for s in plan.runnable if not args.module or s.module == args.module]
    facts = render.OFFLINE_FACTS if api is None else cluster_facts(api)
    if api is None and args.kubernetes_version:
        facts = {**facts, "kubernetes_version": args.kubernetes_version}
    variables = run_variables(prepared.spec, facts)
    try:
        rendered = render.render_modules([(s.module, s.action.value, s.hash or "") for s in steps], variables,
                                         settings.roles_dir, world=render.WORLD if api is None else None,
                                         plays_dir=settings.playbooks_dir)
    except render.RenderFailed as exc:
        raise UsageError(f"rendering the playbooks failed: {exc}") from exc
    if api is None:
        result = object_plan.offline_plan(rendered, {s.module: s.action.value for s in steps})
    else:
        try:
            result = object_plan.ClusterPlanner(api, records).plan(rendered, {s.module: s for s in steps})
        except ApiException as exc:
            raise UsageError(f"reading the cluster failed: {api_reason(exc)}") from exc
    if args.output == "json":
        print(json.dumps(result.to_json(), sort_keys=True))
    elif args.output == "yaml":
        docs = [object_plan.redacted_manifest(m) for module in result.modules for m in module.manifests]
        if docs:
            print(yaml.safe_dump_all(docs, sort_keys=False), end="")
        for error in result.errors:
            print(f"error: {error}", file=sys.stderr)
    elif text := result.text():
        print(text)
    else:
        print(f"no changes: {'every object is as the planned modules apply it' if steps else 'no module would run'}")
    return result.exit_code


def images_for(spec: dict[str, Any], settings: Settings) -> dict[str, list[str]]:
    """Module → the image references it deploys under ``spec``, for every module ``spec`` enables."""
    refs = spec_refs(spec, catalogue(settings.roles_dir))
    wanted = {m.name: m.image_keys(spec) for m in MODULES if m.enabled(spec)}
    return {name: [refs[k] for k in keys] for name, keys in wanted.items() if keys}


#: The key of the installer's own image in ``images -o json`` (no module has that name).
INSTALLER_IMAGE_KEY = "ks-installer"
#: What ``plan --kubernetes-version`` accepts: the API server's ``gitVersion`` form.
KUBERNETES_VERSION = re.compile(r"v1\.\d+\.\d+([-+][0-9A-Za-z.+-]*)?")


def installer_image(spec: dict[str, Any]) -> str:
    """The installer's own image under the spec's ``local_registry``, ``namespace_override`` and ``zone``: a mirror
    holds it beside the images it deploys."""
    repo, _, tag = INSTALLER_IMAGE.rpartition(":")
    return spec_refs(spec, {INSTALLER_IMAGE_KEY: {"repo": repo, "tag": tag}})[INSTALLER_IMAGE_KEY]


def _images(args: argparse.Namespace, settings: Settings) -> int:
    if args.desired:
        prepared = _valid(_load_spec(args.desired), None, args.desired)
    else:
        cc = ClusterConfigurations(api_client()).get()
        if cc is None:
            raise UsageError("ClusterConfiguration kubesphere-system/ks-installer not found")
        prepared = _planned(Reconciler(api_client(), settings).plan(cc)).prepared
        assert prepared is not None
    spec = prepared.spec
    if args.upstream:
        spec = {**spec, "local_registry": "", "namespace_override": "", "zone": ""}
    by_module = {INSTALLER_IMAGE_KEY: [installer_image(spec)], **images_for(spec, settings)}
    if args.output == "json":
        print(json.dumps(by_module, sort_keys=True))
    else:
        print("\n".join(sorted({ref for refs in by_module.values() for ref in refs})))
    return 0


def _state(args: argparse.Namespace) -> int:
    store = StateStore(api_client())
    entries = store.raw()
    if args.module and args.module not in entries:
        raise UsageError(f"{store.ref} has no entry {args.module!r} (entries: {', '.join(sorted(entries)) or 'none'})")
    if args.action == "reset":
        if args.module:
            store.forget(args.module)
            print(f"removed entry {args.module!r} from {store.ref}: the next reconcile installs that module if it "
                  "is enabled, and leaves it alone otherwise")
        else:
            store.delete()
            print(f"deleted {store.ref}: the next reconcile installs every enabled module and uninstalls nothing")
        return 0
    for key in sorted(entries):
        if args.module and key != args.module:
            continue
        try:
            value = decode(entries[key])  # bounded as the reconcile reads it: a deep or huge entry is named
            if not key.startswith("_"):
                Record.from_dict(value)
        except (ValueError, TypeError) as exc:
            print(yaml.safe_dump({key: f"<unreadable: {type(exc).__name__}: {exc}>"}), end="")
            continue
        if isinstance(value, dict) and isinstance(value.get("inputs"), dict):
            value["inputs"] = redact(value["inputs"])
        shown = redact(value) if key.startswith("_") and isinstance(value, dict) else value
        print(yaml.safe_dump({key: shown}, sort_keys=True), end="")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m installer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="show what a reconcile would do")
    plan.add_argument("--desired", help="ClusterConfiguration (or bare spec) YAML to plan for")
    plan.add_argument("--last-applied", help="ClusterConfiguration YAML that is currently installed")
    plan.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text",
                      help="with --objects, yaml prints the manifests the planned modules apply (Secrets redacted)")
    plan.add_argument("--all", action="store_true", help="re-run every enabled module")
    plan.add_argument("--objects", action="store_true",
                      help="object by object: render the planned modules and, against the cluster, diff each object "
                           "with a dry-run apply (exit 0: no change, 1: changes, 2: errors)")
    plan.add_argument("--module", help="with --objects: only this module")
    plan.add_argument("--offline", action="store_true",
                      help="with --objects --desired: render only, no cluster (without credentials it is offline "
                           "anyway); with credentials --desired is diffed against the cluster, as kubectl diff -f")
    plan.add_argument("--kubernetes-version", metavar="v1.MINOR.PATCH",
                      help="with --objects, offline: render for a cluster of this Kubernetes version (objects that "
                           "differ by version follow it); against a cluster, its API server's version is used")
    rec = sub.add_parser("reconcile", help="reconcile the cluster in $KUBECONFIG once")
    rec.add_argument("--all", action="store_true", help="re-run every enabled module")
    rec.add_argument("--check-drift", action="store_true",
                     help="first compare each installed module's objects with the cluster and re-apply the modules "
                          "whose objects are missing or were changed by someone else (as the retry annotation does)")
    state = sub.add_parser("state", help="inspect or repair the installer's stored state")
    state.add_argument("action", choices=("show", "reset"))
    state.add_argument("--module", help="only this module's entry")
    uninstall = sub.add_parser("uninstall", help="remove everything the installer installed")
    uninstall.add_argument("--all", action="store_true", required=True, help="every module (required)")
    uninstall.add_argument("--purge", action="store_true",
                           help="also delete PVCs (data!) and CRDs no custom resource is left of")
    images = sub.add_parser("images", help="list the images the spec deploys")
    images.add_argument("--desired", help="ClusterConfiguration (or bare spec) YAML; default: the cc in the cluster")
    images.add_argument("--upstream", action="store_true",
                        help="public names, without local_registry, namespace_override and zone")
    images.add_argument("-o", "--output", choices=("text", "json"), default="text",
                        help="text: one image per line, sorted; json: the images of each module")
    sub.add_parser("status", help="the modules' phases, tasks and messages, from the cc's status")
    watch = sub.add_parser("watch", help="follow the reconcile live until it finishes (exit 0 when Ready)")
    watch.add_argument("--timeout", type=float, default=3600, help="seconds to wait (exit 2 when reached)")
    timeline_ = sub.add_parser("timeline", help="draw the last reconcile's modules and tasks as a Gantt chart")
    timeline_.add_argument("results", nargs="?", help="results directory or timeline.json (default: $KS_RESULTS_DIR)")
    timeline_.add_argument("-o", "--output", required=True, help="image to write: .svg, .png or .pdf")
    return p


def _status(args: argparse.Namespace) -> int:
    from rich.console import Console

    from installer.engine import status_view

    ccs = ClusterConfigurations(api_client())
    cc = ccs.get()
    if cc is None:
        raise UsageError("ClusterConfiguration kubesphere-system/ks-installer not found")
    console = Console()
    if args.command == "watch":
        return status_view.watch(ccs.get, console, args.timeout)
    status_view.show(cc, console)
    return 0


def _timeline(args: argparse.Namespace, settings: Settings) -> int:
    source = Path(args.results) if args.results else settings.results_dir
    try:
        data = timeline.load(source)
        out = timeline.draw(data, Path(args.output))
    except (FileNotFoundError, RuntimeError, ValueError, KeyError) as exc:
        raise UsageError(str(exc)) from exc
    print(f"wrote {out} ({len(data['modules'])} modules)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = Settings.from_env()
    try:
        if args.command == "plan":
            if args.last_applied and not args.desired:
                raise UsageError("--last-applied needs --desired")
            if args.module and not args.objects:
                raise UsageError("--module needs --objects")
            if args.offline and not (args.objects and args.desired):
                raise UsageError("--offline needs --objects and --desired")
            if args.kubernetes_version and not (args.objects and args.desired):
                raise UsageError("--kubernetes-version needs --objects and --desired (an offline render)")
            if args.kubernetes_version and not KUBERNETES_VERSION.fullmatch(args.kubernetes_version):
                raise UsageError(f"--kubernetes-version: not a Kubernetes version: {args.kubernetes_version!r} "
                                 "(expected v1.MINOR.PATCH, e.g. v1.26.15)")
            if args.objects:
                return _plan_objects(args, settings)
            plan, prepared = _offline_plan(args, settings) if args.desired else _live_plan(args, settings)
            _print_plan(plan, prepared, args.output)
            return 0
        if args.command == "state":
            return _state(args)
        if args.command == "images":
            return _images(args, settings)
        if args.command == "timeline":
            return _timeline(args, settings)
        if args.command in ("status", "watch"):
            return _status(args)
        hooklog.setup(proxy=False)
        cancel = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: cancel.set())
        reconciler = Reconciler(api_client(), settings, cancel)
        if args.command == "uninstall":
            if reconciler.ccs.get() is None:
                raise UsageError("ClusterConfiguration kubesphere-system/ks-installer not found: nothing to uninstall")
            result = reconciler.remove_all(purge=args.purge)
            if not result.ok:
                print("error: not every module was removed (see the log and status.modules); the state and the cc "
                      "are kept: run the command again to continue", file=sys.stderr)
            return 0 if result.ok else 1
        drift = check_drift(reconciler.api) if args.check_drift else None
        result = reconciler.run(force=args.all, drift=drift)
        return 0 if result.ok else 1
    except UsageError as exc:
        message = str(exc)
        cut = f"... ({len(message) - MAX_MESSAGE} more characters)" if len(message) > MAX_MESSAGE else ""
        print(f"error: {message[:MAX_MESSAGE]}{cut}", file=sys.stderr)
        return 2
    except LeaseHeld as exc:
        print(f"{exc}; try again later", file=sys.stderr)
        return 1
