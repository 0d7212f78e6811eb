"""The hook's fast path: decide "nothing to do" from shell-operator's snapshots, without the Kubernetes client.

shell-operator hands the hook the cc and the installer's state Secret as snapshots. When the plan they give has
nothing to run and the cc's status already says the last reconcile finished Ready at the state the Secret holds,
the hook only refreshes the generation the conditions were observed at, through ``$KUBERNETES_PATCH_PATH``, and
shows the welcome box this pod's last full reconcile wrote (with the time of now), as every run of upstream's did; an
edit of values no module reads also stores the new spec in the Secret there (a spec holding a credential goes to
the full path: only the published defaults pass through shell-operator's files). The snapshot is the cc as it was
before the hook's first step (installer.hook._mark_progressing) turned Ready Unknown for the new generation: the
patch file's status, applied once the hook exits, is the settled one.
Anything else (a first install, a change, a failure, a retry or drift check due, a state the status did not see
written) goes to the full reconcile, which re-reads everything from the API. The schedule's tick reads the status
alone: what planning needs (the spec's schema and defaults, the state's codec, the modules' files) is imported once
an edit is planned.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from installer.engine import welcome_box
from installer.engine.retry import drift_check_due, due_for_retry, refusal_to_recheck
from installer.engine.status import Phase, condition_of, now_rfc3339
from installer.engine_settings import Settings
from installer.settings import CC_GROUP, CC_KIND, CC_NAME, CC_VERSION, NAMESPACE, RETRY_ANNOTATION, STATE_SECRET

log = logging.getLogger("installer")
PATCH_ENV = "KUBERNETES_PATCH_PATH"
CONDITIONS_IN_STEP = ("Ready", "Stalled", "Reconciling", "ConsoleReady")
"""Conditions whose observedGeneration a no-op refreshes (their status stays)."""


def snapshot(contexts: list[dict[str, Any]], binding: str) -> dict[str, Any] | None:
    """The object of a one-object snapshot, from the newest binding context that has it."""
    for context in reversed(contexts):
        items = (context.get("snapshots") or {}).get(binding)
        if items is not None:
            return (items[0].get("object") if items else None) or None
    return None


def settle(contexts: list[dict[str, Any]], schedule_only: bool, spec_binding: str, state_binding: str,
           settings: Settings) -> bool:
    """True when the event needs no reconcile (and the status was refreshed if needed); False: run the full one."""
    patch_path = os.environ.get(PATCH_ENV)
    cc = snapshot(contexts, spec_binding)
    if not patch_path or cc is None:
        return False
    status = cc.get("status") or {}
    if RETRY_ANNOTATION in ((cc.get("metadata") or {}).get("annotations") or {}):
        return False
    if schedule_only:
        return not (refusal_to_recheck(status) or due_for_retry(status)
                    or drift_check_due(status, settings.drift_interval)
                    or _unreadable(snapshot(contexts, state_binding)))
    secret = snapshot(contexts, state_binding)
    if secret is None or not _seen_by(status, secret):
        return False  # first install, or a state this status was not written after
    box = _welcome_box(settings.running_file)
    if box is None:
        return False  # the welcome is due (a new pod): the full path renders it
    store = _nothing_to_do(cc, secret, status, settings)
    if store is None:
        return False
    generation = (cc.get("metadata") or {}).get("generation")
    log.info("Plan: nothing to do")
    patch = _observed(status, generation) if status.get("observedGeneration") != generation else {}
    if store:  # an edit no module reads: the new spec is stored, as the full path would (StateStore.save_spec)
        from installer.engine.state_codec import data_digest

        data = {**secret["data"], **store}
        _write_patch(Path(patch_path), {"operation": "MergePatch", "apiVersion": "v1", "kind": "Secret",
                                        "namespace": NAMESPACE, "name": STATE_SECRET, "mergePatch": {"data": store}})
        patch["stateDigest"] = data_digest(data)
        log.info("No module reads what changed: the spec is stored, nothing runs")
    log.info("Settled from shell-operator's snapshots: nothing was read from the API")
    welcome_box.save(settings.running_file, box)  # as the full path's result step: the file, then the box
    welcome_box.show(box)
    log.info("Reconcile finished, Ready: %s", condition_of(status, "Ready").get("message", ""))
    if patch:
        _write_status_patch(Path(patch_path), patch)
    return True


def _unreadable(secret: dict[str, Any] | None) -> bool:
    """Whether the state snapshot's data does not read (the full path reports it, Stalled, as an edit does)."""
    if secret is None:
        return False  # none yet, or data withheld: the full path reads it when it runs
    from installer.engine.state_codec import StateUnreadable, parse

    try:
        parse(secret.get("data") or {}, f"Secret {NAMESPACE}/{STATE_SECRET}")
    except StateUnreadable:
        return True
    return False


def _welcome_box(path: Path) -> str | None:
    """The box the last full reconcile of this pod wrote, with the time of now; None if there is none."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return welcome_box.restamped(text, welcome_box.now()) if welcome_box.is_box(text) else None


def _seen_by(status: dict[str, Any], secret: dict[str, Any]) -> bool:
    """Whether ``status`` was written after the state ``secret`` holds: the digest of the data the fast path stored
    last, else (the full path clears the digest) the resourceVersion the full path recorded. With a digest, the
    recorded resourceVersion is older than the state: a snapshot still at it predates the fast path's own store."""
    from installer.engine.state_codec import data_digest

    if status.get("stateDigest"):
        return data_digest(secret.get("data") or {}) == status["stateDigest"]
    return (secret.get("metadata") or {}).get("resourceVersion") == status.get("stateRevision")


def _nothing_to_do(cc: dict[str, Any], secret: dict[str, Any], status: dict[str, Any],
                   settings: Settings) -> dict[str, str] | None:
    """None: the full path decides. Otherwise the state entries to write: none when the spec is the stored one;
    the new spec when it changed only values no module reads (nor a switch, nor a note)."""
    from installer.engine.fingerprint import DigestCache
    from installer.engine.planning import plan_cc
    from installer.engine.state_codec import (
        FORMAT,
        FORMAT_KEY,
        SPEC_KEY,
        WRITER_KEY,
        StateUnreadable,
        encode,
        format_of,
        parse,
    )
    from installer.modules import MODULES
    from installer.version import INSTALLER_VERSION

    ready, stalled, reconciling = (condition_of(status, t) for t in ("Ready", "Stalled", "Reconciling"))
    if (ready.get("status"), stalled.get("status"), reconciling.get("status")) != ("True", "False", "False"):
        return None
    data = secret.get("data") or {}
    try:
        records, previous = parse(data, f"Secret {NAMESPACE}/{STATE_SECRET}")
        current_format = format_of(data, STATE_SECRET) == FORMAT
    except StateUnreadable:
        return None
    files = DigestCache(settings.digest_cache, settings.roles_dir,
                        plays_dir=settings.playbooks_dir)
    planned = plan_cc(cc, records, previous, files)
    prepared, plan = planned.prepared, planned.plan
    if prepared is None or plan is None:
        return None  # reported by the full path
    store: dict[str, str] = {}
    if prepared.spec != previous:
        if previous is None or not current_format or not _public(prepared.spec):
            return None  # a first spec, an older state to upgrade, or a credential: the full path stores it
        store = {SPEC_KEY: encode(prepared.spec), FORMAT_KEY: encode(FORMAT), WRITER_KEY: encode(INSTALLER_VERSION)}
    if (prepared.warnings or None) != status.get("warnings") or (prepared.migrations or None) != status.get(
            "migrations"):
        return None
    if plan.runnable or any(step.note for step in plan.steps):
        return None
    modules = status.get("modules") or {}
    wanted = {s.module: s.hash for s in plan.steps}
    for module in (m.name for m in MODULES if m.enabled(prepared.spec)):
        record = records.get(module)
        if record is None or not record.current_at(wanted.get(module)):
            return None
        if (modules.get(module) or {}).get("phase") != Phase.INSTALLED:
            return None
    return store


def _public(spec: dict[str, Any]) -> bool:
    """Whether ``spec`` holds no credential but the published defaults: only such a spec goes through
    shell-operator's patch file (as only such a state reaches its snapshot, see installer.hook.STATE_JQ)."""
    from installer.config.defaults import default_spec
    from installer.config.secrets import is_credential, redact
    from installer.spec import get, leaves, merge, nested

    redacted = redact(spec)
    for path, value in leaves(default_spec()):
        if is_credential(path) and value not in ("", None) and get(spec, path) == value:
            merge(redacted, nested(path, value))
    return redacted == spec


def _observed(status: dict[str, Any], generation: int | None) -> dict[str, Any]:
    """The conditions at ``generation``; a Ready of an older one was turned Unknown by the hook's first step, and
    turns True again now (its lastTransitionTime says so)."""
    conditions = []
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready" and c.get("observedGeneration") != generation:
            c = {**c, "lastTransitionTime": now_rfc3339()}
        conditions.append({**c, "observedGeneration": generation} if c.get("type") in CONDITIONS_IN_STEP else c)
    return {"observedGeneration": generation, "conditions": conditions}


def _write_status_patch(path: Path, status: dict[str, Any]) -> None:
    _write_patch(path, {"operation": "MergePatch", "apiVersion": f"{CC_GROUP}/{CC_VERSION}", "kind": CC_KIND,
                        "namespace": NAMESPACE, "name": CC_NAME, "subresource": "status",
                        "mergePatch": {"status": status}})


def _write_patch(path: Path, operation: dict[str, Any]) -> None:
    """One operation for shell-operator to apply once the hook exits, in the order written."""
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(operation) + "\n")
