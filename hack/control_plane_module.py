"""The Go module that builds Kubernetes' control plane at a chosen version (for ``hack/build-tools.sh``).

``k8s.io/kubernetes`` replaces its staging modules (``k8s.io/api``, ``k8s.io/client-go``, ...) with paths inside
its own repository, which a module that requires it cannot use: the wrapper module written here replaces each with
its published ``v0.MINOR.PATCH`` instead. Where the module proxy does not serve that patch, the nearest older patch
it serves is taken (same minor: the staging modules' APIs do not change within a minor). Versions whose module
lacks the generated OpenAPI definitions (``pkg/generated/openapi/zz_generated.openapi.go``, which Kubernetes'
own build generates before it compiles, up to v1.23) get them generated as that build does: ``openapi-gen`` of
the ``k8s.io/kube-openapi`` that ``k8s.io/kubernetes`` pins, over every package tagged ``+k8s:openapi-gen=``, and
checked as that build checks it (its API rule violations must be the module's known list); the module is then
built from a copy of ``k8s.io/kubernetes`` with that file (the module cache stays read-only, and go refuses to
overlay files in it). Usage::

    python3 hack/control_plane_module.py gomod v1.26.15 DIR     # writes DIR/go.mod
    python3 hack/control_plane_module.py openapi DIR            # generates the OpenAPI definitions where missing
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from k8s_versions import parse

MODULE = "ks-installer.local/controlplane"
OPENAPI_FILE = "pkg/generated/openapi/zz_generated.openapi.go"
OPENAPI_PACKAGE = "k8s.io/kubernetes/pkg/generated/openapi"
KNOWN_VIOLATIONS = "api/api-rules/violation_exceptions.list"
# Staging modules whose tagged packages Kubernetes' build leaves out of pkg/generated/openapi (they have their own).
OPENAPI_EXCLUDED = ("k8s.io/code-generator", "k8s.io/sample-apiserver")
_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[a-z0-9-]+)\s+=>\s+\./staging/", re.M)
_REQUIRE_BLOCK = re.compile(r"^require \($(.*?)^\)", re.M | re.S)


def log(msg: str) -> None:
    print(f"[build-tools] {msg}", file=sys.stderr, flush=True)


def go(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``go <args>`` (argv, no shell) with the environment of build-tools.sh."""
    proc = subprocess.run(["go", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check and proc.returncode:
        raise SystemExit(f"go {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def staging_modules(kubernetes_mod: str) -> list[str]:
    """The staging modules ``k8s.io/kubernetes``' go.mod both requires and replaces with a local path."""
    lines = (line.strip() for block in _REQUIRE_BLOCK.findall(kubernetes_mod) for line in block.splitlines())
    required = {line.split()[0] for line in lines if line and not line.startswith("//")}
    return [m for m in _STAGING_REPLACE.findall(kubernetes_mod) if m in required]


def staging_version(kubernetes: str) -> str:
    """v1.26.15 -> v0.26.15, the release of the staging modules published with it."""
    _, minor, patch = parse(kubernetes)
    return f"v0.{minor}.{patch}"


def nearest_served(module: str, want: str, served: Callable[[str, str], bool]) -> str | None:
    """``want`` if ``served(module, want)``, else the newest older patch of its minor that is; None if none is."""
    major_minor, patch = want.rsplit(".", 1)
    for candidate in range(int(patch), -1, -1):
        version = f"{major_minor}.{candidate}"
        if served(module, version):
            return version
    return None


def _json_stream(text: str) -> Iterable[dict]:
    """The JSON objects ``go mod download -json`` prints one after another."""
    decoder, index = json.JSONDecoder(), 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            return
        obj, index = decoder.raw_decode(text, index)
        yield obj


def _served(result: dict) -> str | None:
    """What the proxy serves of a ``go mod download -json`` result: "zip" (the module), "mod" (only its go.mod:
    enough for a module that only takes part in version selection, like sample-apiserver) or None."""
    error = result.get("Error", "")
    if not error:
        return "zip"
    return "mod" if ".zip:" in error and Path(result.get("GoMod") or "/nonexistent").is_file() else None


def download(modules: Iterable[str], cwd: Path) -> dict[str, str | None]:
    """``module@version`` -> what is served of it (:func:`_served`), from one ``go mod download`` of them all."""
    refs = list(modules)
    proc = go("mod", "download", "-json", *refs, cwd=cwd, check=False)
    out = {f"{r['Path']}@{r['Version']}": _served(r) for r in _json_stream(proc.stdout)}
    return {ref: out.get(ref) for ref in refs}


def compatible_requires(kubernetes: str) -> dict[str, str]:
    """Newer releases of dependencies that a version's own pins do not run with on this Go.

    Before v1.23 Kubernetes pins json-iterator v1.1.10/11 with reflect2 v1.0.1, which relies on Go's map internals
    before Go 1.18 and fails on later Go; reflect2 v1.0.2 and json-iterator v1.1.12 (v1.23's pins) were released
    for Go 1.18.
    """
    if parse(kubernetes)[1] < 23:
        return {"github.com/json-iterator/go": "v1.1.12", "github.com/modern-go/reflect2": "v1.0.2"}
    return {}


def go_mod(kubernetes: str, replacements: dict[str, str]) -> str:
    """The wrapper module's go.mod."""
    requires = {"k8s.io/kubernetes": kubernetes, **compatible_requires(kubernetes)}
    lines = [f"module {MODULE}", "", "go 1.24", ""]
    lines += [f"require {module} {version}" for module, version in requires.items()] + [""]
    lines += [f"replace {module} => {module} {version}" for module, version in replacements.items()]
    return "\n".join(lines) + "\n"


def write_go_mod(kubernetes: str, directory: Path) -> dict[str, str]:
    """Resolve every staging module of ``kubernetes`` to a served version and write ``directory/go.mod``."""
    directory.mkdir(parents=True, exist_ok=True)
    info = json.loads(go("mod", "download", "-json", f"k8s.io/kubernetes@{kubernetes}", cwd=directory).stdout)
    modules = staging_modules(Path(info["GoMod"]).read_text())
    want = staging_version(kubernetes)
    first = download((f"{m}@{want}" for m in modules), directory)
    replacements = {}
    for module in modules:
        if first[f"{module}@{want}"] == "zip":
            replacements[module] = want
            continue
        found = nearest_served(module, want, lambda m, v: download([f"{m}@{v}"], directory)[f"{m}@{v}"] == "zip")
        if found is not None:
            log(f"{module}@{want} is not served; using {found}, the nearest served patch")
        elif first[f"{module}@{want}"] == "mod":
            found = want  # only its go.mod: enough unless the build imports it (then go says so)
        else:
            raise SystemExit(f"no {module} of {want.rsplit('.', 1)[0]}.x is served by the module proxy")
        replacements[module] = found
    (directory / "go.mod").write_text(go_mod(kubernetes, replacements))
    return replacements


# --------------------------------------------------------------------------------------------- openapi


def _skip_dir(name: str) -> bool:
    """Directories Kubernetes' build does not look into for tags (``hack/make-rules/helpers/cache_go_dirs.sh``)."""
    return name.startswith(("_", ".")) or name == "vendor"


def openapi_packages(root: Path, import_path: str) -> list[str]:
    """Packages under ``root`` (imported as ``import_path``) with a Go file tagged ``+k8s:openapi-gen=``, as
    Kubernetes' Makefile.generated_files finds them: a file with a ``// +k8s:`` comment line naming openapi-gen."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not _skip_dir(d))
        for name in filenames:
            if not name.endswith(".go"):
                continue
            text = (Path(dirpath) / name).read_text(errors="replace")
            if "+k8s:openapi-gen=" in text and re.search(r"^// *\+k8s:", text, re.M):
                rel = Path(dirpath).relative_to(root).as_posix()
                found.append(import_path if rel == "." else f"{import_path}/{rel}")
                break
    return sorted(found)


def module_dir(module: str, cwd: Path) -> Path:
    """Where the module cache holds ``module`` (as the module in ``cwd`` requires it); SystemExit if it is absent."""
    found = go("list", "-m", "-f", "{{.Dir}}", module, cwd=cwd).stdout.strip()
    if not found:
        raise SystemExit(f"{module} is not in the module cache (the proxy served only its go.mod)")
    return Path(found)


def generate_openapi(directory: Path) -> bool:
    """For a module written by :func:`write_go_mod`: if ``k8s.io/kubernetes`` lacks the OpenAPI definitions,
    generate them into a copy of it (``directory/kubernetes``, hard links to the module cache but for the new file)
    that the module then replaces it with; whether it did."""
    kube = module_dir("k8s.io/kubernetes", directory)
    if (kube / OPENAPI_FILE).is_file():
        return False
    replaced = re.findall(r"^replace (\S+) =>", (directory / "go.mod").read_text(), re.M)
    packages = openapi_packages(kube, "k8s.io/kubernetes")
    for module in replaced:
        if module not in OPENAPI_EXCLUDED:
            packages += openapi_packages(module_dir(module, directory), module)
    log(f"generating {OPENAPI_FILE} from {len(packages)} tagged packages (openapi-gen)")
    tool = directory / "openapi-gen"
    go("build", "-o", str(tool), "k8s.io/kube-openapi/cmd/openapi-gen", cwd=directory)
    out = directory / "openapi-out"
    proc = subprocess.run(
        [str(tool), "--logtostderr", "-i", ",".join(packages), "-p", OPENAPI_PACKAGE, "-O", "zz_generated.openapi",
         "-h", str(kube / "hack/boilerplate/boilerplate.generatego.txt"), "-o", str(out),
         "-r", str(directory / "openapi-violations.report")],
        cwd=directory, capture_output=True, text=True, check=False)
    generated = out / OPENAPI_PACKAGE / "zz_generated.openapi.go"
    if proc.returncode or not generated.is_file():
        raise SystemExit(f"openapi-gen failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    check_violations(directory / "openapi-violations.report", kube / KNOWN_VIOLATIONS)
    copy = directory / "kubernetes"
    writable_copy(kube, copy)
    shutil.copyfile(generated, copy / OPENAPI_FILE)
    with (directory / "go.mod").open("a") as gomod:
        gomod.write("replace k8s.io/kubernetes => ./kubernetes\n")
    return True


def writable_copy(src: Path, dst: Path) -> None:
    """``src`` (a read-only module in the module cache) at ``dst`` as hard links (copies across file systems), in
    directories the build may write to and remove."""
    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)
    shutil.copytree(src, dst, copy_function=link, symlinks=True)
    for dirpath, _, _ in os.walk(dst):
        os.chmod(dirpath, 0o755)


def check_violations(report: Path, known: Path) -> None:
    """Fail as Kubernetes' build does when openapi-gen's API rule violations differ from the module's known list:
    then the inputs were not the ones Kubernetes generated from."""
    found, expected = (set(p.read_text().splitlines()) if p.is_file() else set() for p in (report, known))
    if found != expected:
        raise SystemExit(f"openapi-gen's API rule violations differ from {known}: "
                         f"{len(found - expected)} more, {len(expected - found)} missing (report: {report})")


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "gomod":
        write_go_mod(argv[1], Path(argv[2]))
    elif len(argv) == 2 and argv[0] == "openapi":
        generate_openapi(Path(argv[1]))
    else:
        print("usage: control_plane_module.py gomod VERSION DIR | openapi DIR", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
