"""Last-applied state: one entry per module in a Secret.

A module's entry is written twice per run: its intent (action + target hash) before the playbook starts,
the result (hash, inputs, inventory; intent cleared) after it succeeds. Every write is a single merge patch
of one key, so a crash never leaves a half-written store, and an entry whose intent is still open tells
the next reconcile that the module may be half-applied.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.config.secrets import redact
from installer.plan import Record
from installer.settings import MANAGED_BY, NAMESPACE, STATE_SECRET
from installer.spec import merge, nested

SPEC_KEY = "_spec"
"""The last spec that passed validation (the baseline for forbidden-transition checks)."""


def _encode(value: Any) -> str:
    return base64.b64encode(json.dumps(value, sort_keys=True).encode()).decode()


def _decode(value: str) -> Any:
    return json.loads(base64.b64decode(value, validate=True))


class StateUnreadable(RuntimeError):
    """The state Secret holds an entry that cannot be decoded."""


class StateStore:
    def __init__(self, api: client.ApiClient, name: str = STATE_SECRET, namespace: str = NAMESPACE) -> None:
        self.core = client.CoreV1Api(api)
        self.name, self.namespace = name, namespace

    def _read(self) -> dict[str, str]:
        try:
            return self.core.read_namespaced_secret(self.name, self.namespace).data or {}
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise

    @property
    def ref(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    def load(self) -> tuple[dict[str, Record], dict[str, Any] | None]:
        """Module records and the last accepted spec; StateUnreadable names the first bad entry."""
        records: dict[str, Record] = {}
        spec = None
        for key, value in self._read().items():
            try:
                decoded = _decode(value)
                if key == SPEC_KEY:
                    if not isinstance(decoded, dict):
                        raise TypeError(f"expected an object, got {type(decoded).__name__}")
                    spec = decoded
                elif not key.startswith("_"):
                    records[key] = Record.from_dict(decoded)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise StateUnreadable(f"{self.ref}, key {key!r}: {type(exc).__name__}: {exc}") from None
        return records, spec

    def raw(self) -> dict[str, str]:
        """The Secret's entries, undecoded (for inspection and repair)."""
        return self._read()

    def _patch(self, data: dict[str, str | None]) -> None:
        body = {"data": data}
        try:
            self.core.patch_namespaced_secret(self.name, self.namespace, body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            meta = client.V1ObjectMeta(name=self.name, namespace=self.namespace, labels=dict(MANAGED_BY))
            kept = {k: v for k, v in data.items() if v is not None}
            self.core.create_namespaced_secret(self.namespace, client.V1Secret(metadata=meta, data=kept))

    def save(self, record: Record) -> None:
        self._patch({record.module: _encode(record.to_dict())})

    def forget(self, module: str) -> None:
        self._patch({module: None})

    def save_spec(self, spec: dict[str, Any]) -> None:
        self._patch({SPEC_KEY: _encode(spec)})

    def delete(self) -> None:
        """Remove the whole store: the next reconcile installs every enabled module and uninstalls nothing."""
        try:
            self.core.delete_namespaced_secret(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise


def write_mirror(path: Path, records: dict[str, Record]) -> None:
    """Readable copy of the store with secret values redacted."""
    doc: dict[str, Any] = {}
    for name, rec in sorted(records.items()):
        spec: dict[str, Any] = {}
        for p, v in rec.inputs.items():
            merge(spec, nested(p, v))
        doc[name] = {"hash": rec.hash, "appliedAt": rec.applied_at, "version": rec.version,
                     "inputs": redact(spec), "objects": len(rec.inventory)}
        if rec.intent:
            doc[name]["unfinished"] = {"action": rec.intent.action, "outcome": rec.intent.outcome,
                                       "startedAt": rec.intent.started_at}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=True))
    tmp.replace(path)
