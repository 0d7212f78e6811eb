"""ks_info in a render (see installer.render_plugins): recorded, then answered from the offline world or read from
the cluster. A wait (a task with ``until``) for Endpoints or a CustomResourceDefinition that the cluster cannot
answer yet (the render's own modules would create them) is answered as ready, so a render never waits."""

from __future__ import annotations

from typing import Any

from installer.render_plugins._recorder import Recorder, plain, with_generated, world


def _from_world(objects: dict[str, list[dict[str, Any]]], params: dict[str, Any]) -> list[dict[str, Any]]:
    name, namespace = params.get("name"), params.get("namespace")
    return [o for o in objects.get(params.get("kind"), [])
            if (not name or o["metadata"]["name"] == name)
            and (not namespace or o["metadata"].get("namespace") == namespace)]


def _ready(kind: str, resources: list[dict[str, Any]]) -> bool:
    if kind == "Endpoints":
        return any(s.get("addresses") for r in resources for s in r.get("subsets") or [])
    if kind == "CustomResourceDefinition":
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for r in resources for c in (r.get("status") or {}).get("conditions") or [])
    return bool(resources)


def _assumed_ready(params: dict[str, Any]) -> list[dict[str, Any]]:
    meta = {"name": params.get("name") or "", **({"namespace": params["namespace"]} if params.get("namespace") else {})}
    if params.get("kind") == "Endpoints":
        return [{"metadata": meta, "subsets": [{"addresses": [{"ip": "192.0.2.1"}]}]}]
    if params.get("kind") == "CustomResourceDefinition":
        return [{"metadata": meta, "status": {"conditions": [{"type": "Established", "status": "True"}]}}]
    return []


class ActionModule(Recorder):
    NAME = "ks_info"

    def answer(self, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        offline = world()
        if offline is not None:
            return {"resources": with_generated(self.host, plain(params), _from_world(offline, params))}, None
        from installer.ansible_tasks import TaskFailed, ks_info

        args = {key: spec.get("default") for key, spec in ks_info.ARGUMENT_SPEC.items()} | plain(params)
        try:
            resources = ks_info.run(args)["resources"]
        except TaskFailed as exc:
            return {"failed": True, "msg": exc.msg}, None
        if self._task.until and params.get("name") and not _ready(args["kind"], resources):
            assumed = _assumed_ready(args)
            if assumed:
                return {"resources": assumed}, {"assumed_ready": True}
        return {"resources": with_generated(self.host, args, resources)}, None
