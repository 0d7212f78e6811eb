"""JSON documents from the API server or shell-operator, parsed to a bounded depth (the hook reads its binding
contexts with it before deciding whether it needs anything else)."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
"""Nesting a spec may have (installer.config.validate refuses deeper values): far above any real spec (the deepest,
an affinity under servicemesh.istio, is about 15 levels)."""
PARSE_DEPTH = 2 * MAX_DEPTH
"""Nesting that JSON and YAML documents are parsed to (what lies deeper is never built, see ``loads_json``)."""
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[][{}]')


def loads_json(text: str | bytes) -> Any:
    """``json.loads`` for documents from the API server or shell-operator, which accept nesting far deeper than
    Python's decoder survives: every array or object nested deeper than PARSE_DEPTH is read as ``null``. That
    null still lies deeper than MAX_DEPTH in any spec the document holds, so
    installer.config.validate.structure_errors refuses the spec as for any other too-deep value, and everything
    else in the document is read as it is."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    pieces: list[str] = []
    depth = done = cut = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth == PARSE_DEPTH + 1:
                cut = match.start()
        elif token in ("]", "}"):
            depth -= 1
            if depth == PARSE_DEPTH:
                pieces += [text[done:cut], "null"]
                done = match.end()
    if depth > PARSE_DEPTH:  # unterminated: the decoder would recurse into it before finding out
        raise json.JSONDecodeError(f"unterminated nesting deeper than {PARSE_DEPTH} levels", text, cut)
    return json.loads("".join([*pieces, text[done:]]) if pieces else text)
