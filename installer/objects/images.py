"""The image catalogue (``ks_images`` in roles/kubesphere-defaults) and its references under a spec.

Roles read the references through the ``ks_image_refs`` filter (kubesphere-defaults), which is this module's
function, so the roles and ``python -m installer images`` apply ``local_registry``, ``namespace_override`` and
``zone`` the same way. It imports nothing of the engine: every module's role loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from installer import KS_VERSION
from installer.spec import Spec, get

CN_REGISTRY = "registry.cn-beijing.aliyuncs.com"
CN_NAMESPACE = "kubesphereio"
CATALOGUE_FILE = Path("kubesphere-defaults") / "defaults" / "main.yaml"


def registry_and_namespace(local_registry: str = "", namespace_override: str = "", zone: str = "") -> tuple[str, str]:
    """Upstream's rules: ``zone: cn`` pulls from the Aliyun mirror, whose namespace is ``kubesphereio`` (so is
    ``local_registry`` pointing at that mirror); explicit ``local_registry``/``namespace_override`` win."""
    registry = local_registry or (CN_REGISTRY if zone == "cn" else "")
    namespace = namespace_override or (CN_NAMESPACE if zone == "cn" or registry == CN_REGISTRY else "")
    return registry.rstrip("/"), namespace.strip("/")


def _own_registry(repo: str) -> tuple[str, str]:
    """``quay.io/argoproj/argocd`` → (``quay.io``, ``argoproj/argocd``); Docker Hub repos have none."""
    first, _, rest = repo.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "", repo


def image_ref(repo: str, tag: str, registry: str = "", namespace: str = "") -> str:
    """``prom/prometheus`` + ``v2.39.1`` → ``[<registry>/][<namespace>|prom]/prometheus:v2.39.1``. A repo on its
    own registry (``quay.io/argoproj/argocd``) keeps it unless ``registry`` replaces it, as upstream's
    ``quay_image_repo``/``ghcr_image_repo`` did."""
    home, repo = _own_registry(repo)
    registry = registry or home
    name = repo.rpartition("/")[2]
    path = f"{namespace}/{name}" if namespace else repo
    return f"{registry}/{path}:{tag}" if registry else f"{path}:{tag}"


def ks_image_refs(images: dict[str, dict[str, Any]], local_registry: str = "", namespace_override: str = "",
                  zone: str = "") -> dict[str, str]:
    """Every catalogue entry as a full reference, keyed like the catalogue."""
    registry, namespace = registry_and_namespace(local_registry, namespace_override, zone)
    return {key: image_ref(i["repo"], str(i["tag"]), registry, namespace) for key, i in images.items()}


def catalogue(roles_dir: Path, version: str = KS_VERSION) -> dict[str, dict[str, str]]:
    """The catalogue as the roles see it (the KubeSphere version in the tags that name it)."""
    images = yaml.safe_load((roles_dir / CATALOGUE_FILE).read_text())["ks_images"]
    return {key: {"repo": i["repo"], "tag": str(i["tag"]).replace("{{ ks_version }}", version)}
            for key, i in images.items()}


def spec_refs(spec: Spec, images: dict[str, dict[str, str]]) -> dict[str, str]:
    """The catalogue's references under ``spec``'s ``local_registry``, ``namespace_override`` and ``zone``."""
    return ks_image_refs(images, *(get(spec, k) or "" for k in ("local_registry", "namespace_override", "zone")))
