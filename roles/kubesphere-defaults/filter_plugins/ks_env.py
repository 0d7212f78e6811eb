"""Jinja filters: the environment variables KubeSphere reads in place of kubesphere.yaml keys."""

from __future__ import annotations

import base64
from typing import Any


def ks_env_name(path: str) -> str:
    """The variable KubeSphere reads in place of the kubesphere.yaml key at ``path`` (``openpitrix.s3.accessKeyID``
    → ``KUBESPHERE_OPENPITRIX_S3_ACCESSKEYID``)."""
    return "KUBESPHERE_" + path.upper().replace(".", "_")


def ks_s3_env(keys: list[dict[str, str]], sections: list[str], secret: str) -> list[dict[str, Any]]:
    """The environment of the S3 keys (``[{field, key}]``, see ``ks_s3_keys``) of the kubesphere.yaml
    ``sections``: for each section and key, the variable its field names, from that key of Secret ``secret``
    (optional: the Secret may not exist yet, or at all)."""
    return [{"name": ks_env_name(f"{section}.{k['field']}"),
             "valueFrom": {"secretKeyRef": {"name": secret, "key": k["key"], "optional": True}}}
            for section in sections for k in keys]


def ks_env_placeholders(config: Any) -> list[list[str]]:
    """The keys of kubesphere.yaml (parsed, ``config``) whose value is the name of the variable KubeSphere reads in
    their place (:func:`ks_env_name`; ks-core gives the readers each such variable): their pods read those from the
    variable, whatever the file says. Each key as the list of its path's parts."""
    found: list[list[str]] = []

    def walk(node: Any, path: list[str]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, [*path, str(key)])
        elif path and node == ks_env_name(".".join(path)):
            found.append(path)
    walk(config, [])
    return found


def ks_without_keys(config: Any, paths: list[list[str]]) -> Any:
    """``config`` (parsed YAML) without the keys at ``paths`` (lists of path parts; absent ones are ignored)."""
    if not isinstance(config, dict):
        return config
    here = {p[0] for p in paths if len(p) == 1}
    return {k: ks_without_keys(v, [p[1:] for p in paths if len(p) > 1 and p[0] == str(k)])
            for k, v in config.items() if str(k) not in here}


def ks_read_credentials(config: Any, data: dict[str, str] | None, credentials: list[dict[str, Any]],
                        secret: str) -> dict[str, Any]:
    """What the readers of kubesphere.yaml (parsed, ``config``) take for each key of ``credentials`` (``[{path,
    secret, key}]``, kubesphere-defaults' ks_config_credentials) whose variable comes from Secret ``secret`` (``data``:
    its data as stored, None when it does not exist): the Secret's value where it holds the key (ks-core gives them
    the variable, optional), else the file's. Key path → value (None: neither has one)."""
    data = data or {}
    out: dict[str, Any] = {}
    for cred in credentials:
        if cred["secret"] != secret:
            continue
        if cred["key"] in data:
            out[cred["path"]] = base64.b64decode(data[cred["key"]]).decode()
            continue
        node = config
        for part in cred["path"].split("."):
            node = node.get(part) if isinstance(node, dict) else None
        out[cred["path"]] = node
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_env_name": ks_env_name, "ks_s3_env": ks_s3_env,
                "ks_env_placeholders": ks_env_placeholders, "ks_without_keys": ks_without_keys,
                "ks_read_credentials": ks_read_credentials}
