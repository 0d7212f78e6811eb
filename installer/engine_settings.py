"""The engine's runtime settings: the image's paths and limits, overridable by environment variables for local runs
(engine only: no module's hash covers this file)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]


def _path(var: str, default: str) -> Path:
    return Path(os.environ.get(var, default))


def _source_dir(var: str, default: Path, repo_name: str) -> Path:
    """``$var``; else this checkout's directory when running from source; else the image path."""
    if var in os.environ:
        return Path(os.environ[var])
    checkout = _REPO / repo_name
    return checkout if checkout.exists() else default


IMAGE_PLAYBOOKS = Path("/opt/ks-installer/playbooks")
"""Where the image keeps ``playbooks/`` (the Dockerfile copies it there, beside the roles)."""


def playbooks_home() -> Path:
    """The directory of the plays every module runs (``install.yaml``, ``uninstall.yaml``: installer.engine.plays):
    this checkout's ``playbooks/`` when running from source, else the image's."""
    checkout = _REPO / "playbooks"
    return checkout if checkout.is_dir() else IMAGE_PLAYBOOKS


def default_base_dir() -> Path:
    """``/kubesphere`` in the image; from a checkout, the user's own ``$XDG_CACHE_HOME/ks-installer/kubesphere``
    (``~/.cache/...``), so a local ``plan``, ``reconcile`` or ``uninstall`` writes nothing under ``/kubesphere``
    unless ``KS_BASE_DIR`` says so."""
    if not (_REPO / "roles").exists():
        return Path("/kubesphere")
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ks-installer" / "kubesphere"


@dataclass(frozen=True)
class Settings:
    base_dir: Path
    playbooks_dir: Path | None
    """Plays that replace a module's own (installer.engine.plays; ``KS_PLAYBOOKS_DIR``, for tests): None."""
    roles_dir: Path
    results_dir: Path
    run_dir: Path
    """Private data dirs of running playbooks (they hold the spec): emptied at the start of each reconcile."""
    max_parallel: int
    module_timeout: int
    console_timeout: int
    drift_interval: int
    """Seconds between drift checks on the schedule binding (0: every tick)."""

    @property
    def digest_cache(self) -> Path:
        """Where the modules' file digests are kept between runs (installer.engine.fingerprint.DigestCache)."""
        return self.base_dir / "cache" / "file-digests.json"

    @property
    def template_cache(self) -> Path:
        """Where Jinja's compiled template code is kept between runs (installer.launch.ansible_patches;
        ``KS_TEMPLATE_CACHE``)."""
        return _path("KS_TEMPLATE_CACHE", str(self.base_dir / "cache" / "templates"))

    @property
    def running_file(self) -> Path:
        """The welcome text, where KubeKey looks for it (``/kubesphere/playbooks/kubesphere_running``)."""
        return self.base_dir / "playbooks" / "kubesphere_running"

    @classmethod
    def from_env(cls) -> Settings:
        base = _path("KS_BASE_DIR", str(default_base_dir()))
        return cls(
            base_dir=base,
            playbooks_dir=Path(os.environ["KS_PLAYBOOKS_DIR"]) if os.environ.get("KS_PLAYBOOKS_DIR") else None,
            roles_dir=_source_dir("KS_ROLES_DIR", base / "installer" / "roles", "roles"),
            results_dir=_path("KS_RESULTS_DIR", str(base / "results")),
            run_dir=_path("KS_RUN_DIR", str(base / "run")),
            max_parallel=int(os.environ.get("KS_MAX_PARALLEL", "4")),
            module_timeout=int(os.environ.get("KS_MODULE_TIMEOUT", "3600")),
            console_timeout=int(os.environ.get("KS_CONSOLE_TIMEOUT", "900")),
            drift_interval=int(os.environ.get("KS_DRIFT_INTERVAL", "300")),
        )
