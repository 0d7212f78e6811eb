"""Where DevOps and the App Store keep their objects: the built-in MinIO, or the external S3 that
``common.s3.endpoint`` names. One rule for the registry (whether the minio module runs) and the roles (which
Secret and keys the workloads read)."""

from __future__ import annotations

from typing import Any


def external_s3(common: Any) -> bool:
    """Whether ``common`` (the spec's ``common`` section) names an external S3 endpoint."""
    s3 = common.get("s3") if isinstance(common, dict) else None
    return bool(isinstance(s3, dict) and s3.get("endpoint"))
