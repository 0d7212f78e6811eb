"""Specs the schema already accepted, remembered by digest in the installer's cache directory
(``$KS_BASE_DIR/cache/accepted-specs``): the spec a cc keeps is checked by jsonschema once, and a hook run that finds
nothing to do later does not import jsonschema again (about 50 ms of CPU, more than the rest of such a run). The
digest covers the schema's content and the spec's canonical JSON, so another schema or any other spec is checked
anew; without ``KS_BASE_DIR`` or a writable cache every spec is checked. Only the installer writes its cache
directory, which holds nothing the pod cannot read already (the cc itself)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from installer.data_files import BASE_ENV

#: At most this many digests are kept (a new one past it starts the set again).
LIMIT = 256


def _marker(spec: Any, schema: dict[str, Any]) -> Path | None:
    base = os.environ.get(BASE_ENV)
    if not base:
        return None
    text = json.dumps([schema, spec], sort_keys=True, separators=(",", ":"), default=repr)
    return Path(base) / "cache" / "accepted-specs" / hashlib.sha256(text.encode()).hexdigest()


def accepted_before(spec: Any, schema: dict[str, Any]) -> bool:
    """Whether jsonschema accepted ``spec`` against ``schema`` before (:func:`remember`)."""
    marker = _marker(spec, schema)
    return marker is not None and marker.is_file()


def remember(spec: Any, schema: dict[str, Any]) -> None:
    """Record that jsonschema accepted ``spec`` against ``schema``; a cache, so failures are ignored."""
    marker = _marker(spec, schema)
    if marker is None:
        return
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        known = list(marker.parent.iterdir())
        if len(known) >= LIMIT:
            for path in known:
                path.unlink(missing_ok=True)
        marker.touch()
    except OSError:
        pass
