"""Jinja filters: the environment variables KubeSphere reads in place of kubesphere.yaml keys."""

from __future__ import annotations

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


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_env_name": ks_env_name, "ks_s3_env": ks_s3_env}
