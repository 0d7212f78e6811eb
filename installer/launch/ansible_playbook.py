"""``ansible-playbook``, run by the installer: the fork server's child of each module run calls :func:`main`, and a
render runs ``python -m installer.launch.ansible_playbook ARGS``, which applies installer.launch.ansible_patches first
(the fork server applied them before it forked the child)."""

from __future__ import annotations

import sys
from pathlib import Path

PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
"""The ``ansible-playbook`` installed beside the engine's interpreter."""


def main(argv: list[str]) -> int:
    """ansible-playbook's main with ``argv`` (``argv[0]`` its name); its exit code. Ansible is imported here, with
    the run's environment (it reads its configuration when imported)."""
    sys.argv = list(argv)
    from ansible.cli.playbook import main as playbook

    try:
        playbook()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    from installer.engine_settings import Settings
    from installer.launch.ansible_patches import apply

    apply(Settings.from_env().template_cache)
    sys.exit(main([str(PLAYBOOK), *sys.argv[1:]]))
