"""Values others wrote, made safe to show in a log line."""

from __future__ import annotations

import json


def escaped(value: object, limit: int = 200) -> str:
    """A value someone else wrote (an annotation, a name in the state or a Lease), as a log line may show it: at most
    ``limit`` characters, newlines, terminal escapes and bidi controls written as escapes (it cannot forge a line)."""
    text = str(value)
    shown = "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text[:limit])
    return shown + ("..." if len(text) > limit else "")
