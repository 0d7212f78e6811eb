"""Last-applied state: one entry per module in a Secret.

A module's entry is written twice per run: its intent (action + target hash) before the playbook starts,
the result (hash, inputs, inventory; intent cleared) after it succeeds. Every write is a single merge patch
of one key, so a crash never leaves a half-written store, and an entry whose intent is still open tells
the next reconcile that the module may be half-applied.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.config.secrets import redact
from installer.engine.records import Record
from installer.engine.state_codec import (
    FORMAT,
    FORMAT_KEY,
    SPEC_KEY,
    WRITER_KEY,
    encode,
    format_of,
    records_of,
    upgraded,
)
from installer.settings import MANAGED_BY, NAMESPACE, STATE_SECRET
from installer.spec import merge, nested
from installer.version import INSTALLER_VERSION

log = logging.getLogger("installer")


class StateStore:
    def __init__(self, api: client.ApiClient, name: str = STATE_SECRET, namespace: str = NAMESPACE) -> None:
        self.core = client.CoreV1Api(api)
        self.name, self.namespace = name, namespace
        self.revision: str | None = None
        """resourceVersion of the Secret as last read or written (the hook's fast path compares it)."""
        self.format: int | None = None
        """The format the Secret had when last loaded (None: no Secret)."""
        self.stored_spec: dict[str, Any] | None = None
        self.upgrade: dict[str, str] = {}
        """The entries of an older format, upgraded and encoded: written with the next spec."""
        self.staged: dict[str, str | None] = {}
        """Entries the next write carries too (:meth:`save_spec` ``with_next``)."""

    def _read(self) -> dict[str, str]:
        try:
            secret = self.core.read_namespaced_secret(self.name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        self.revision = secret.metadata.resource_version
        return secret.data or {}

    @property
    def ref(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    def load(self) -> tuple[dict[str, Record], dict[str, Any] | None]:
        """Module records and the last accepted spec; StateUnreadable names the first bad entry, StateTooNew
        refuses the state of a newer installer."""
        data = self._read()
        entries = upgraded(data, self.ref)  # decoded once
        loaded = records_of(entries, self.ref)
        self.stored_spec = loaded[1]
        self.format = format_of(data, self.ref) if data else None
        self.upgrade = {} if self.format in (None, FORMAT) else {
            k: encode(v) for k, v in entries.items() if k not in (FORMAT_KEY, WRITER_KEY)}
        return loaded

    def raw(self) -> dict[str, str]:
        """The Secret's entries, undecoded (for inspection and repair)."""
        return self._read()

    def _patch(self, data: dict[str, str | None]) -> None:
        data = {**self.staged, **data}
        body = {"data": data}
        try:
            written = self.core.patch_namespaced_secret(self.name, self.namespace, body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            meta = client.V1ObjectMeta(name=self.name, namespace=self.namespace, labels=dict(MANAGED_BY))
            kept = {k: v for k, v in data.items() if v is not None}
            written = self.core.create_namespaced_secret(self.namespace, client.V1Secret(metadata=meta, data=kept))
        self.revision = written.metadata.resource_version
        self.staged = {}

    def save(self, record: Record) -> None:
        self._patch({record.module: encode(record.to_dict())})

    def forget(self, module: str) -> None:
        self._patch({module: None})

    def save_spec(self, spec: dict[str, Any], with_next: bool = False) -> None:
        """Store the accepted spec and this installer's format, with every entry upgraded to it in the same write
        (an older installer's state moves forward at once, or not at all). Nothing is written when the Secret
        already holds both. ``with_next``: written by the next write (a module's intent; :meth:`save_staged` if
        none comes), one request fewer before a playbook starts."""
        if spec == self.stored_spec and self.format == FORMAT:
            return
        if self.upgrade:
            log.info("The installer's state (%s) moves from format %s to %d", self.ref, self.format, FORMAT)
        self.staged = {**self.upgrade, SPEC_KEY: encode(spec), FORMAT_KEY: encode(FORMAT),
                       WRITER_KEY: encode(INSTALLER_VERSION)}
        if not with_next:
            self.save_staged()
        self.format, self.upgrade, self.stored_spec = FORMAT, {}, spec

    def save_staged(self) -> None:
        """Write what :meth:`save_spec` left for the next write, if no write took it."""
        if self.staged:
            self._patch({})

    def delete(self) -> None:
        """Remove the whole store: the next reconcile installs every enabled module and uninstalls nothing."""
        try:
            self.core.delete_namespaced_secret(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise


#: libyaml's emitter when PyYAML was built with it (the same YAML, about four times faster), else PyYAML's own.
SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


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
    tmp.write_text(yaml.dump(doc, Dumper=SAFE_DUMPER, sort_keys=True))
    tmp.replace(path)
