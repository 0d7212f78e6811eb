"""Render modules: run their real plays with every ``ks_*`` task recorded instead of run.

The plays (installer.engine.plays) run as a reconcile runs them (the same roles, tasks and variables), in check mode and
with ``KS_CAPTURE_DIR`` set: each ``ks_*`` task (:mod:`installer.ansible_tasks._record`) appends its arguments to a
capture file and answers as the cluster would, so nothing is written. ``ks_info`` reads the
cluster in ``$KUBECONFIG``, or answers from an offline world (:data:`WORLD`). Several modules (or spec variants of
one) render in one ``ansible-playbook``, one Ansible host each, so facts never leak between them.

What a module's run would apply is its ``ks_manifest`` calls with ``state: present``; ``python -m installer plan
--objects`` and the declared-inputs test read the same captures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from installer.ansible_tasks._record import CAPTURE_ENV, WORLD_ENV
from installer.engine.plays import play_variables, plays_of
from installer.engine.runner import ansible_environment, unsafe_yaml, write_extravars
from installer.objects.refs import Obj, Ref, load_definitions, ref_of

#: What ``ks_info`` answers offline, by kind: one control-plane node, a default StorageClass, the namespaces every
#: cluster has, the Secrets and Endpoints the modules read or wait for (ks-core's generated JWT key and token as
#: ``(generated)``), ks-core's rule-group CRD and the prometheus-operator CRDs monitoring (always on) installs,
#: Established.
WORLD: dict[str, list[dict[str, Any]]] = {
    "Secret": [{"metadata": {"name": "kubesphere-secret", "namespace": "kubesphere-system"},
                "data": {"secret": "KGdlbmVyYXRlZCk=", "token": "KGdlbmVyYXRlZCk="}},
               {"metadata": {"name": "kube-etcd-client-certs", "namespace": "kubesphere-monitoring-system"},
                "data": {"etcd-client-ca.crt": "Y2E=", "etcd-client.crt": "Y3J0", "etcd-client.key": "a2V5"}}],
    "Node": [{"metadata": {"name": "node1", "labels": {"node-role.kubernetes.io/control-plane": ""}}}],
    "StorageClass": [{"metadata": {"name": "standard",
                                   "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}],
    "Namespace": [{"metadata": {"name": n}} for n in ("default", "kube-system", "kube-public", "kubesphere-system")],
    "Endpoints": [{"metadata": {"name": "ks-controller-manager", "namespace": "kubesphere-system"},
                   "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 8443}]}]},
                  {"metadata": {"name": "logsidecar-injector-admission", "namespace": "kubesphere-logging-system"},
                   "subsets": [{"addresses": [{"ip": "10.0.0.2"}], "ports": [{"port": 8443}]}]},
                  {"metadata": {"name": "kubefed-admission-webhook", "namespace": "kube-federation-system"},
                   "subsets": [{"addresses": [{"ip": "10.0.0.3"}], "ports": [{"port": 8443}]}]}],
    "CustomResourceDefinition": [{"metadata": {"name": name},
                                  "status": {"conditions": [{"type": "Established", "status": "True"}]}}
                                 for name in ("globalrulegroups.alerting.kubesphere.io",
                                              *(f"{plural}.monitoring.coreos.com" for plural in (
                                                  "servicemonitors", "podmonitors", "prometheusrules",
                                                  "thanosrulers")))],
}
#: The cluster facts (installer.objects.cluster.cluster_facts) of the offline world.
OFFLINE_FACTS: dict[str, Any] = {"kubernetes_version": "v1.27.2", "nodeNum": 1, "ks_master_num": 1,
                                 "ks_node_runtime_version": "containerd://1.7.2"}


class RenderFailed(RuntimeError):
    """ansible-playbook failed outside any module's tasks (its output's tail is the message)."""


@dataclass(frozen=True)
class Host:
    """One Ansible host of a render: the plays it runs and its own variables."""

    plays: list[dict[str, Any]]
    hostvars: dict[str, Any] = field(default_factory=dict)


@contextmanager
def workdir(prefix: str = "ks-render-") -> Iterator[Path]:
    """A private directory (mode 0700: it holds the spec) removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as path:
        yield Path(path)


def _roles(play: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for role in play.get("roles") or []:
        if isinstance(role, str):
            out.append({"ansible.builtin.import_role": {"name": role}})
        else:
            params = {k: v for k, v in role.items() if k not in ("role", "name")}
            out.append({"ansible.builtin.import_role": {"name": role.get("role") or role["name"]},
                        **({"vars": params} if params else {})})
    return out


def wrapper_playbook(hosts: dict[str, Host]) -> list[dict[str, Any]]:
    """Each host's plays, run on the hosts that render the same plays: its roles, then its tasks, as the play runs
    them, in a block whose rescue records the task that failed (``ks_failed``)."""
    by_plays: dict[str, tuple[list[dict[str, Any]], list[str]]] = {}
    for name, host in hosts.items():
        by_plays.setdefault(json.dumps(host.plays, sort_keys=True), (host.plays, []))[1].append(name)
    record_failure = {"ks_failed": {"task": "{{ ansible_failed_task.name }}",
                                    "msg": "{{ ansible_failed_result.msg | default('') }}"}}
    plays = []
    for host_plays, names in by_plays.values():
        for play in host_plays:
            kept = {k: v for k, v in play.items() if k not in ("hosts", "roles", "tasks")}
            plays.append({**kept, "hosts": names, "gather_facts": False,
                          "tasks": [{"block": _roles(play) + list(play.get("tasks") or []),
                                     "rescue": [record_failure]}]})
    return plays


def run_hosts(hosts: dict[str, Host], work: Path, roles_dir: Path, *,
              extravars: dict[str, Any] | None = None, world: dict[str, Any] | None = None,
              timeout: float = 900) -> dict[str, list[dict[str, Any]]]:
    """Run every host's plays in one ``ansible-playbook`` (in ``work``, an empty private directory) and return each
    host's recorded calls (``{"module", "args"}``, in order; a failed task is a last ``ks_failed`` call). Variables
    are ``extravars`` (all hosts) and each host's own, every string ``!unsafe`` (never templated)."""
    inventory = {h: {**host.hostvars, "ansible_connection": "local", "ansible_python_interpreter": sys.executable}
                 for h, host in hosts.items()}
    (work / "inventory.yaml").write_text(unsafe_yaml({"all": {"hosts": inventory}}))
    (work / "playbook.yaml").write_text(yaml.safe_dump(wrapper_playbook(hosts), sort_keys=False))
    # ansible-playbook with the fork server's patches (installer.launch.ansible_patches: the template code cache first).
    command = [sys.executable, "-m", "installer.launch.ansible_playbook", "-i", str(work / "inventory.yaml"),
               str(work / "playbook.yaml"), "--check"]
    if extravars:
        command += ["-e", f"@{write_extravars(work, extravars)}"]
    # The installer's plugins as in a run; KS_CAPTURE_DIR makes each ks_* task record its call (ansible_tasks._record).
    env = {**os.environ, **ansible_environment(work), "ANSIBLE_ROLES_PATH": str(roles_dir),
           "ANSIBLE_FORKS": str(min(len(hosts), 8) or 1), CAPTURE_ENV: str(work)}
    env.pop(WORLD_ENV, None)
    if world is not None:
        env[WORLD_ENV] = json.dumps(world)
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    results = {}
    for host in hosts:
        capture = work / f"{host}.jsonl"
        if not capture.exists() and proc.returncode != 0:
            raise RenderFailed(f"ansible-playbook exited {proc.returncode}: {proc.stdout[-3000:]}{proc.stderr[-1000:]}")
        results[host] = [json.loads(line) for line in capture.read_text().splitlines()] if capture.exists() else []
    return results


@dataclass
class Rendered:
    """One module's recorded run."""

    module: str
    action: str
    calls: list[dict[str, Any]]

    @property
    def failure(self) -> tuple[str, str] | None:
        """(task, message) of the task that failed, or None."""
        failed = next((c["args"] for c in self.calls if c["module"] == "ks_failed"), None)
        return (str(failed.get("task", "")), str(failed.get("msg", ""))) if failed is not None else None

    def manifests(self, state: str = "present") -> list[dict[str, Any]]:
        """The arguments of the ``ks_manifest`` calls with ``state``, each with its objects under ``objects``."""
        out = []
        for call in self.calls:
            if call["module"] != "ks_manifest" or (call["args"].get("state") or "present") != state:
                continue
            out.append({**call["args"], "objects": load_definitions(call["args"].get("definition") or [])})
        return out

    def objects(self) -> list[Obj]:
        """What the run applies, each object once (as its last apply has it), in the order first applied."""
        found: dict[Ref, Obj] = {}
        for call in self.manifests():
            for obj in call["objects"]:
                found[ref_of(obj)] = obj
        return list(found.values())

    def calls_of(self, *names: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["module"] in names]


def render_modules(steps: list[tuple[str, str, str]], variables: dict[str, Any], roles_dir: Path,
                   world: dict[str, Any] | None = None,
                   plays_dir: Path | None = None) -> dict[str, Rendered]:
    """Render ``steps`` (module, action, hash; action ``uninstall`` runs the uninstall play) with ``variables``
    (the spec and facts a reconcile passes as extra-vars) in one ``ansible-playbook`` (``plays_dir``: plays that
    replace a module's own, installer.engine.plays)."""
    from installer.modules import get_module

    hosts = {}
    for name, action, digest in steps:
        plays = plays_of(get_module(name), action == "uninstall", plays_dir)
        hosts[name] = Host(plays, {**play_variables(get_module(name)), "ks_action": action, "ks_hash": digest})
    if not hosts:
        return {}
    with workdir() as work:
        captured = run_hosts(hosts, work, roles_dir, extravars=variables, world=world)
    return {name: Rendered(name, action, captured[name]) for name, action, _ in steps}
