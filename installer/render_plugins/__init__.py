"""Recording action plugins for :mod:`installer.render`: each ``ks_*`` task's arguments are appended to
``$KS_CAPTURE_DIR/<host>.jsonl`` instead of touching the cluster, and the task answers as a cluster would.

A render points ``ANSIBLE_ACTION_PLUGINS`` at this directory; an install never does (its action plugins are in
``plugins/action``), so these never run in place of the real ones. The read-only ``ks_info`` reads the
cluster in ``$KUBECONFIG``, or, with ``$KS_RENDER_WORLD`` (JSON: kind -> objects), answers from that. The recorder
itself is in ``_recorder`` (Ansible skips plugin files named with a leading underscore); this file holds only what
the engine shares with it.
"""

import base64

CAPTURE_ENV = "KS_CAPTURE_DIR"
WORLD_ENV = "KS_RENDER_WORLD"
GENERATED = "(generated)"
"""What a render shows for a credential the installer would generate."""
#: The CA bundle a webhook certificate that would be generated gets in a render (its real value is not known yet).
GENERATED_CA = base64.b64encode(GENERATED.encode()).decode()
