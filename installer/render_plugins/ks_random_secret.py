"""Records a ks_random_secret task (see installer.render_plugins); later reads of the run see its Secret."""

from typing import Any

from installer.render_plugins._recorder import Recorder, note_generated, plain


class ActionModule(Recorder):
    NAME = "ks_random_secret"

    def answer(self, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        args = plain(params)
        note_generated(self.host, args["namespace"], args["name"], [str(args["key"])])
        return {}, None
