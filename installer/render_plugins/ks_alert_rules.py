"""Records a ks_alert_rules task (see installer.render_plugins)."""

from installer.render_plugins._recorder import Recorder


class ActionModule(Recorder):
    NAME = "ks_alert_rules"
