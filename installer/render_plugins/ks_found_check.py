"""Records a ks_found_check task (see installer.render_plugins): a render applies nothing, so it checks nothing."""

from installer.render_plugins._recorder import Recorder


class ActionModule(Recorder):
    NAME = "ks_found_check"
