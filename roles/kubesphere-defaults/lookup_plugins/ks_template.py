"""``lookup('ks_template', 'file.j2')``: ``ansible.builtin.template`` without a deep copy of every variable.

The built-in lookup deep-copies all of the host's variables for each file it renders, so that the variables it adds
(``template_path`` and the like) do not leak; ansible-core's own comment there asks for a ChainMap with a sacrificial
layer instead. With the roles' large variables (the spec, the defaults, parsed CRDs and rule files) that copy was
most of a render's time. This lookup is the built-in one with that layer: the variables it adds go into an empty
mapping in front of the host's, which it never writes. The roles' templates build their own lists and mappings
(``{% set x = [] %}``) and change no host variable. The layering relies on the built-in lookup's code, and is done
where the installer keeps what relies on Ansible's internals (installer.launch.ansible_private); on an ansible-core
release it was not written for, the built-in lookup runs unchanged.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.lookup import template as builtin

from installer.launch.ansible_private import template_lookup_without_copy

#: The built-in lookup's options at their defaults (the roles pass none; this lookup takes none).
OPTIONS = {"template_vars": {}, "variable_start_string": "{{", "variable_end_string": "}}",
           "comment_start_string": "{#", "comment_end_string": "#}", "trim_blocks": True}


class LookupModule(builtin.LookupModule):
    def set_options(self, task_keys: Any = None, var_options: Any = None, direct: Any = None) -> None:
        if direct:
            raise ValueError(f"ks_template takes no options, got {sorted(direct)}")

    def get_option(self, option: str, hostvars: Any = None) -> Any:
        return OPTIONS[option]

    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[Any]:
        with template_lookup_without_copy():
            return super().run(terms, variables, **kwargs)
