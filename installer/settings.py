"""Names every part shares, the Ansible side included (the labels and field manager of every object it applies):
a change here re-runs every module. The engine's runtime settings are in installer/engine_settings.py."""

from __future__ import annotations

NAMESPACE = "kubesphere-system"
CC_NAME = "ks-installer"
CC_GROUP = "installer.kubesphere.io"
CC_VERSION = "v1alpha1"
CC_PLURAL = "clusterconfigurations"
CC_KIND = "ClusterConfiguration"
STATE_SECRET = "ks-installer-state"
#: ks-core's Secret (JWT secret, token, initAdminPassword): upstream's name, read by KubeSphere and its users.
CORE_SECRET = "kubesphere-secret"
LEASE_NAME = "ks-installer"
FIELD_MANAGER = "ks-installer"
MODULE_LABEL = "installer.kubesphere.io/module"
MANAGED_BY = {"app.kubernetes.io/managed-by": "ks-installer"}
RETRY_ANNOTATION = "installer.kubesphere.io/retry"
PURGE_ANNOTATION = "installer.kubesphere.io/purge"
"""Modules (comma-separated, or ``all``) whose next uninstall also removes their PVCs and CRDs."""
#: On every object the installer applies: the digest of the manifest it applied last.
APPLIED_ANNOTATION = "installer.kubesphere.io/applied"
#: A user's opt-out on one object, as Flux's ``kustomize.toolkit.fluxcd.io/ssa``: ``IfNotPresent`` (or ``Ignore``)
#: leaves an object that exists as it is (created when absent; still deleted by its module's uninstall).
SSA_ANNOTATION = "installer.kubesphere.io/ssa"
SSA_OPT_OUTS = ("IfNotPresent", "Ignore")
#: On an object (rendered so by its role, or set by a user), as Flux's ``kustomize.toolkit.fluxcd.io/prune``:
#: ``disabled`` keeps it when its module is uninstalled or no longer renders it (a purge deletes it when it is a PVC or
#: a Secret: the data, and the credential that guards it).
PRUNE_ANNOTATION = "installer.kubesphere.io/prune"
PRUNE_DISABLED = "disabled"
#: The Stalled reason of a host -> none/member change refused while member clusters are joined: the spec is fine,
#: the cluster is not yet, so the schedule binding checks again every minute.
MEMBERS_JOINED = "MembersJoined"
