"""Jinja filters: the fluent-bit Output of logging, events and auditing (see installer.log_store)."""

from __future__ import annotations

from typing import Any

from installer.log_store import log_output, output_name


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_log_output": log_output, "ks_log_output_name": output_name}
