"""The welcome box's console address: the first node by name with an InternalIP, read a page at a time."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from installer.engine.welcome import first_internal_ip


class PagedNodes:
    """Lists nodes as the API does: in name order, ``limit`` per page, a continue token while more are left."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = sorted(nodes, key=lambda n: n["metadata"]["name"])
        self.pages = 0

    def list_node(self, limit: int, _continue: str | None, _preload_content: bool) -> Any:
        self.pages += 1
        start = int(_continue or 0)
        rest = start + limit < len(self.nodes)
        body = {"items": self.nodes[start:start + limit],
                "metadata": {"continue": str(start + limit)} if rest else {}}
        return SimpleNamespace(data=json.dumps(body).encode())


def node(name: str, *addresses: tuple[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"addresses": [{"type": t, "address": a} for t, a in addresses]}}


def test_first_node_by_name_with_an_internal_ip_across_pages() -> None:
    nodes = [node(f"n{i:03d}", ("Hostname", f"n{i:03d}")) for i in range(45)]
    nodes += [node("n100", ("InternalIP", "10.1.0.100")), node("n050", ("ExternalIP", "1.2.3.4"),
                                                                   ("InternalIP", "10.1.0.50"))]
    api = PagedNodes(nodes)
    assert first_internal_ip(api, page=20) == "10.1.0.50"  # type: ignore[arg-type]
    assert api.pages == 3  # stops at the page that has it, never reads the rest


def test_no_node_with_an_internal_ip() -> None:
    api = PagedNodes([node("a", ("Hostname", "a")), node("b")])
    assert first_internal_ip(api, page=1) is None  # type: ignore[arg-type]
    assert api.pages == 2
