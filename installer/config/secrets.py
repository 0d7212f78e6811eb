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


def credential_key(key: Any) -> bool:
    """Whether ``key`` names a credential (:data:`SECRET_KEY`): whatever is under it, at any depth, is one."""
    return isinstance(key, str) and bool(SECRET_KEY.search(key))


def hidden(value: Any) -> bool:
    """Whether a credential's value is shown as ``<redacted>``: anything but an empty value or a boolean (a flag
    such as ``automountServiceAccountToken`` holds no secret). A mapping or a list is hidden whole."""
    return not isinstance(value, bool) and value not in ("", None, {}, [])


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
    """A deep copy of ``spec`` with every credential (:func:`redact_keys`, and the fields the schema marks) replaced
    by ``"<redacted>"``."""
    out = copy.deepcopy(spec)
    _redact(out, "", SECRET_PATHS)
    return out


def redact_keys(node: Any) -> Any:
    """A deep copy of ``node`` (an object, a parsed config file) with every credential replaced by ``"<redacted>"``
    (:func:`hidden`): the value under a credential-named key, whole, and the ``value`` of a ``{name, value}`` pair
    (an env variable) whose name is one. The one rule of every output; a config file's text follows it line by line
    (:func:`redact_text`)."""
    out = copy.deepcopy(node)
    _redact(out, "", ())
    return out


def _redact(node: Any, prefix: str, paths: tuple[str, ...]) -> None:
    if isinstance(node, dict):
        named = credential_key(node.get("name")) and "value" in node
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if path in paths or credential_key(key) or (named and key == "value"):
                if hidden(value):
                    node[key] = REDACTED
            else:
                _redact(value, path, paths)
    elif isinstance(node, list):
        for item in node:
            _redact(item, prefix, paths)


_TEXT_KEY = re.compile(r"""^(?P<lead>\s*(?:-\s+)*)(?P<q>["']?)(?P<key>[A-Za-z0-9_.-]+)(?P=q)\s*(?P<sep>:|=)"""
                       r"(?P<rest>.*)$")
#: ``key:`` inside a line (a flow mapping, one-line JSON), its value after it.
_INLINE_KEY = re.compile(r"""(?P<key>[A-Za-z0-9_.-]+)(?P<q>["']?)\s*:\s*""")
#: A flow scalar: quoted, or up to a comma, bracket or space.
_SCALAR = re.compile(r""""(?:[^"\\]|\\.)*"|'[^']*'|[^,{}\[\]\s]+""")
_BOOLEAN = re.compile(r"(?i)true|false|yes|no|on|off")
_EMPTY = ("", "''", '""', "null", "~", "{}", "[]")
_BLOCK = ("|", ">", "|-", ">-", "|+", ">+", "{", "[")


def _flow_end(line: str, start: int) -> int:
    """Where the flow value starting at ``start`` ends: a scalar, or a bracketed mapping or list (nested, quotes
    respected; unclosed: the rest of the line)."""
    if not line.startswith(("{", "["), start):
        match = _SCALAR.match(line, start)
        return match.end() if match else start
    depth, quote, i = 0, "", start
    while i < len(line):
        c = line[i]
        if quote and c == "\\" and quote == '"':
            i += 1  # an escaped character
        elif quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if not depth:
                return i + 1
        i += 1
    return len(line)


def _shown_as_is(value: str) -> bool:
    """Whether a credential key's value, as written in a text, is shown: empty or a boolean (:func:`hidden`)."""
    return value in _EMPTY or bool(_BOOLEAN.fullmatch(value))


#: A flow mapping with no mapping inside (an env variable's ``{name: ..., value: ...}``), its ``name`` and ``value``.
_PAIR = re.compile(r"\{[^{}]*\}")
_PAIR_NAME = re.compile(r"""(?<![\w-])["']?name["']?\s*:\s*["']?(?P<name>[^"',}\s]+)""")
_PAIR_VALUE = re.compile(r"""(?P<key>(?<![\w-])["']?value["']?\s*:\s*)(?P<value>"(?:[^"\\]|\\.)*"|'[^']*'|[^,}\s]+)""")


def _pair(match: re.Match[str]) -> str:
    """A flow mapping with its ``value`` redacted when its ``name`` is credential-named."""
    name = _PAIR_NAME.search(match[0])
    if not name or not credential_key(name["name"]):
        return match[0]
    return _PAIR_VALUE.sub(lambda v: v[0] if _shown_as_is(v["value"]) else v["key"] + json.dumps(REDACTED),
                           match[0])


def _inline(line: str) -> str:
    """``line`` with the value of every credential-named key inside it (a flow mapping, one-line JSON) redacted,
    whole when it is a mapping or a list, and the ``value`` of a ``{name, value}`` pair whose name is one."""
    line = _PAIR.sub(_pair, line)
    out, done = [], 0
    for match in _INLINE_KEY.finditer(line):
        if match.start() < done or not credential_key(match["key"]):
            continue
        end = _flow_end(line, match.end())
        if _shown_as_is(line[match.end():end]):
            continue
        out += [line[done:match.end()], json.dumps(REDACTED)]
        done = end
    return "".join(out) + line[done:]


def _below(lines: list[str], start: int, indent: int, rest: str) -> int:
    """How many lines from ``start`` hold the value of the key at ``indent`` whose line ends with ``rest``: a block
    scalar's (``|``, ``>``), an open flow's (``{``, ``[``: to its closing line), a bare key's nested mapping or list
    (a list may start at the key's own indent); blank lines inside, none after."""
    bare, flow = rest == "", rest in ("{", "[")
    if not (bare or flow or rest in _BLOCK or rest.startswith(("|", ">"))):
        return 0
    count = 0
    for n, line in enumerate(lines[start:], 1):
        depth = len(line) - len(line.lstrip())
        if flow and depth == indent and line.lstrip().startswith(("}", "]")):
            return n
        item = bare and depth == indent and (line.lstrip().startswith("- ") or line.strip() == "-")
        if line.strip() and depth <= indent and not item:
            break
        count = n if line.strip() else count
    return count


def _named_below(lines: list[str], start: int, indent: int) -> bool:
    """Whether a ``name`` key further down the mapping whose keys are at ``indent`` is credential-named."""
    for line in lines[start:]:
        match = _TEXT_KEY.match(line)
        depth = len(match["lead"]) if match else len(line) - len(line.lstrip())
        if not line.strip() or depth > indent:
            continue
        if not match or depth < indent or "-" in match["lead"]:
            return False
        if match["key"] == "name":
            return credential_key(match["rest"].strip().rstrip(",").strip().strip("\"'"))
    return False


def _text_credentials(text: str) -> tuple[list[str], dict[tuple[str, ...], tuple[str, int]]]:
    """``text`` with the value of every credential-named key (YAML ``key: value``, a block scalar or a mapping or
    list nested under it, JSON ``"key": value``, ``key=value``) replaced, whole, by ``<redacted>`` (:func:`hidden`:
    not an empty value nor a boolean), and the ``value`` beside a ``name`` that is one (an env variable); and each
    redacted value, and the line that shows it, by its place (the keys above it by indentation, then the key). A
    quoted key (JSON) gets its value quoted, and its comma kept."""
    out: list[str] = []
    values: dict[tuple[str, ...], tuple[str, int]] = {}
    parents: list[tuple[int, str]] = []
    named: int | None = None
    """The indent of the keys of the mapping (a list item) whose ``name`` is credential-named."""
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
        rest = "" if rest.startswith("#") else rest
        parents.append((indent, key))
        if named is not None and (indent < named or (indent == named and "-" in match["lead"])):
            named = None  # out of that mapping, or the next item of its list
        if key == "name":
            named = indent if credential_key(rest.strip("\"'")) else None
        secret = credential_key(key) or (key == "value" and (named == indent or _named_below(lines, i, indent)))
        below = _below(lines, i, indent, rest) if secret else 0
        if not secret or (_shown_as_is(rest) and not below):
            out.append(_inline(line))
            continue
        value = [match["rest"], *lines[i:i + below]]
        i += below
        place = tuple(p for _, p in parents)
        while place in values:
            place += ("+",)
        values[place] = ("\n".join(value), len(out))
        comma = "," if match["q"] and value[-1].rstrip().endswith(",") else ""
        out.append(f"{line[: match.end('sep')]} {json.dumps(REDACTED) if match['q'] else REDACTED}{comma}")
    return out, values


def redact_text(text: str) -> str:
    """``text`` (a config file in a ConfigMap: YAML, JSON, ``key=value``) with credential values redacted."""
    return "\n".join(_text_credentials(text)[0])


def redact_texts(old: str, new: str) -> tuple[str, str]:
    """Two versions of one text, redacted for a diff: a credential whose value changed reads
    ``<redacted> (changed)`` in ``new`` (its value is never shown)."""
    before, old_values = _text_credentials(old)
    after, new_values = _text_credentials(new)
    for place, (value, index) in new_values.items():
        if old_values.get(place, (value,))[0] != value:
            after[index] += " (changed)"
    return "\n".join(before), "\n".join(after)
