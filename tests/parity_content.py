"""What an object says, as comparable facts (tests/parity/content, tests/parity/content-default): the same function
reads upstream's rendered objects (when the facts are derived) and the cluster's (:func:`cluster_facts`, in
tests/integration/test_parity.py and test_content_default.py), which :func:`compare` checks against them.

Facts are flat: ``path → value``, a path being ``/``-separated steps. Per kind:

- ConfigMap: ``data/<key>`` then, for YAML text, the leaf paths of the parsed value; JSON, long and multi-document
  YAML are ``data/<key>`` → ``sha256:<hex>`` of the parsed value (as sorted JSON), as are multi-line values longer
  than 200 characters that are YAML; other text ``sha256:<hex>`` of the text with trailing whitespace removed from
  each line and the end.
- Secret: ``keys/<key>`` → ``present`` (key names only).
- ClusterRole and Role: ``rules/<apiGroup or core>/<resource>/<verb>[/<resourceName>]`` and
  ``nonResourceURLs/<url>/<verb>`` → ``allowed``; ``aggregation/<label or selector>`` → value (the
  ``aggregate-to-*`` and ``iam.kubesphere.io/role-template`` labels, ``aggregationRule``); ``annotations/<key>`` →
  value of the ``iam.kubesphere.io/*`` annotations KubeSphere's role editor reads (JSON parsed, name lists sorted).
- PrometheusRule: ``groups/<group>/<alert or record>:<name>`` → the sorted expressions, whitespace collapsed.
- Mutating and ValidatingWebhookConfiguration: ``webhooks/<name>/rules/<op>/<group>/<version>/<resource>/<scope>``
  → ``admitted``.

A leaf whose key names a credential (password, secret, token, access keys) is ``<generated>``: compared as present.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes.dynamic import DynamicClient

from installer.settings import MODULE_LABEL

GENERATED = "<generated>"
CREDENTIAL = re.compile(r"(password|passwd|secret|token|accesskeyid|secretaccesskey|apikey|http_auth)\W*$",
                        re.IGNORECASE)
# Data keys read as YAML or JSON: these suffixes, or none (other text, like LDIF or Lua, is only digested).
STRUCTURED = re.compile(r"(\.(ya?ml|json)|^[^.]*)$")
# The kinds whose content is compared, as served.
CONTENT_KINDS = (("v1", "ConfigMap"), ("v1", "Secret"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                 ("rbac.authorization.k8s.io/v1", "Role"), ("monitoring.coreos.com/v1", "PrometheusRule"),
                 ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
                 ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"))
KINDS = tuple(kind for _, kind in CONTENT_KINDS)
# YAML text up to this size is compared leaf by leaf; larger YAML and JSON (Grafana dashboards) by the digest of the
# parsed value.
MAX_STRUCTURED = 16_384
Facts = dict[str, Any]


def _step(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def leaves(value: Any, path: str) -> Facts:
    """``value``'s leaves by path; credential-named leaves as :data:`GENERATED`, empty containers as themselves."""
    if isinstance(value, dict) and value:
        out: Facts = {}
        for key, item in value.items():
            sub = f"{path}/{_step(key)}"
            out.update({sub: GENERATED} if CREDENTIAL.search(str(key)) and not isinstance(item, (dict, list))
                       else leaves(item, sub))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, item in enumerate(value):
            out.update(leaves(item, f"{path}/{i}"))
        return out
    if isinstance(value, str) and "\n" in value.strip() and len(value) > 200:
        return {path: digest(value)}
    return {path: value}


def parsed_digest(value: Any) -> str:
    """``sha256:`` of a parsed value, as sorted JSON."""
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def parse(text: str) -> Any:
    """YAML (or JSON) text's value, a list of the documents when it has several; None when it is not YAML."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return None
    return docs[0] if len(docs) == 1 else docs


def digest(text: str) -> str:
    """``sha256:`` of embedded YAML's parsed value, else of ``text`` with trailing whitespace normalised."""
    parsed = parse(text)
    if isinstance(parsed, (dict, list)):
        return parsed_digest(parsed)
    norm = "\n".join(line.rstrip() for line in text.rstrip().splitlines())
    return "sha256:" + hashlib.sha256(norm.encode()).hexdigest()


def text_facts(key: str, text: str) -> Facts:
    """One ConfigMap data key: structured (YAML or JSON) text as leaves, other text as a digest."""
    path = f"data/{_step(key)}"
    if CREDENTIAL.search(key):
        return {path: GENERATED}
    parsed = parse(text) if STRUCTURED.search(key) else None
    if isinstance(parsed, (dict, list)):
        if key.endswith(".json") or len(text) > MAX_STRUCTURED or "\n---" in text:
            return {path: parsed_digest(parsed)}
        return leaves(parsed, path)
    if "\n" not in text.strip() and len(text) <= 200:
        return {path: text.strip()}
    return {path: digest(text)}


def _json_text(text: str) -> Any:
    """An annotation holding JSON as its value (a list of names sorted), other text as it is."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return sorted(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else value


def _rbac(obj: dict[str, Any]) -> Facts:
    out: Facts = {}
    for rule in obj.get("rules") or []:
        for verb in rule.get("verbs") or []:
            for url in rule.get("nonResourceURLs") or []:
                out[f"nonResourceURLs/{_step(url)}/{_step(verb)}"] = "allowed"
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    base = f"rules/{_step(group or 'core')}/{_step(resource)}/{_step(verb)}"
                    for name in rule.get("resourceNames") or [None]:
                        out[base + (f"/{_step(name)}" if name else "")] = "allowed"
    meta = obj.get("metadata") or {}
    out.update({f"aggregation/{_step(k)}": v for k, v in (meta.get("labels") or {}).items()
                if "aggregate-to" in k or k == "iam.kubesphere.io/role-template"})
    out.update({f"annotations/{_step(k)}": _json_text(v) for k, v in (meta.get("annotations") or {}).items()
                if k.startswith("iam.kubesphere.io/")})
    for i, selector in enumerate((obj.get("aggregationRule") or {}).get("clusterRoleSelectors") or []):
        out.update(leaves(selector, f"aggregation/selector{i}"))
    return out


def _rules(obj: dict[str, Any]) -> Facts:
    out: dict[str, list[str]] = {}
    for group in (obj.get("spec") or {}).get("groups") or []:
        for rule in group.get("rules") or []:
            kind = "alert" if "alert" in rule else "record"
            key = f"groups/{_step(group['name'])}/{kind}:{_step(rule[kind])}"
            out.setdefault(key, []).append(" ".join(str(rule.get("expr", "")).split()))
    return {k: sorted(v) for k, v in out.items()}


def _webhooks(obj: dict[str, Any]) -> Facts:
    out: Facts = {}
    for hook in obj.get("webhooks") or []:
        for rule in hook.get("rules") or []:
            for op in rule.get("operations") or []:
                for group in rule.get("apiGroups") or []:
                    for version in rule.get("apiVersions") or []:
                        for resource in rule.get("resources") or []:
                            steps = (hook["name"], "rules", op, group or "core", version, resource,
                                     rule.get("scope") or "*")
                            out["webhooks/" + "/".join(_step(s) for s in steps)] = "admitted"
    return out


def facts(obj: dict[str, Any]) -> Facts:
    """The comparable facts of ``obj`` (a manifest or an object read from the API server, as plain data)."""
    kind = obj["kind"]
    if kind == "ConfigMap":
        out: Facts = {}
        for key, text in (obj.get("data") or {}).items():
            out.update(text_facts(key, text))
        out.update({f"data/{_step(k)}": "binary" for k in obj.get("binaryData") or {}})
        return out
    if kind == "Secret":
        return {f"keys/{_step(k)}": "present" for k in {**(obj.get("data") or {}), **(obj.get("stringData") or {})}}
    if kind in ("ClusterRole", "Role"):
        return _rbac(obj)
    if kind == "PrometheusRule":
        return _rules(obj)
    if kind.endswith("WebhookConfiguration"):
        return _webhooks(obj)
    raise ValueError(f"no content facts for kind {kind}")


def differences(expected: Facts, actual: Facts) -> dict[str, str]:
    """Path → what differs between upstream's facts and the cluster's (a generated value only needs to exist)."""
    out: dict[str, str] = {}
    for path in sorted(expected.keys() | actual.keys()):
        want, have = expected.get(path, None), actual.get(path, None)
        if path not in actual:
            out[path] = f"missing (upstream: {json.dumps(want)})"
        elif path not in expected:
            out[path] = f"not upstream's: {json.dumps(have)}"
        elif want != have and want != GENERATED:
            out[path] = f"{json.dumps(have)} (upstream: {json.dumps(want)})"
    return out


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or a path below it."""
    return path == prefix or path.startswith(prefix + "/")


def covered(path: str, documented: dict[str, str]) -> bool:
    """Whether an expectation path documents the difference at ``path`` (itself or an ancestor)."""
    return any(under(path, p) for p in documented)


def cluster_facts(dyn: DynamicClient) -> dict[str, Facts]:
    """The facts of every object of :data:`CONTENT_KINDS` on the cluster that carries a module label, by
    ``Kind/namespace/name`` (empty namespace for cluster-scoped objects)."""
    out: dict[str, Facts] = {}
    for api_version, kind in CONTENT_KINDS:
        for item in dyn.resources.get(api_version=api_version, kind=kind).get(label_selector=MODULE_LABEL).items:
            out[f"{kind}/{item.metadata.namespace or ''}/{item.metadata.name}"] = facts(item.to_dict() | {"kind": kind})
    return out


@dataclass
class Comparison:
    """Upstream's objects compared with the cluster's: what is wrong, and how many objects agree."""

    problems: list[str] = field(default_factory=list)
    """Undocumented differences, objects not applied, and documented paths that no longer differ."""
    equal: int = 0
    explained: int = 0
    """Objects whose differences are all documented."""
    documented: int = 0
    """Documented differences found."""

    def summary(self, objects: int) -> str:
        return (f"{objects} objects compared, {self.equal} equal, {self.explained} with {self.documented} documented "
                "differences")


def compare(expected: dict[str, Facts], live: dict[str, Facts],
            documented: dict[str, dict[str, str]]) -> Comparison:
    """Each object of ``expected`` (``ref`` → upstream's facts) against ``live`` (:func:`cluster_facts`), except the
    differences ``documented`` (``ref`` → path → reason) lists; a documented path that no longer differs is a
    problem too."""
    out = Comparison()
    for r, want in expected.items():
        if r not in live:
            out.problems.append(f"{r}: not applied with a module label")
            continue
        diffs = differences(want, live[r])
        paths = documented.get(r, {})
        found = [f"{r} {path}: {what}" for path, what in diffs.items() if not covered(path, paths)]
        found += [f"{r} {p}: documented in expectations.yaml but no longer differs (remove it)"
                  for p in paths if not any(under(d, p) for d in diffs)]
        count = sum(covered(path, paths) for path in diffs)
        out.problems += found
        out.equal += not found and not count
        out.explained += not found and count > 0
        out.documented += count
    return out
