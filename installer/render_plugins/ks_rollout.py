"""Records a ks_rollout task (see installer.render_plugins): nothing rolled."""

from typing import Any

from installer.render_plugins._recorder import Recorder


class ActionModule(Recorder):
    NAME = "ks_rollout"

    def answer(self, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        return {"rolled": [], "missing": []}, None
