"""Records a ks_manifest task (see installer.render_plugins)."""

from installer.render_plugins._recorder import Recorder


class ActionModule(Recorder):
    NAME = "ks_manifest"
