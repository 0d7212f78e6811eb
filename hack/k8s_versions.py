"""The simulated cluster's Kubernetes version and what differs between versions.

``hack/versions.env`` pins one Kubernetes version (``KUBERNETES_VERSION``); ``KS_KUBERNETES_VERSION`` (or
``simcluster.py up --kubernetes``) chooses another for the control plane: kube-apiserver, kube-controller-manager
and kube-scheduler, built by ``hack/build-tools.sh`` at that version (the scheduler of one version does not work
against the API server of another, so all three are one version). kubectl, helm, etcd, shell-operator and
metrics-server stay at their pinned versions. This module says which binary of each tool a cluster runs and the
flags that differ by version; its functions take the version and return argv fragments, so nothing here starts
anything. Run as a script it prints a tool's version for ``build-tools.sh``::

    python3 hack/k8s_versions.py kubernetes          # the chosen control plane version
    python3 hack/k8s_versions.py kwok                # the kwok release that simulates its nodes
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

ENV = "KS_KUBERNETES_VERSION"
"""Chooses the control plane's version (``v1.26.15``); unset or empty: ``KUBERNETES_VERSION`` of versions.env."""
OLDEST = (1, 21)
"""The oldest minor this module knows the flags of."""
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
"""The tools built at the chosen version; every other tool keeps its pinned version."""
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
_VERSIONS_ENV = Path(__file__).resolve().parent / "versions.env"


def parse(version: str) -> tuple[int, int, int]:
    """``v1.26.15`` (or ``1.26.15``) as (1, 26, 15); ValueError for anything else or a minor before :data:`OLDEST`."""
    match = _VERSION.fullmatch(version.strip())
    if not match:
        raise ValueError(f"not a Kubernetes version: {version!r} (expected v1.MINOR.PATCH, e.g. v1.26.15)")
    parsed = (int(match[1]), int(match[2]), int(match[3]))
    if parsed[:2] < OLDEST:
        raise ValueError(f"Kubernetes {version} is older than v{OLDEST[0]}.{OLDEST[1]}, the oldest the simulated "
                         "cluster knows the flags of")
    return parsed


def normalize(version: str) -> str:
    """``1.26.15`` -> ``v1.26.15`` (checked by :func:`parse`)."""
    return "v{}.{}.{}".format(*parse(version))


def pinned_versions(path: Path = _VERSIONS_ENV) -> dict[str, str]:
    """The KEY=VALUE pins of ``hack/versions.env``."""
    out = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith("#"):
            out[key.strip()] = value.strip().strip("'\"")
    return out


def cluster_version(pinned: Mapping[str, str] | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """The control plane's version: ``$KS_KUBERNETES_VERSION`` if set, else the pinned ``KUBERNETES_VERSION``."""
    chosen = environ.get(ENV, "").strip()
    if chosen:
        return normalize(chosen)
    return (pinned if pinned is not None else pinned_versions())["KUBERNETES_VERSION"]


def kwok_version(kubernetes: str, pinned: Mapping[str, str]) -> str:
    """The kwok release that plays the kubelet of a cluster at ``kubernetes``.

    The pinned ``KWOK_VERSION`` for every version from :data:`OLDEST` on: kwok is a client of the API server (Nodes,
    Pods, Leases, all served at v1 since long before v1.21), and v0.8.0 plays the nodes and pods of every version
    alike; its volume Stages need the API server's OpenAPI v3 (see :data:`KWOK_VOLUMES_FROM`), and no kwok
    release that plays volumes does without it (v0.5 to v0.8 all read it).
    """
    parse(kubernetes)
    return pinned["KWOK_VERSION"]


def tool_version(name: str, pinned: Mapping[str, str], kubernetes: str | None = None) -> str:
    """The version of tool ``name`` in a cluster whose control plane runs ``kubernetes`` (default:
    :func:`cluster_version`); KeyError for a tool with no pinned version here."""
    keys = {"kubectl": "KUBERNETES_VERSION", "etcd": "ETCD_VERSION", "shell-operator": "SHELL_OPERATOR_VERSION",
            "helm": "HELM_VERSION", "metrics-server": "METRICS_SERVER_VERSION"}
    if name in CONTROL_PLANE:
        return kubernetes or cluster_version(pinned)
    if name == "kwok":
        return kwok_version(kubernetes or cluster_version(pinned), pinned)
    return pinned[keys[name]]


KWOK_VOLUMES_FROM = 24
"""The first minor whose volumes kwok plays. kwok (v0.5 on) reads OpenAPI v3 (``/openapi/v3``) for the patch
metadata of every resource a Stage of its own kind plays (here PersistentVolumeClaims and PersistentVolumes) and
exits without it; the API server serves it from v1.24 (v1.23's alpha ``OpenAPIV3`` gate serves a discovery format
client-go cannot read). Before that kube-controller-manager's hostPath provisioner binds the claims instead."""
KWOK_VOLUME_PROVISIONER = "kwok.x-k8s.io/volume"
HOSTPATH_PROVISIONER = "kubernetes.io/host-path"
_VOLUME_KINDS = ("PersistentVolumeClaim", "PersistentVolume")


def kwok_plays_volumes(kubernetes: str) -> bool:
    """Whether kwok's volume Stages can run against ``kubernetes`` (see :data:`KWOK_VOLUMES_FROM`)."""
    return parse(kubernetes)[1] >= KWOK_VOLUMES_FROM


def volume_provisioner(kubernetes: str) -> str:
    """The provisioner of the default StorageClass: kwok's, or the controller-manager's hostPath one before
    :data:`KWOK_VOLUMES_FROM` (it makes a directory under /tmp/hostpath_pv per volume and removes it with it)."""
    return KWOK_VOLUME_PROVISIONER if kwok_plays_volumes(kubernetes) else HOSTPATH_PROVISIONER


def kwok_stages_for(stages: str, kubernetes: str) -> str:
    """kwok's stage set (YAML documents) for ``kubernetes``: without the volume Stages where kwok cannot play
    them."""
    if kwok_plays_volumes(kubernetes):
        return stages
    docs = stages.split("\n---\n")
    kept = [d for d in docs if not any(f"kind: {kind}}}" in d for kind in _VOLUME_KINDS)]
    return "\n---\n".join(kept) + ("" if kept[-1].endswith("\n") else "\n")


def controller_manager_flags(kubernetes: str) -> list[str]:
    """kube-controller-manager's flags that differ by version.

    The cloud controllers are off (there is no cloud): before v1.28 they are named ``service``, ``route`` and
    ``cloud-node-lifecycle``; v1.28 named them ``service-lb-controller``, ``node-route-controller`` and
    ``cloud-node-lifecycle`` (the old names are aliases there). Before v1.22 the controller-manager also serves
    plain HTTP on port 10252 unless ``--port=0``: two clusters side by side would fight over it. Where kwok
    cannot play volumes its hostPath provisioner binds the claims (:func:`volume_provisioner`).
    """
    minor = parse(kubernetes)[1]
    if minor < 28:
        flags = ["--controllers=*,-cloud-node-lifecycle,-service,-route"]
    else:
        flags = ["--controllers=*,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller"]
    if minor < 22:
        flags.append("--port=0")
    if not kwok_plays_volumes(kubernetes):
        flags.append("--enable-hostpath-provisioner=true")
    return flags


def scheduler_flags(kubernetes: str) -> list[str]:
    """kube-scheduler's flags that differ by version: before v1.23 it serves plain HTTP on port 10251 unless
    ``--port=0`` (v1.23 only accepts 0, v1.24 dropped the flag)."""
    return ["--port=0"] if parse(kubernetes)[1] < 23 else []


def main(argv: list[str]) -> int:
    """``kubernetes`` | ``kwok``: print that version for ``build-tools.sh``."""
    if len(argv) != 1 or argv[0] not in ("kubernetes", "kwok"):
        print("usage: k8s_versions.py kubernetes|kwok", file=sys.stderr)
        return 2
    pinned = pinned_versions()
    try:
        kubernetes = cluster_version(pinned)
        print(kubernetes if argv[0] == "kubernetes" else kwok_version(kubernetes, pinned))
    except ValueError as exc:
        print(f"{ENV}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
