"""Which spec values are credentials, and how to hide them (logs, status, the last-applied mirror)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

from installer.config.spec_schema import schema
from installer.spec import under

REDACTED = "<redacted>"

def _marked(node: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted paths of the schema ``node`` marked ``x-secret`` ($refs followed)."""
    if "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    if node.get("x-secret"):
        yield prefix
        return
    for key, sub in (node.get("properties") or {}).items():
        yield from _marked(sub, defs, f"{prefix}.{key}" if prefix else key)


#: Dotted spec paths whose values are credentials, or free-form sections that may hold them (all of it is one):
#: the fields the schema marks ``x-secret``.
SECRET_PATHS: tuple[str, ...] = tuple(_marked(schema(), schema().get("$defs", {})))

#: Any key ending like this is treated as a credential too (e.g. inside free-form ``oauthOptions``, an identity
#: provider's ``clientSecret`` or ``privateKey``; S3's ``accessKeyID``/``secretAccessKey``; an ``apiKey`` or the
#: ``credentials`` of an ``authorization`` section).
SECRET_KEY = re.compile(r"(password|secret|token|private[_-]?key|secret[_-]?access[_-]?key|access[_-]?key[_-]?id"
                        r"|api[_-]?key|credentials)$", re.IGNORECASE)


def is_secret(path: str) -> bool:
    """Whether the value at dotted ``path`` (or anything below it) may hold a credential."""
    return is_credential(path) or any(under(s, path) for s in SECRET_PATHS)


def is_credential(path: str) -> bool:
    """Whether dotted ``path`` is itself a credential field (or lies inside one)."""
    if any(under(path, s) for s in SECRET_PATHS):
        return True
    last = re.split(r"[.\[]", path)[-1].strip('"]')
    return bool(SECRET_KEY.search(last))


def redact(spec: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``spec`` with every non-empty credential value replaced by ``"<redacted>"``."""
    out = copy.deepcopy(spec)
    _redact(out, "")
    return out


def _redact(node: Any, prefix: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if _is_secret_leaf(path, key):
                if value not in ("", None, {}, []):
                    node[key] = REDACTED
            else:
                _redact(value, path)
    elif isinstance(node, list):
        for item in node:
            _redact(item, prefix)


def _is_secret_leaf(path: str, key: Any) -> bool:
    return path in SECRET_PATHS or (isinstance(key, str) and bool(SECRET_KEY.search(key)))


_TEXT_KEY = re.compile(r"""^(?P<lead>\s*(?:-\s+)*)(?P<q>["']?)(?P<key>[A-Za-z0-9_.-]+)(?P=q)\s*(?P<sep>:|=)"""
                       r"(?P<rest>.*)$")
#: ``key: value`` inside a line (a flow mapping, one-line JSON): the value quoted, or up to a comma or brace.
_INLINE = re.compile(r"""(?P<key>[A-Za-z0-9_.-]+)(?P<q>["']?)\s*:\s*"""
                     r"""(?P<value>"(?:[^"\\]|\\.)*"|'[^']*'|[^,{}\[\]\s]+)""")
_LITERAL = re.compile(r"(?i)true|false|yes|no|on|off|-?\d+(\.\d+)?")


def _inline(line: str) -> str:
    def hide(match: re.Match[str]) -> str:
        if not SECRET_KEY.search(match["key"]) or match["value"] in _EMPTY or _LITERAL.fullmatch(match["value"]):
            return match[0]
        return match[0][: match.start("value") - match.start()] + json.dumps(REDACTED)

    return _INLINE.sub(hide, line)
_EMPTY = ("", "''", '""', "null", "~", "{}", "[]")
_BLOCK = ("|", ">", "|-", ">-", "|+", ">+", "{", "[")


def _text_credentials(text: str) -> tuple[list[str], dict[tuple[str, ...], str]]:
    """``text`` with the value of every credential-named key (YAML ``key: value`` or a block under it, JSON
    ``"key": value``, ``key=value``) replaced by ``<redacted>``; and each redacted value by its place (the keys
    above it by indentation, then the key)."""
    out: list[str] = []
    values: dict[tuple[str, ...], str] = {}
    parents: list[tuple[int, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        match = _TEXT_KEY.match(line)
        if not match:
            out.append(_inline(line))
            continue
        indent = len(match["lead"])
        while parents and parents[-1][0] >= indent:
            parents.pop()
        key, rest = match["key"], match["rest"].strip().rstrip(",").strip()
        parents.append((indent, key))
        if not SECRET_KEY.search(key) or rest in _EMPTY or _LITERAL.fullmatch(rest):
            out.append(_inline(line))
            continue
        value = [rest]
        if rest in _BLOCK or rest.startswith(("|", ">")):
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                value.append(lines[i])
                i += 1
        place = tuple(p for _, p in parents)
        while place in values:
            place += ("+",)
        values[place] = "\n".join(value)
        out.append(line[: match.end("sep")] + " " + REDACTED)
    return out, values


def redact_text(text: str) -> str:
    """``text`` (a config file in a ConfigMap: YAML, JSON, ``key=value``) with credential values redacted."""
    return "\n".join(_text_credentials(text)[0])


def redact_texts(old: str, new: str) -> tuple[str, str]:
    """Two versions of one text, redacted for a diff: a credential whose value changed reads
    ``<redacted> (changed)`` in ``new`` (its value is never shown)."""
    before, old_values = _text_credentials(old)
    after, new_values = _text_credentials(new)
    changed = {place for place, value in new_values.items() if old_values.get(place, value) != value}
    if changed:
        marks = iter(place in changed for place in new_values)
        after = [f"{line} (changed)" if line.endswith(" " + REDACTED) and next(marks, False) else line
                 for line in after]
    return "\n".join(before), "\n".join(after)
