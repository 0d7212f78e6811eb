"""The installer's own YAML data files (the spec's schema, the default cc), read through JSON copies in its cache
directory (``$KS_BASE_DIR/cache/data``; the image sets ``KS_BASE_DIR``): parsing them, and importing PyYAML to do so,
was about a fifth of the CPU of a hook run that finds nothing to do. A copy is used while the file's content is the one
it was made from (its SHA-256: reading and hashing the file costs a small part of parsing it); without
``KS_BASE_DIR`` or a writable cache the file is parsed each time.
(The base directory is read here, not through installer.engine_settings: the telemetry task imports this module, and
engine-only files stay out of the modules' hashes.)"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

BASE_ENV = "KS_BASE_DIR"


def load_yaml(path: Path) -> Any:
    """The data of the YAML file ``path`` (one document)."""
    base = os.environ.get(BASE_ENV)
    raw = path.read_bytes()
    source = hashlib.sha256(raw).hexdigest()
    copy = Path(base) / "cache" / "data" / f"{path.name}.json" if base else None
    if copy is not None:
        try:
            saved = json.loads(copy.read_text(encoding="utf-8"))
            if isinstance(saved, dict) and saved.get("source") == source:
                return saved["data"]
        except (OSError, ValueError, KeyError):
            pass
    from installer.yaml_c import load

    data = load(raw.decode("utf-8"))
    if copy is not None:
        try:
            text = json.dumps({"source": source, "data": data})
        except (TypeError, ValueError):  # not JSON data (a date)
            return data
        if json.loads(text)["data"] == data:  # nor data JSON changes (a number as a key)
            _write(copy, text)
    return data


def _write(path: Path, text: str) -> None:
    """``text`` to ``path`` at once (a reader sees the old copy or the new one); a cache, so failures are ignored."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
