"""The installer's Ansible callback plugins (``ANSIBLE_CALLBACK_PLUGINS`` is this directory): ``ks_preload``."""
