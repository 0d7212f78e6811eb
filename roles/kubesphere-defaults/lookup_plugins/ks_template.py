"""``lookup('ks_template', 'file.j2')``: ``ansible.builtin.template`` without a deep copy of every variable.

The built-in lookup deep-copies all of the host's variables for each file it renders, so that the variables it adds
(``template_path`` and the like) do not leak; ansible-core's own comment there asks for a ChainMap with a sacrificial
layer instead. With the roles' large variables (the spec, the defaults, parsed CRDs and rule files) that copy was
most of a render's time. This lookup is the built-in one with that layer: the variables it adds go into an empty
mapping in front of the host's, which it never writes. The roles' templates build their own lists and mappings
(``{% set x = [] %}``) and change no host variable.
"""

from __future__ import annotations

from collections import ChainMap
from typing import Any

from ansible.plugins.lookup import template as builtin


def _layered(variables: Any) -> ChainMap[str, Any]:
    return ChainMap({}, variables)


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
        copy = builtin.deepcopy
        builtin.deepcopy = _layered  # the built-in run's only use of it: the copy of ``variables``
        try:
            return super().run(terms, variables, **kwargs)
        finally:
            builtin.deepcopy = copy
