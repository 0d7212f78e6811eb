"""The installer image's SBOM (SPDX 2.3, JSON): what its root filesystem holds, by where each file came from.

    python3 hack/image_sbom.py ROOTFS OUT [NAME=VERSION:PATH ...]

Run in the Dockerfile's build stage after hack/image_rootfs.py, with the virtualenv's Python (it names the image as
``installer.version`` does, which ``python -m installer images`` prints). It lists the Debian packages that contributed
at least one file to ROOTFS (the build stage's dpkg database: which package installed the file at that path, if the
rootfs holds the same file; a compiled module counts for its source), with their versions and the number of their files
in the image; the Python distributions in the virtualenv (their ``.dist-info``); and the binaries given as arguments
(their version and sha256). The image keeps the SBOM, not the package databases it was made from.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import sys
import uuid
from collections import Counter
from email.parser import HeaderParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from installer.version import INSTALLER_IMAGE

DPKG = Path("/var/lib/dpkg")
SITE_PACKAGES = "opt/ks-installer/venv/lib/python3.11/site-packages"
#: Files a package's maintainer script generates rather than ships.
GENERATED = {"/etc/ssl/certs/ca-certificates.crt": "ca-certificates"}


def spdx_id(kind: str, name: str) -> str:
    return "SPDXRef-" + "".join(c if c.isalnum() or c in ".-" else "-" for c in f"{kind}-{name}")


def real_key(path: str) -> str:
    """A dpkg path as it lies on this merged-/usr system: its directory resolved, its name kept."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def dpkg_owners() -> dict[str, str]:
    owners: dict[str, str] = {}
    for listing in (DPKG / "info").glob("*.list"):
        package = listing.stem.split(":")[0]
        for line in listing.read_text(errors="replace").splitlines():
            if line and line != "/.":
                owners.setdefault(real_key(line), package)
    return owners


def dpkg_installed() -> dict[str, dict[str, str]]:
    """Package → its status fields (installed packages only)."""
    out: dict[str, dict[str, str]] = {}
    for stanza in (DPKG / "status").read_text().split("\n\n"):
        fields = dict(HeaderParser().parsestr(stanza).items())
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            out[fields["Package"]] = fields
    return out


def copied(root: Path, path: Path) -> str:
    """The path of a rootfs file here when it is a copy of this system's file there (a compiled module: of its
    source); "" for files made for the image (/etc/passwd) and for symlinked directories (/lib)."""
    here = "/" + str(path.relative_to(root))
    if "/__pycache__/" in here and here.endswith(".pyc"):
        directory, name = here.split("/__pycache__/")
        source = f"{directory}/{name.split('.')[0]}.py"
        return here if (root / source.lstrip("/")).is_file() else ""
    if os.path.isdir(here):
        return ""
    if path.is_symlink():
        return here if os.path.islink(here) and os.readlink(here) == os.readlink(path) else ""
    return here if os.path.isfile(here) and not os.path.islink(here) and filecmp.cmp(here, path, shallow=False) else ""


def owner_of(path: str, owners: dict[str, str]) -> str | None:
    if not path:
        return None
    if path in GENERATED:
        return GENERATED[path]
    if "/__pycache__/" in path and path.endswith(".pyc"):  # compiled here: its source's package
        directory, name = path.split("/__pycache__/")
        path = f"{directory}/{name.split('.')[0]}.py"
    return owners.get(path)


def debian_packages(root: Path) -> list[dict[str, Any]]:
    owners, installed = dpkg_owners(), dpkg_installed()
    counts: Counter[str] = Counter()
    for path in root.rglob("*"):
        if (path.is_symlink() or path.is_file()) and (package := owner_of(copied(root, path), owners)):
            counts[package] += 1
    packages = []
    for name in sorted(counts):
        fields = installed[name]
        version, arch = fields["Version"], fields["Architecture"]
        purl = f"pkg:deb/debian/{name}@{quote(version)}?arch={arch}&distro=debian-12"
        packages.append(package_entry("deb", name, version, purl, supplier="Organization: Debian",
                                      comment=f"{counts[name]} files in the image", source=fields.get("Source")))
    return packages


def python_distributions(root: Path) -> list[dict[str, Any]]:
    packages = []
    for meta in sorted((root / SITE_PACKAGES).glob("*.dist-info/METADATA")):
        fields = HeaderParser().parsestr(meta.read_text(errors="replace"))
        name, version = fields["Name"], fields["Version"]
        license_ = fields.get("License-Expression") or ""
        packages.append(package_entry("pypi", name, version, f"pkg:pypi/{name.lower()}@{version}",
                                      license_declared=license_ or None))
    return packages


def binaries(root: Path, specs: list[str]) -> list[dict[str, Any]]:
    packages = []
    for spec in specs:
        name_version, path = spec.split(":", 1)
        name, version = name_version.split("=", 1)
        digest = hashlib.sha256((root / path.lstrip("/")).read_bytes()).hexdigest()
        entry = package_entry("bin", name, version, None, comment=f"{path} in the image")
        entry["checksums"] = [{"algorithm": "SHA256", "checksumValue": digest}]
        packages.append(entry)
    return packages


def package_entry(kind: str, name: str, version: str, purl: str | None, supplier: str | None = None,
                  comment: str | None = None, source: str | None = None,
                  license_declared: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "SPDXID": spdx_id(kind, name), "versionInfo": version,
                             "downloadLocation": "NOASSERTION", "filesAnalyzed": False}
    if supplier:
        entry["supplier"] = supplier
    if purl:
        entry["externalRefs"] = [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                                  "referenceLocator": purl}]
    if comment:
        entry["comment"] = comment
    if source:
        entry["sourceInfo"] = f"built from Debian source package {source}"
    if license_declared:
        entry["licenseDeclared"] = license_declared if license_declared.isascii() else "NOASSERTION"
    return entry


def document(root: Path, specs: list[str]) -> dict[str, Any]:
    packages = [*debian_packages(root), *python_distributions(root), *binaries(root, specs)]
    image = {"name": INSTALLER_IMAGE, "SPDXID": "SPDXRef-image", "versionInfo": INSTALLER_IMAGE.rpartition(":")[2],
             "downloadLocation": "NOASSERTION", "filesAnalyzed": False, "primaryPackagePurpose": "CONTAINER"}
    digest = hashlib.sha256(json.dumps(packages, sort_keys=True).encode()).hexdigest()
    created = os.environ.get("SOURCE_DATE_EPOCH")
    return {
        "spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT", "name": INSTALLER_IMAGE,
        "documentNamespace": f"https://spdx.org/spdxdocs/{INSTALLER_IMAGE.replace(':', '-')}-"
                             f"{uuid.uuid5(uuid.NAMESPACE_URL, digest)}",
        "creationInfo": {"creators": ["Tool: ks-installer hack/image_sbom.py"],
                         "created": _timestamp(int(created) if created else None)},
        "packages": [image, *packages],
        "relationships": [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                           "relatedSpdxElement": "SPDXRef-image"},
                          *({"spdxElementId": "SPDXRef-image", "relationshipType": "CONTAINS",
                             "relatedSpdxElement": p["SPDXID"]} for p in packages)],
    }


def _timestamp(epoch: int | None) -> str:
    import datetime

    when = datetime.datetime.fromtimestamp(epoch, datetime.UTC) if epoch is not None else datetime.datetime.now(
        datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, out = Path(argv[1]), Path(argv[2])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document(root, argv[3:]), indent=1) + "\n")
    out.chmod(0o644)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
