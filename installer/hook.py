"""The shell-operator hook: print the binding on ``--config``, otherwise reconcile.

An event that needs nothing is settled from shell-operator's snapshots (installer.engine.fastpath) without loading the
Kubernetes client; everything else runs the full reconcile. Exit 0 when the reconcile finished (module failures
are reported in status and retried by the schedule binding with backoff); non-zero only when the installer itself
could not run, so shell-operator retries.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from installer import hooklog
from installer.engine_settings import Settings
from installer.escape import escaped
from installer.settings import CC_GROUP, CC_KIND, CC_NAME, CC_VERSION, NAMESPACE, RETRY_ANNOTATION, STATE_SECRET

log = logging.getLogger("installer")

SPEC_BINDING = "Monitor clusterconfiguration"
RETRY_BINDING = "Retry annotation"
SCHEDULE_BINDING = "Retry failed modules"
STATE_BINDING = "Installer state"
"""The state Secret, only as a snapshot for the other bindings (it triggers nothing). shell-operator writes
snapshots to its temp files: the binding keeps only what the fast path reads, and no credential (STATE_JQ)."""
SNAPSHOTS = [SPEC_BINDING, STATE_BINDING]
FULL_RUN = "all"
"""Annotation value that re-runs every enabled module, like the original installer."""


def _watch(name: str, jq_filter: str, events: list[str], on_sync: bool, full: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "apiVersion": f"{CC_GROUP}/{CC_VERSION}",
        "kind": CC_KIND,
        "executeHookOnEvent": events,
        "executeHookOnSynchronization": on_sync,
        "nameSelector": {"matchNames": [CC_NAME]},
        "namespace": {"nameSelector": {"matchNames": [NAMESPACE]}},
        "jqFilter": jq_filter,
        "allowFailure": False,
        "keepFullObjectsInMemory": full,
        "includeSnapshotsFrom": SNAPSHOTS,
    }


STATE_JQ = """%(pattern)s as $re | %(public)s as $public
| def dotted: [.[] | strings | split(".")[]] | if .[0] == "inputs" then .[1:] else . end;
  def withheld: . as $doc | any(paths(scalars) as $p | ($p | dotted) as $s | ($doc | getpath($p)) as $v
    | $v != null and $v != "" and any($s[]; test($re; "i")) and $public[$s | join(".")] != $v; .);
  (.data // {}) as $data
  | (try any($data[]; try (@base64d | fromjson | false) catch true) catch true) as $unreadable
  | {resourceVersion: .metadata.resourceVersion,
     data: (if $unreadable or (try any($data[]; try (@base64d | fromjson | withheld) catch true) catch true)
            then null else $data end)}
  + (if $unreadable then {unreadable: true} else {} end)"""
"""The state Secret's resourceVersion and data; ``data`` is null when an entry (decoded: the last spec, a module's
inputs) holds a credential other than a published default, or cannot be read (then ``unreadable`` is true too). Then
the full reconcile decides."""


def state_filter() -> str:
    """STATE_JQ with the credential key names and the public default credentials of installer.config.secrets."""
    from installer.config.defaults import default_spec
    from installer.config.secrets import SECRET_KEY, SECRET_PATHS, is_credential
    from installer.spec import leaves

    names = sorted({path.rsplit(".", 1)[-1] for path in SECRET_PATHS})
    pattern = "|".join([SECRET_KEY.pattern, *(f"^{re.escape(name)}$" for name in names)])
    public = {path: value for path, value in leaves(default_spec()) if is_credential(path) and value not in ("", None)}
    return STATE_JQ % {"pattern": json.dumps(pattern), "public": json.dumps(public, sort_keys=True)}


def binding_config() -> dict[str, Any]:
    return {
        "configVersion": "v1",
        "kubernetes": [
            # Triggers on spec changes; the snapshot keeps the whole cc (status, annotations, generation).
            _watch(SPEC_BINDING, ".spec", ["Added", "Modified"], True, full=True),
            # Modified only: a new cc is reconciled once, by the spec binding.
            _watch(RETRY_BINDING, f'.metadata.annotations["{RETRY_ANNOTATION}"]', ["Modified"], False),
            # Only the filter's result, never the Secret itself, reaches the snapshot.
            {"name": STATE_BINDING, "apiVersion": "v1", "kind": "Secret", "executeHookOnEvent": [],
             "executeHookOnSynchronization": False, "nameSelector": {"matchNames": [STATE_SECRET]},
             "namespace": {"nameSelector": {"matchNames": [NAMESPACE]}}, "jqFilter": state_filter(),
             "keepFullObjectsInMemory": False},
        ],
        "schedule": [{"name": SCHEDULE_BINDING, "crontab": "* * * * *", "allowFailure": True,
                      "includeSnapshotsFrom": SNAPSHOTS}],
    }


def read_binding_context(path: str | None) -> list[dict[str, Any]]:
    if not path or not Path(path).exists():
        return []
    from installer.json_bounded import loads_json

    data = loads_json(Path(path).read_text() or "[]")  # bounded: a cc nested too deep is refused, not a crash
    return data if isinstance(data, list) else [data]


def _triggers(contexts: list[dict[str, Any]]) -> set[str]:
    return {c.get("binding", "") for c in contexts}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--config" in argv:
        print(json.dumps(binding_config()))
        return 0
    hooklog.setup()
    contexts = read_binding_context(os.environ.get("BINDING_CONTEXT_PATH"))
    triggers = _triggers(contexts)
    _mark_progressing(contexts)  # first: READY must not say True for an edit not reconciled yet
    if _settled(contexts, triggers):
        return 0
    cancel = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from installer.engine.lease import LeaseHeld
    from installer.objects.kube import ApiUnavailable

    try:
        return _handle(triggers, cancel)
    except LeaseHeld as exc:
        log.warning("%s; will retry", exc)
        return 1
    except (ApiUnavailable, ApiException, HTTPError) as exc:
        log.error("The installer could not talk to the Kubernetes API: %s", exc)
        return 1
    except OSError as exc:
        log.error("The installer could not read or write its files: %s", exc)
        return 1
    except Exception:
        log.exception("The installer failed unexpectedly (a bug: please report it with this log)")
        return 1


def _mark_progressing(contexts: list[dict[str, Any]]) -> None:
    """Turn Ready Unknown (reason Progressing) when the cc's snapshot shows a generation it was not True for
    (installer.engine.status.mark_unreconciled), through the standard library's HTTP (installer.hook_api): the fast
    path loads no Kubernetes client. The snapshot itself is left as it is, the fast path decides from it; when this
    step cannot run, the full reconcile does it first."""
    from installer.engine.fastpath import snapshot
    from installer.engine.status import unreconciled

    cc = snapshot(contexts, SPEC_BINDING)
    try:
        if not isinstance(cc, dict) or unreconciled(cc) is None:
            return
        from installer import hook_api
        from installer.engine.status import mark_unreconciled

        mark_unreconciled(hook_api.HookCc(hook_api.endpoint()), {**cc})
    except Exception:  # a status it cannot read, credentials it does not, an unreachable API: the full path does it
        log.debug("Ready not marked by the hook's first step", exc_info=True)


def _settled(contexts: list[dict[str, Any]], triggers: set[str]) -> bool:
    """Whether the snapshots show there is nothing to do (installer.engine.fastpath); any doubt runs the full path."""
    if not contexts or triggers - {SPEC_BINDING, SCHEDULE_BINDING} or _state_unreadable(contexts):
        return False
    try:
        from installer.engine import fastpath

        return fastpath.settle(_state_objects(contexts), triggers <= {SCHEDULE_BINDING}, SPEC_BINDING,
                               STATE_BINDING, Settings.from_env())
    except Exception:  # the full reconcile decides again, from the API
        log.debug("fast path not taken", exc_info=True)
        return False


def _state_unreadable(contexts: list[dict[str, Any]]) -> bool:
    """Whether the newest state snapshot says an entry cannot be decoded (STATE_JQ): the full path reports it."""
    for context in reversed(contexts):
        items = (context.get("snapshots") or {}).get(STATE_BINDING)
        if items is not None:
            result = items[0].get("filterResult") if items else None
            return isinstance(result, dict) and result.get("unreadable") is True
    return False


def _state_objects(contexts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``contexts`` with the state snapshot's filterResult (STATE_JQ) as the object installer.engine.fastpath reads."""
    out = []
    for context in contexts:
        items = (context.get("snapshots") or {}).get(STATE_BINDING)
        if items and "filterResult" in items[0]:
            state = [{"object": _state_object(items[0]["filterResult"])}]
            context = {**context, "snapshots": {**context["snapshots"], STATE_BINDING: state}}
        out.append(context)
    return out


def _state_object(result: Any) -> dict[str, Any] | None:
    """The Secret as far as the fast path needs it; None when the filter withheld its data (the full path reads
    it from the API)."""
    if not isinstance(result, dict) or not isinstance(result.get("data"), dict):
        log.debug("state snapshot without data (a credential or an unreadable entry): the full reconcile decides")
        return None
    return {"metadata": {"resourceVersion": result.get("resourceVersion")}, "data": result["data"]}


def _handle(triggers: set[str], cancel: threading.Event) -> int:
    from installer.engine.reconcile import Reconciler, check_drift, state_unreadable
    from installer.engine.retry import drift_check_due, due_for_retry, refusal_to_recheck
    from installer.engine.status import mark_unreconciled
    from installer.objects.cluster import ClusterConfigurations
    from installer.objects.kube import api_client

    settings = Settings.from_env()
    api = api_client()
    ccs = ClusterConfigurations(api)
    cc = ccs.get()
    if cc is None:
        log.info("ClusterConfiguration %s/%s not found; waiting for it", NAMESPACE, CC_NAME)
        return 0
    retry = (cc["metadata"].get("annotations") or {}).get(RETRY_ANNOTATION)
    only = triggers and (triggers <= {RETRY_BINDING} or triggers <= {SCHEDULE_BINDING})
    if retry is not None or only:
        mark_unreconciled(ccs, cc)  # first: READY must not say True for an edit not reconciled yet
    # else the reconcile marks it first, beside taking its Lease (Reconciler.run)
    drift = None
    if retry is not None:
        # Handled once: removing it lets the same command work again next time.
        ccs.remove_annotation(RETRY_ANNOTATION)
        log.info("Retry requested (%s=%s)", RETRY_ANNOTATION, escaped(retry))
        drift = check_drift(api)
    elif triggers and triggers <= {RETRY_BINDING}:
        return 0  # the annotation was removed: nothing was asked
    elif triggers and triggers <= {SCHEDULE_BINDING}:
        due = due_for_retry(cc.get("status"))
        # An unreadable state is reported as an edit reports it: by the reconcile, which stalls on it.
        recheck = refusal_to_recheck(cc.get("status")) or state_unreadable(api)
        if drift_check_due(cc.get("status"), settings.drift_interval):
            drift = check_drift(api)
        if not due and not drift and not recheck:
            return 0
        if due:
            log.info("Retrying modules whose backoff expired: %s", ", ".join(due))
    scheduled = retry is None and bool(triggers) and triggers <= {SCHEDULE_BINDING}
    result = Reconciler(api, settings, cancel).run(force=retry == FULL_RUN, cc=cc, drift=drift, scheduled=scheduled)
    return 1 if cancel.is_set() and not result.ok else 0
