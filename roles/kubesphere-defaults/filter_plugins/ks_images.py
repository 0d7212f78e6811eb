"""Jinja filters: full image references from the catalogue (``ks_images`` in defaults/main.yaml)."""

from __future__ import annotations

from typing import Any

CN_REGISTRY = "registry.cn-beijing.aliyuncs.com"
CN_NAMESPACE = "kubesphereio"


def registry_and_namespace(local_registry: str = "", namespace_override: str = "", zone: str = "") -> tuple[str, str]:
    """Upstream's rules: ``zone: cn`` pulls from the Aliyun mirror, whose namespace is ``kubesphereio`` (so is
    ``local_registry`` pointing at that mirror); explicit ``local_registry``/``namespace_override`` win."""
    registry = local_registry or (CN_REGISTRY if zone == "cn" else "")
    namespace = namespace_override or (CN_NAMESPACE if zone == "cn" or registry == CN_REGISTRY else "")
    return registry.rstrip("/"), namespace.strip("/")


def image_ref(repo: str, tag: str, registry: str = "", namespace: str = "") -> str:
    """``prom/prometheus`` + ``v2.39.1`` → ``[<registry>/][<namespace>|prom]/prometheus:v2.39.1``."""
    name = repo.rpartition("/")[2]
    path = f"{namespace}/{name}" if namespace else repo
    return f"{registry}/{path}:{tag}" if registry else f"{path}:{tag}"


def ks_image_refs(images: dict[str, dict[str, Any]], local_registry: str = "", namespace_override: str = "",
                  zone: str = "") -> dict[str, str]:
    """Every catalogue entry as a full reference, keyed like the catalogue."""
    registry, namespace = registry_and_namespace(local_registry, namespace_override, zone)
    return {key: image_ref(i["repo"], str(i["tag"]), registry, namespace) for key, i in images.items()}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_image_refs": ks_image_refs}
