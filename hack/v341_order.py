#!/usr/bin/env python3
"""The hook (``hooks/kubesphere/installRunner.py``) with KubeSphere v3.4.1's install order imposed on this engine's
schedule, for the benchmark's comparison (``hack/bench.py --compare-v341-order``); no part of the installer.

v3.4.1's ``controller/installRunner.py`` ran preinstall, metrics_server, common (one playbook: redis, openldap,
minio, opensearch and fluent-bit, in ``roles/common/tasks/common-install.yaml``'s order) and ks-core one after
another, then every other component in parallel, then ks-config, the result step (the welcome box) and telemetry.
Here each module of a phase waits for every module of the nearest earlier phase this run has (:data:`PHASES`). The
engine's own edges stay (what a role needs: alerting after monitoring, Gatekeeper's webhook after the other
pluggable modules), except an ordering-only edge against the imposed order (Gatekeeper after ks-config), which goes.
The modules are this engine's, run by this engine: only the order is v3.4.1's.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from installer.engine.plan import Action, Plan, run_order

Order = dict[str, dict[str, bool]]
PHASES: tuple[tuple[str, ...] | None, ...] = (
    ("preinstall",), ("metrics_server",), ("redis",), ("openldap",), ("minio",), ("opensearch",), ("fluentbit",),
    ("ks-core",), None, ("ks-config",), ("telemetry",))
"""v3.4.1's phases, first to last; None: every module no other phase names (upstream's parallel tasks)."""


def phases(names: list[str]) -> list[list[str]]:
    """The non-empty phases of ``names``, first to last."""
    named = {n for phase in PHASES if phase for n in phase}
    out = []
    for phase in PHASES:
        members = [n for n in names if (n not in named if phase is None else n in phase)]
        if members:
            out.append(members)
    return out


def impose(order: Order, applying: list[str]) -> Order:
    """``order`` (:func:`installer.engine.plan.run_order`'s answer) with every module of ``applying`` waiting for the
    modules of the phase before its own (ordering only); an ordering-only edge the other way goes, a blocking one
    is a conflict (RuntimeError)."""
    out = {name: dict(before) for name, before in order.items()}
    steps = phases(applying)
    for earlier, phase in itertools.pairwise(steps):
        for name in phase:
            for first in earlier:
                if out[first].get(name) is True:
                    raise RuntimeError(f"{first} needs {name}, but v3.4.1's order runs {name} after it")
                out[first].pop(name, None)
                out[name].setdefault(first, False)
    return out


def v341_run_order(plan: Plan) -> Order:
    """:func:`installer.engine.plan.run_order` of ``plan`` with v3.4.1's phases imposed on its installs and upgrades."""
    return impose(run_order(plan), [s.module for s in plan.runnable if s.action != Action.UNINSTALL])


def main() -> NoReturn:
    """Run the hook with the executor scheduling by :func:`v341_run_order`."""
    from installer.engine import executor
    from installer.hook import main as hook
    from installer.process_exit import exit_now

    executor.run_order = v341_run_order  # the engine's one use of the order: its scheduler's
    exit_now(hook())


if __name__ == "__main__":
    main()
