"""How the engine runs ansible-playbook: the fork server, the one launcher (ansible_playbook) and every change the
installer makes to Ansible's and Jinja's own functions (ansible_patches)."""
