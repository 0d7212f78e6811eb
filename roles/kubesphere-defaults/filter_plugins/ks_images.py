"""Jinja filters: full image references from the catalogue (``ks_images`` in defaults/main.yaml)."""

from __future__ import annotations

from typing import Any

from installer.objects.images import ks_image_refs


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_image_refs": ks_image_refs}
