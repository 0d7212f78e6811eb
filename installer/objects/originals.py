"""What the original installer's records name: ks-installer v3.4.1's and v3.3.2's fixed object names
(installer/data/upstream-objects.json) and the manifests of the Helm releases it left.

An object is named by the original when one of those records names it. A label, an annotation (kubectl's
last-applied, Helm's managed-by) or a field manager says nothing of whose an object is: a user's own ConfigMap
applied with kubectl in ``kubesphere-system`` is theirs. The takeover's leftovers (installer.engine.adoption) and the
ServiceAccounts a first install keeps (installer.objects.manifests) are decided from these records.
"""

from __future__ import annotations

import base64
import binascii
import functools
import gzip
import json
import zlib
from collections.abc import Iterable
from importlib import resources
from typing import Any

import yaml
from kubernetes import client

Key = tuple[str, str, str]
"""(kind, namespace, name); the namespace is empty for a cluster-scoped object."""
RELEASE_LIMIT = 32 << 20
"""The most a release record's manifest may decompress to: a larger one is not read (a record is Helm's, ~1 MiB)."""


@functools.cache
def upstream_objects() -> frozenset[Key]:
    """The original installer's fixed object names (installer/data/upstream-objects.json)."""
    data = json.loads(resources.files("installer").joinpath("data/upstream-objects.json").read_text("utf-8"))
    return frozenset((kind, namespace, name) for kind, namespace, name in data["objects"])


def release_manifest(record: Any) -> str:
    """The manifest of a Helm v3 release record Secret (``data.release``: base64 of gzipped JSON); "" when it is
    not one (or decompresses past :data:`RELEASE_LIMIT`)."""
    try:
        raw = base64.b64decode(base64.b64decode((record.data or {}).get("release") or ""))
        if raw[:2] == b"\x1f\x8b":
            inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = inflate.decompress(raw, RELEASE_LIMIT)
            if inflate.unconsumed_tail:
                return ""
        manifest = json.loads(raw).get("manifest")
    except (binascii.Error, zlib.error, gzip.BadGzipFile, ValueError, AttributeError):
        return ""
    return manifest if isinstance(manifest, str) else ""


def release_objects(records: Iterable[Any], cluster_kinds: set[str]) -> set[Key]:
    """What the manifests of Helm release records name (a namespaced object without a namespace is in the
    release's)."""
    found: set[Key] = set()
    for record in records:
        try:
            docs = list(yaml.safe_load_all(release_manifest(record)))
        except yaml.YAMLError:
            continue
        for doc in docs:
            if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
                continue
            kind, meta = str(doc.get("kind") or ""), doc["metadata"]
            namespace = "" if kind in cluster_kinds else str(meta.get("namespace") or record.metadata.namespace)
            found.add((kind, namespace, str(meta.get("name") or "")))
    return found


def helm_records(api: client.ApiClient, namespaces: set[str]) -> list[Any]:
    """The Helm release record Secrets in ``namespaces``."""
    records = client.CoreV1Api(api).list_secret_for_all_namespaces(label_selector="owner=helm").items
    return [r for r in records if r.metadata.namespace in namespaces]


def named_by_original(key: Key, released: set[Key]) -> bool:
    """Whether a record of the original names the object ``key``: its fixed names, or a Helm release left there."""
    return key in upstream_objects() or key in released
