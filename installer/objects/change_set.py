"""What an apply does to each object, decided before anything is written (:class:`Decision`), and what a preview
takes as done although the cluster does not have it yet (:class:`Foreseen`).

:meth:`installer.objects.planning.Planning.plan` returns the decisions, reading the cluster only;
:meth:`installer.objects.manifests.Manifests.execute` carries them out; :class:`installer.preview.foresight.Foresight`
shows them (with a server-side dry run of each write) without writing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from installer.objects.refs import Obj, ident

Action = Literal["create", "update", "unchanged", "adopt", "recreate", "kept", "error"]
"""create: absent; update: there, applied again; unchanged: as the installer's last write left it, not written;
adopt: the original installer's, its fields taken over, then applied; recreate: deleted (or being deleted) and
created again; kept: left as it is (a user's opt-out, another module's namespace); error: a preview cannot apply it
(its kind is not served)."""


@dataclass
class Decision:
    """What the run does to one rendered object, and why."""

    obj: Obj
    """The object as the role rendered it."""
    action: Action
    body: Obj
    """What the run applies: :func:`installer.objects.manifests.as_applied` of ``obj``."""
    note: str = ""
    live: Obj | None = None
    """The object as it is (None: absent)."""
    adopt: bool = True
    """Whether the module's label goes on it (False: a namespace someone else made, which the module only uses)."""
    renew: bool = False
    """A recreate of an object the module did not make (another UID): deleted with a UID precondition first. Without
    it, a recreate waits for an object being deleted to be gone."""

    @property
    def ref(self) -> str:
        return ident(self.obj)


@dataclass
class Foreseen:
    """What a preview takes as done although the cluster does not have it yet: the kinds (``apiVersion/Kind``) whose
    CRDs the previewed runs create and the namespaces they create (filled as the preview goes)."""

    kinds: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)
