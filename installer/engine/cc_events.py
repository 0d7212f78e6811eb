"""Kubernetes Events on the cc, so ``kubectl describe cc ks-installer`` tells what each reconcile did.

An Event is a courtesy: failing to write one is logged at debug level and never fails the reconcile.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import uuid
from typing import TYPE_CHECKING, Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from installer.settings import CC_GROUP, CC_KIND, CC_VERSION

if TYPE_CHECKING:
    from installer.engine.ordered_writes import OrderedWrites

log = logging.getLogger(__name__)

COMPONENT = "ks-installer"
MESSAGE_LIMIT = 1024


class CcEvents:
    """Writes core/v1 Events about one cc (its uid ties them to it; a recreated cc starts a new story)."""

    def __init__(self, api: client.ApiClient, cc: dict[str, Any], writes: OrderedWrites | None = None) -> None:
        self.core = client.CoreV1Api(api)
        self.writes = writes
        """Where the Events are sent from (installer.engine.ordered_writes), in order with the status; None: here."""
        meta = cc.get("metadata") or {}
        self.namespace = meta.get("namespace", "")
        self.regarding = client.V1ObjectReference(
            api_version=f"{CC_GROUP}/{CC_VERSION}", kind=CC_KIND, name=meta.get("name"),
            namespace=self.namespace, uid=meta.get("uid"), resource_version=meta.get("resourceVersion"))

    def normal(self, reason: str, message: str) -> None:
        self._emit("Normal", reason, message)

    def warning(self, reason: str, message: str) -> None:
        self._emit("Warning", reason, message)

    def _emit(self, type_: str, reason: str, message: str) -> None:
        now = dt.datetime.now(dt.UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=f"{self.regarding.name}.{uuid.uuid4().hex[:16]}",
                                         namespace=self.namespace),
            involved_object=self.regarding, type=type_, reason=reason, message=message[:MESSAGE_LIMIT],
            source=client.V1EventSource(component=COMPONENT, host=os.environ.get("HOSTNAME")),
            first_timestamp=now, last_timestamp=now, count=1, reporting_component=COMPONENT,
            reporting_instance=os.environ.get("HOSTNAME") or COMPONENT)
        if self.writes is not None:
            self.writes.submit(lambda: self._create(reason, body))
        else:
            self._create(reason, body)

    def _create(self, reason: str, body: client.CoreV1Event) -> None:
        try:
            self.core.create_namespaced_event(self.namespace, body)
        except (ApiException, HTTPError) as exc:
            log.debug("Event %s not recorded: %s", reason, exc)
