"""Jinja filter: whether the spec's ``common`` names an external S3 (see installer.s3_store)."""

from __future__ import annotations

from typing import Any

from installer.s3_store import external_s3


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_external_s3": external_s3}
