"""Generate hostile ClusterConfiguration specs and run each through the offline ``plan`` path in-process.

Every spec must either plan (exit 0) or be refused with a short message naming a field or the YAML problem.
A traceback, an uncaught exception, more than 20 KB of output, a canary secret or an unprintable character
(a terminal control, a bidi override) in the output is a BUG. ``bombs`` are files no spec is: alias and merge
bombs, a million-item flow list, megabyte keys, oversized files; each must be refused within seconds.

With ``--state``, hostile contents of the installer's state Secret instead (nesting, wrong types, malformed
inventories and times, forged writers, oversized entries): each must read as records or be refused with
StateUnreadable, a short printable message naming the key; anything else is a BUG.

With ``--found``, hostile credential Secrets as the installer may find them (kubesphere-secret, redis-secret, a
webhook certificate: wrong types, bytes that are not text, short or blank values, weak or odd certificates): each must
be kept, replaced (a certificate) or refused with a short printable message naming the Secret, never holding the
planted value; anything else is a BUG.

    python hack/hostile_specs.py --count 1000 --seed 1 [--keep-dir DIR] [--state | --found]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import functools
import io
import random
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "deploy" / "cluster-configuration.yaml"
CANARY = "CANARY-7f3a9c"
MAX_OUTPUT = 20_000
_FIELD = re.compile(r"^  \S[^\n]*: ", re.MULTILINE)  # one "  path: message" line per field (format_errors)

Mutation = Callable[[random.Random, dict[str, Any]], str | None]


@functools.cache
def _base_doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(BASE.read_text(encoding="utf-8"))
    return doc


def clean_refusal(message: str, prefix: str, limit: int) -> bool:
    """A refusal as a user should read it: names what was refused first, short, printable, no value of the input."""
    return message.startswith(prefix) and len(message) <= limit and CANARY not in message \
        and all(c.isprintable() for c in message)


def judged(kind: str, judge: Callable[[], str], refusal: type[Exception], prefix: str,
           limit: int) -> tuple[str, str | None]:
    """``judge()``'s verdict, "refused" for a :func:`clean_refusal`, else "BUG" with the finding."""
    try:
        return judge(), None
    except refusal as exc:
        message = str(exc)
        return ("refused", None) if clean_refusal(message, prefix, limit) else ("BUG", f"{kind}: {message[:300]!r}")
    except BaseException as exc:  # any escape is the finding
        return "BUG", f"{kind}: uncaught {type(exc).__name__}: {str(exc)[:200]!r}"


def _base() -> dict[str, Any]:
    return copy.deepcopy(_base_doc())


def _paths(node: Any, parts: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path below ``node`` (dict keys and list indexes)."""
    out: list[tuple[Any, ...]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        out.append((*parts, key))
        out.extend(_paths(value, (*parts, key)))
    return out


def _containers(node: Any) -> list[dict[str, Any]]:
    """Every mapping at or below ``node``."""
    out = [node] if isinstance(node, dict) else []
    for value in node.values() if isinstance(node, dict) else node if isinstance(node, list) else ():
        out.extend(_containers(value))
    return out


def _set(root: dict[str, Any], parts: tuple[Any, ...], value: Any) -> None:
    node: Any = root
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


def _spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]
    return spec


def _mapping(node: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The mapping at ``keys`` below ``node``, made one where an earlier mutation left another value (or none)."""
    for key in keys:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    return node


#: Values of a wrong type or form, one of them put where a schema field is.
WRONG_VALUES: tuple[Any, ...] = ("abc", "", 7, -1, 10**30, 3.5, True, False, None, [], [1, "x"], {}, {"k": "v"},
                                 "30880", "yes", "NodePort\n", "ñ")


def _wrong_value(rng: random.Random) -> Any:
    return copy.deepcopy(rng.choice(WRONG_VALUES))


def wrong_type(rng: random.Random, doc: dict[str, Any]) -> None:
    """A value of a random type at a random schema path."""
    spec = _spec(doc)
    for _ in range(rng.randint(1, 3)):
        _set(spec, rng.choice(_paths(spec)), _wrong_value(rng))


def unknown_key(rng: random.Random, doc: dict[str, Any]) -> None:
    """An unknown key in a random mapping (any depth)."""
    rng.choice(_containers(_spec(doc)))[rng.choice(["extra", "Enabled", "consoel", "a b", "x.y", "0"])] = \
        _wrong_value(rng)


def huge_string(rng: random.Random, doc: dict[str, Any]) -> None:
    """A 100 KB string at a random path."""
    spec = _spec(doc)
    _set(spec, rng.choice(_paths(spec)), rng.choice("ax{") * 100_000)


def many_keys(rng: random.Random, doc: dict[str, Any]) -> None:
    """30 000 keys in one mapping (written out by :func:`_dump`)."""
    target = _mapping(_spec(doc), *rng.choice([(), ("authentication",), ("common",)]))
    target[_MANY] = 30_000


def unicode(rng: random.Random, doc: dict[str, Any]) -> None:
    """Control, bidi, NUL-ish and astral characters in values and keys."""
    spec = _spec(doc)
    text = rng.choice(["\x00", "\x07bell", "\u202etxt", "\x9b31m", "\ud7ff", "😀" * 50, "a\u0000b", "\x1b[31mred",
                       "\ufeff"])
    _set(spec, rng.choice(_paths(spec)), text)
    rng.choice(_containers(spec))[text] = "v"


def jinja(rng: random.Random, doc: dict[str, Any]) -> None:
    """Jinja in values and keys, also in credential fields."""
    spec = _spec(doc)
    text = rng.choice(["{{ lookup('pipe','id') }}", "{% raw %}x{% endraw %}", "{# c #}", f"{{{{ '{CANARY}' }}}}"])
    if rng.random() < 0.5:
        _set(spec, rng.choice(_paths(spec)), text)
    else:
        _mapping(spec, "authentication")[rng.choice(["jwtSecret", "adminPassword", "oauthOptions"])] = \
            f"{CANARY}{text}"
    if rng.random() < 0.3:  # a key is named in messages: no canary in it
        rng.choice(_containers(spec))[text.replace(CANARY, "k")] = "v"


def legacy(rng: random.Random, doc: dict[str, Any]) -> None:
    """Legacy keys with bad values (moved or dropped by a migration)."""
    spec = _spec(doc)
    bad = rng.choice(["abc", -5, [], {"x": 1}, None, f"{CANARY}{{{{x}}}}"])
    key = rng.choice(["console", "redisVolumSize", "openldapVolumeSize", "minioVolumeSize", "mysqlVolumeSize",
                      "etcdVolumeSize", "es", "opensearch"])
    if key == "console":
        spec["console"] = {"port": bad, "enableMultiLogin": bad}
    elif key in ("es", "opensearch"):
        _mapping(spec, "common", key)[f"{'elasticsearch' if key == 'es' else 'opensearch'}DataReplicas"] = bad
    else:
        _mapping(spec, "common")[key] = bad


def credentials(rng: random.Random, doc: dict[str, Any]) -> None:
    """Canary credentials in free-form sections, secret fields and unknown keys, some of them invalid."""
    spec = _spec(doc)
    where = rng.choice(["oauth", "oauth_bad", "secret_field", "unknown", "free_form", "secret_wrong_type"])
    auth = _mapping(spec, "authentication") if where not in ("unknown", "free_form") else {}
    if where == "oauth":
        auth["oauthOptions"] = {"identityProviders": [
            {"name": "p", "provider": {"privateKey": CANARY, "clientSecret": CANARY}}]}
    elif where == "oauth_bad":
        auth["oauthOptions"] = rng.choice([CANARY, [CANARY], 5, {"x": {"privateKey": CANARY}}])
    elif where == "secret_field":
        auth[rng.choice(["jwtSecret", "adminPassword"])] = rng.choice(
            [CANARY, CANARY * 1000, f"{CANARY}\x00", f"{CANARY}\n{CANARY}"])
    elif where == "unknown":
        rng.choice(_containers(spec))[rng.choice(["privateKey", "password", "apiToken"])] = CANARY
    elif where == "free_form":
        spec["affinity"] = {"privateKey": CANARY, "nodeAffinity": {"token": CANARY}}
    else:
        auth[rng.choice(["jwtSecret", "adminPassword"])] = rng.choice([{"v": CANARY}, [CANARY], 12345678, True])


DICT_MUTATIONS: dict[str, Callable[[random.Random, dict[str, Any]], None]] = {
    "wrong_type": wrong_type, "unknown_key": unknown_key, "huge_string": huge_string, "many_keys": many_keys,
    "unicode": unicode, "jinja": jinja, "legacy": legacy, "credentials": credentials,
}

_HOLE = "HOSTILE-HOLE"
_MANY = "HOSTILE-MANY"
"""A key that stands for that many keys ``k0: 0``, ``k1: 1``... in its mapping: PyYAML takes seconds to represent
30 000 keys of a dict, the generator milliseconds to write them."""
_MANY_LINE = re.compile(rf"^( *){_MANY}: (\d+)$", re.MULTILINE)


def _dump(doc: dict[str, Any]) -> str:
    """``doc`` as YAML, written by LibYAML where PyYAML has it (a 100 KB string in milliseconds, not a second; it
    writes astral characters as ``\\U`` escapes)."""
    text = yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False, allow_unicode=True,
                     width=10**9)
    return _MANY_LINE.sub(lambda m: _many(m[1], int(m[2])), text)


@functools.cache
def _many(indent: str, count: int) -> str:
    return "\n".join(f"{indent}k{i}: {i}" for i in range(count))


def _deep(rng: random.Random, depth: int, as_list: bool) -> str:
    leaf = rng.choice(["1", CANARY, "{{ x }}", "null"])
    return "[" * depth + leaf + "]" * depth if as_list else "{a: " * depth + leaf + "}" * depth


def deep(rng: random.Random, doc: dict[str, Any]) -> str:
    """Lists or mappings nested up to 1000 levels under affinity, oauthOptions or a typed field."""
    spec = _spec(doc)
    where = rng.choice([("affinity",), ("authentication", "oauthOptions"), ("common", "core", "console"),
                        ("tolerations",)])
    _mapping(spec, *where[:-1])[where[-1]] = _HOLE
    depth = rng.choice([rng.randint(1, 64), rng.randint(60, 140), rng.randint(900, 1000)])
    return _dump(doc).replace(_HOLE, _deep(rng, depth, rng.random() < 0.5))


def yaml_features(rng: random.Random, doc: dict[str, Any]) -> str:
    """Anchors, aliases, merge keys, duplicate keys, tags, NaN/inf, timestamps, ``#jinja2:`` headers."""
    text = _dump(doc)
    snippet = rng.choice([
        "  x: &a {port: 1}\n  common: {<<: *a}\n",
        "  authentication: &a {jwtSecret: " + CANARY + "}\n  multicluster: {<<: *a}\n",
        "  multicluster: {clusterRole: none, clusterRole: host}\n",
        "  etcd: !!binary aGVsbG8=\n",
        "  etcd: !!python/object:os.system {}\n",
        "  etcd: !!python/name:os.system\n",
        f"  etcd: !!python/object/apply:subprocess.check_output [[echo, {CANARY}]]\n",
        "  etcd: {port: .nan, monitoring: .inf}\n",
        "  etcd: {port: -.inf}\n",
        "  etcd: {endpointIps: 2001-12-14t21:59:43.10-05:00, port: 2024-01-01}\n",
        "  etcd: !!set {a, b}\n",
        f"  etcd: !custom {CANARY}\n",
        "  l: &l [a, b]\n  m: &m [*l, *l]\n  n: &n [*m, *m, *m, *m]\n  o: [*n, *n, *n, *n, *n, *n]\n",
        "  common: {<<: [*nope]}\n",
        "  common: {<<: 5}\n",
        "  ? [a, b]\n  : v\n",
        "  ? {a: 1}\n  : v\n",
        "  1: v\n  null: v\n  true: v\n",
    ])
    if "common:" in snippet or "authentication:" in snippet or "etcd:" in snippet or "multicluster:" in snippet:
        text = re.sub(r"^  (common|authentication|etcd|multicluster):.*?(?=^  \S)", "", text, count=1,
                      flags=re.MULTILINE | re.DOTALL) if rng.random() < 0.5 else text
    out = text.replace("spec:\n", "spec:\n" + snippet, 1)
    return ("#jinja2: variable_start_string:'[%'\n" + out) if rng.random() < 0.2 else out


def malformed(rng: random.Random, doc: dict[str, Any]) -> str | bytes:
    """Truncated documents, bad indentation, tabs, invalid UTF-8, several documents, empty files."""
    text = _dump(doc)
    kind = rng.choice(["truncate", "indent", "tab", "utf8", "multi", "empty", "scalar", "list", "quote"])
    if kind == "truncate":
        return text[: rng.randint(0, len(text))]
    if kind == "indent":
        lines = text.splitlines()
        i = rng.randrange(len(lines))
        lines[i] = " " * rng.randint(1, 3) + lines[i]
        return "\n".join(lines)
    if kind == "tab":
        return text.replace("  jwtSecret", "\tjwtSecret")
    if kind == "utf8":
        raw = text.encode()
        i = rng.randrange(len(raw))
        return raw[:i] + rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", CANARY.encode() + b"\xfe"]) + raw[i:]
    if kind == "multi":
        return text + "---\n" + text
    if kind == "empty":
        return rng.choice(["", "---\n", "# nothing\n", "~\n"])
    if kind == "scalar":
        return rng.choice(["42\n", "spec\n", f"{CANARY}\n", "kind: ClusterConfiguration\nspec: 5\n"])
    if kind == "list":
        return "- a\n- b\n"
    return text.replace("jwtSecret: ''", f"jwtSecret: '{CANARY}", 1)


def bombs(rng: random.Random, doc: dict[str, Any]) -> str:
    """Files no spec is: alias and merge bombs, a flow list of a million items, a megabyte key, many long unknown
    keys, a file over the size limit."""
    kind = rng.choice(["alias", "merge", "flow", "key", "unknown", "oversize"])
    head = "kind: ClusterConfiguration\nspec:\n"
    if kind in ("alias", "merge"):
        width, levels = rng.randint(5, 12), rng.randint(6, 12)
        lines = ["  x0: &x0 {" + ", ".join(f"k{j}: {CANARY}" for j in range(width)) + "}"]
        for i in range(1, levels):
            items = ", ".join([f"*x{i - 1}"] * width)
            lines.append(f"  x{i}: &x{i} {{<<: [{items}]}}" if kind == "merge" else f"  x{i}: &x{i} [{items}]")
        return head + "\n".join(lines) + "\n"
    if kind == "flow":
        return head + "  tolerations: [" + ",".join(["{}"] * rng.randint(100_000, 300_000)) + "]\n"
    if kind == "key":
        return head + "  ? " + rng.choice("kx") * rng.randint(10_000, 900_000) + "\n  : 1\n"
    if kind == "unknown":
        return head + "".join(f"  u{i}{'u' * 4000}: {CANARY}\n" for i in range(rng.randint(60, 200)))
    return _dump(doc) + "#" * (1 << 20)


TEXT_MUTATIONS: dict[str, Callable[[random.Random, dict[str, Any]], str | bytes]] = {
    "deep": deep, "yaml_features": yaml_features, "malformed": malformed, "bombs": bombs,
}
KINDS = [*DICT_MUTATIONS, *TEXT_MUTATIONS]


def generate(rng: random.Random, allowed: list[str] = KINDS) -> tuple[list[str], str | bytes]:
    """One hostile spec (mutation kinds from ``allowed``): its mutation kinds and its file content."""
    doc = _base()
    kinds = [rng.choice(allowed)]
    extra = [k for k in allowed if k in DICT_MUTATIONS]
    if extra and rng.random() < 0.3:
        kinds.insert(0, rng.choice(extra))
    for kind in kinds:
        if kind in DICT_MUTATIONS:
            DICT_MUTATIONS[kind](rng, doc)
    last = kinds[-1]
    return kinds, TEXT_MUTATIONS[last](rng, doc) if last in TEXT_MUTATIONS else _dump(doc)


@dataclass(frozen=True)
class Outcome:
    verdict: str  # valid, refused or BUG
    why: str
    output: str


def run_plan(path: Path) -> Outcome:
    """``plan --desired path -o json`` in-process, classified."""
    from installer.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["plan", "--desired", str(path), "-o", "json"])
    except BaseException as exc:  # any escape is the finding
        return Outcome("BUG", f"uncaught {type(exc).__name__}: {str(exc)[:200]}", err.getvalue())
    text = out.getvalue() + err.getvalue()
    if "Traceback" in text:
        return Outcome("BUG", "traceback in output", text)
    if CANARY in text:
        return Outcome("BUG", "canary secret in output", text)
    if any(not c.isprintable() and c != "\n" for c in text):
        return Outcome("BUG", "unprintable character in output", text)
    if len(text) > MAX_OUTPUT:
        return Outcome("BUG", f"output is {len(text)} bytes", text)
    if code == 0:
        return Outcome("valid", "", text)
    message = err.getvalue()
    named = "cannot read YAML" in message or "cannot be" in message or bool(_FIELD.search(message))
    if code != 2 or not message.startswith("error: ") or not named or out.getvalue():
        return Outcome("BUG", f"exit {code} without a clear message", text)
    return Outcome("refused", "", text)


# ---------------------------------------------------------------- the state Secret

STATE_REF = "Secret kubesphere-system/ks-installer-state"
MAX_STATE_MESSAGE = 2_000


def _b64(value: Any) -> str:
    import base64
    import json

    text = value if isinstance(value, str) else json.dumps(value)
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()


def hostile_state(rng: random.Random) -> tuple[str, dict[str, str]]:
    """One hostile state Secret ``data``: its kind and its entries (base64, as the API server holds them)."""
    record: dict[str, Any] = {"module": "redis", "hash": "h", "inputs": {"common.redis.enabled": True},
                              "applied_at": "2024-01-01T00:00:00Z", "version": "3.4.1",
                              "inventory": [["v1", "ConfigMap", "kubesphere-system", "redis-configmap"]]}
    kind = rng.choice(["deep", "wrong_type", "inventory", "time", "intent", "writer", "size", "key", "valid"])
    if kind == "deep":
        depth = rng.choice([70, 200, 5_000, 100_000])
        nest = "[" * depth + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
        where = rng.choice(["entry", "spec"])
        text = ('{"module":"redis","hash":"h","inputs":{"x":' + nest + "}}") if where == "entry" else \
            '{"common":' + nest + "}"
        return kind, {"redis" if where == "entry" else "_spec": _b64(text)}
    if kind == "wrong_type":
        field = rng.choice(sorted(record))
        record[field] = rng.choice([5, None, True, [], {}, "x", 1e308, [[1]], {"a": CANARY}])
        return kind, {"redis": _b64(record)}
    if kind == "inventory":
        record["inventory"] = rng.choice(["ConfigMap/default/x", [["v1", "ConfigMap", "default"]], [[1, 2, 3, 4]],
                                          [["v1", "ConfigMap", "default", "x\n[error] forged"]], {"a": 1}, [None]])
        return kind, {"redis": _b64(record)}
    if kind == "time":
        record["applied_at"] = rng.choice(["yesterday", "2099-13-45T00:00:00Z", "", 0, "\x1b[31m"])
        return kind, {"redis": _b64(record)}
    if kind == "intent":
        record["intent"] = rng.choice([{"action": "rm -rf /", "hash": None, "started_at": "2024-01-01T00:00:00Z"},
                                       {"action": "install", "hash": 5, "started_at": "now"}, [], "running",
                                       {"action": "install", "hash": None, "started_at": "2024-01-01T00:00:00Z",
                                        "outcome": "exploded", "extra": CANARY}])
        return kind, {"redis": _b64(record)}
    if kind == "writer":
        return kind, {"_format": _b64(rng.choice([9, "9", -1, [9]])),
                      "_writer": _b64(rng.choice(["9.9\n[error] forged\x1b[31m", "\u202e" * 500, 7, "x" * 10_000]))}
    if kind == "size":
        return kind, {"redis": rng.choice(["A" * (1 << 21), _b64([1] * 30_000), _b64({"a": "x" * 20_000}), "%%%"])}
    if kind == "key":
        record["module"] = rng.choice(["minio", "redis\n[error] forged", ""])
        return kind, {"redis": _b64(record)}
    return kind, {"redis": _b64(record), "_spec": _b64({"common": {"redis": {"enabled": True}}})}


def read_state(parse: Callable[[dict[str, str], str], object], data: dict[str, str]) -> str:
    """"valid" when the state reads (``parse`` raises when it does not)."""
    parse(data, STATE_REF)
    return "valid"


def run_state(count: int, seed: int, quiet: bool = False) -> dict[str, int]:
    """Generate ``count`` hostile state Secrets and read each as the reconcile, ``plan`` and the hook do."""
    from installer.engine.state_codec import StateUnreadable, parse

    rng = random.Random(seed)
    totals: collections.Counter[str] = collections.Counter()
    bugs: list[str] = []
    for _ in range(count):
        kind, data = hostile_state(rng)
        verdict, bug = judged(kind, functools.partial(read_state, parse, data), StateUnreadable, STATE_REF,
                              MAX_STATE_MESSAGE)
        bugs += [bug] if bug else []
        totals[verdict] += 1
    if not quiet:
        print(f"state: {totals['valid']} valid, {totals['refused']} refused, {totals['BUG']} BUG ({count} Secrets)")
        for bug in bugs[:5]:
            print(f"BUG {bug}")
    return dict(totals)


# ---------------------------------------------------------------- credentials found in the cluster

FOUND_NAMESPACE = "kubesphere-system"


@functools.cache
def _certificates() -> dict[str, dict[str, bytes]]:
    """Certificates to plant, made once: good, with a 1024-bit CA valid 100 years, expired, for other names."""
    import datetime as dt

    from installer.objects.certs import dns_names, generate

    names = dns_names("ks-controller-manager", FOUND_NAMESPACE)
    now = dt.datetime.now(dt.UTC)
    return {"good": generate(names), "other-names": generate(["elsewhere.example"]),
            "expired": generate(names, now=now - dt.timedelta(days=400), validity=dt.timedelta(days=365)),
            "too-long": generate(names, validity=dt.timedelta(days=36500))}


def _text(value: str | bytes) -> str:
    import base64

    raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
    return base64.b64encode(raw).decode()


def hostile_found(rng: random.Random) -> tuple[str, str, dict[str, Any]]:
    """One hostile credential Secret: its kind, the Secret it stands for and the object as the API holds it."""
    value = rng.choice([CANARY, "", " \n", CANARY + "\udcff", CANARY.encode() + b"\xff\xfe", CANARY * 500,
                        "\x1b[31m" + CANARY, "a"])
    secret_type = rng.choice([None, "Opaque", "Opaque", "kubernetes.io/tls", "kubernetes.io/service-account-token",
                              "x\n[error] forged"])
    kind = rng.choice(["core", "redis", "cert"])
    if kind == "core":
        key = rng.choice(["secret", "initAdminPassword", "token", "x\n[error] forged"])
        return kind, "kubesphere-secret", {"type": secret_type, "data": {key: _text(value)}}
    if kind == "redis":
        data = rng.choice([{"auth": _text(value)}, {"auth": "%%%" + CANARY}, {}, {"other": _text(value)}])
        return kind, "redis-secret", {"type": secret_type, "data": data}
    planted = dict(rng.choice(list(_certificates().values())))
    if rng.random() < 0.3:
        planted[rng.choice(["ca.crt", "tls.crt", "tls.key"])] = value if isinstance(value, bytes) else \
            value.encode("utf-8", "surrogatepass")
    if rng.random() < 0.2:
        planted.pop(rng.choice(["ca.crt", "tls.crt"]))
    return kind, "ks-controller-manager-webhook-cert", {"type": secret_type,
                                                         "data": {k: _text(v) for k, v in planted.items()}}


def judge_found(kind: str, name: str, live: dict[str, Any]) -> str:
    """What the installer does with ``live``: kept, replaced or generated; :class:`Refused` escapes."""
    from installer.modules import by_name
    from installer.objects import certs, core_secret, credentials, random_secret

    if kind == "core":
        if rule := credentials.type_problem(live.get("type"), (credentials.OPAQUE,)):
            raise credentials.Refused(FOUND_NAMESPACE, name, rule)
        current = credentials.decoded(FOUND_NAMESPACE, name, live["data"])
        core_secret.desired_data(current, admin_exists=False, namespace=FOUND_NAMESPACE)
        return "kept"
    if kind == "redis":
        random_secret.check_found(FOUND_NAMESPACE, name, "auth", live)
        return "kept"
    core = by_name()["ks-core"].certificates[0]
    reason = certs.judge(live, core.layout(), core.service, FOUND_NAMESPACE)
    return "kept" if reason is None else "replaced"


def run_found(count: int, seed: int, quiet: bool = False) -> dict[str, int]:
    """Generate ``count`` hostile credential Secrets and judge each as the installer's tasks do."""
    from installer.objects.credentials import Refused

    rng = random.Random(seed)
    totals: collections.Counter[str] = collections.Counter()
    bugs: list[str] = []
    for _ in range(count):
        kind, name, live = hostile_found(rng)
        verdict, bug = judged(kind, functools.partial(judge_found, kind, name, live), Refused,
                              f"Secret {FOUND_NAMESPACE}/{name}: ", 1_000)
        bugs += [bug] if bug else []
        totals[verdict] += 1
    if not quiet:
        print(f"found: {totals['kept']} kept, {totals['replaced']} replaced, {totals['refused']} refused, "
              f"{totals['BUG']} BUG ({count} Secrets)")
        for bug in bugs[:5]:
            print(f"BUG {bug}")
    return dict(totals)


def run(count: int, seed: int, keep_dir: Path, shown: int = 5, quiet: bool = False,
        allowed: list[str] = KINDS) -> dict[str, int]:
    """Generate and plan ``count`` specs; print a summary and the first ``shown`` BUGs; return counts per verdict."""
    rng = random.Random(seed)
    keep_dir.mkdir(parents=True, exist_ok=True)
    totals: collections.Counter[str] = collections.Counter()
    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    bugs: list[tuple[Path, list[str], Outcome]] = []
    for i in range(count):
        kinds, content = generate(rng, allowed)
        path = keep_dir / f"spec-{seed}-{i:04d}.yaml"
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
        outcome = run_plan(path)
        totals[outcome.verdict] += 1
        for kind in kinds:
            by_kind[kind][outcome.verdict] += 1
        if outcome.verdict == "BUG":
            bugs.append((path, kinds, outcome))
    if not quiet:
        print(f"{'kind':<14}{'valid':>7}{'refused':>9}{'BUG':>5}")
        for kind in KINDS:
            c = by_kind[kind]
            print(f"{kind:<14}{c['valid']:>7}{c['refused']:>9}{c['BUG']:>5}")
        print(f"{'total':<14}{totals['valid']:>7}{totals['refused']:>9}{totals['BUG']:>5}  ({count} specs)")
        for path, kinds, outcome in bugs[:shown]:
            print(f"\nBUG {path} ({'+'.join(kinds)}): {outcome.why}\n{outcome.output[:600]}")
    return dict(totals)


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-dir", type=Path, help="where the specs are written (default: a temporary dir)")
    parser.add_argument("--state", action="store_true", help="hostile state Secrets instead of specs")
    parser.add_argument("--found", action="store_true", help="hostile credential Secrets instead of specs")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    if args.state:
        return 1 if run_state(args.count, args.seed).get("BUG") else 0
    if args.found:
        return 1 if run_found(args.count, args.seed).get("BUG") else 0
    if args.keep_dir:
        return 1 if run(args.count, args.seed, args.keep_dir).get("BUG") else 0
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        return 1 if run(args.count, args.seed, Path(tmp)).get("BUG") else 0


if __name__ == "__main__":
    sys.exit(cli())
