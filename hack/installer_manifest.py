"""deploy/kubesphere-installer.yaml is the Helm chart deploy/charts/ks-installer rendered with its default values.

    python hack/installer_manifest.py           # rewrite the manifest from the chart
    python hack/installer_manifest.py --check   # exit 1 if the manifest is not what the chart renders
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from simcluster import tool_path

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "deploy" / "charts" / "ks-installer"
MANIFEST = REPO / "deploy" / "kubesphere-installer.yaml"
HEADER = ("# The installer: CRD, namespace, RBAC and Deployment. Rendered from the Helm chart\n"
          "# deploy/charts/ks-installer with its default values by hack/installer_manifest.py: edit the chart,\n"
          "# then run that script.\n")


def render(*helm_args: str) -> str:
    """``helm template`` of the chart (release ks-installer), without Helm's ``# Source`` lines."""
    out = subprocess.run([str(tool_path("helm")), "template", "ks-installer", str(CHART), *helm_args],
                         capture_output=True, text=True, check=True).stdout
    return "".join(line for line in out.splitlines(keepends=True) if not line.startswith("# Source: "))


def adopt(kubectl: Callable[..., subprocess.CompletedProcess[str]], release: str, release_namespace: str) -> None:
    """Hand objects a ``kubectl apply`` of the manifest made over to Helm release ``release``: the label and
    annotations Helm checks before it takes an existing object into a release. ``kubectl(*args, check=...)``."""
    for obj in (d for d in yaml.safe_load_all(render()) if d):
        ref = [obj["kind"], obj["metadata"]["name"]]
        if obj["metadata"].get("namespace"):
            ref += ["-n", obj["metadata"]["namespace"]]
        if kubectl("get", *ref, check=False).returncode:
            continue
        kubectl("label", "--overwrite", *ref, "app.kubernetes.io/managed-by=Helm")
        kubectl("annotate", "--overwrite", *ref, f"meta.helm.sh/release-name={release}",
                f"meta.helm.sh/release-namespace={release_namespace}")


def main(argv: list[str]) -> int:
    manifest = HEADER + render()
    if "--check" in argv:
        if MANIFEST.read_text() != manifest:
            print(f"{MANIFEST.relative_to(REPO)} differs from the chart: run python hack/installer_manifest.py",
                  file=sys.stderr)
            return 1
        return 0
    MANIFEST.write_text(manifest)
    print(f"wrote {MANIFEST.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
