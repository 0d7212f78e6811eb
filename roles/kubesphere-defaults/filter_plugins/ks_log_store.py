"""Jinja filters: the log store of logging, events and auditing, one choice for every writer and reader (see
installer.log_store)."""

from __future__ import annotations

from typing import Any

from installer.log_store import external_store, log_output, output_name, store_choice, store_kind


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_log_output": log_output, "ks_log_output_name": output_name, "ks_log_store": store_choice,
                "ks_log_store_kind": store_kind, "ks_log_store_external": external_store}
