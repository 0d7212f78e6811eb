"""Jinja filter ``ks_live_claim``: the size and StorageClass of an existing volume (installer.objects.claims)."""

from __future__ import annotations

from typing import Any

from installer.objects.claims import live_claim


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_live_claim": live_claim}
