"""Run one module's play through ansible-runner, streaming progress to the installer log."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ansible_runner
import yaml

import installer.ansible_callbacks
import installer.ansible_tasks
from installer import KS_VERSION
from installer.ansible_tasks import WARNINGS_KEY
from installer.ansible_tasks._record import CAPTURE_ENV
from installer.engine.beside import beside
from installer.engine.plan import Action, Step
from installer.engine.plays import play_variables, playbook_file
from installer.engine_settings import Settings
from installer.escape import escaped
from installer.launch.forkserver import SERVER
from installer.modules import get_module
from installer.objects.api_errors import api_reason
from installer.objects.inventory import INVENTORY_ENV, RECORDED_ENV, object_key, read_facts, read_inventory, read_notes
from installer.objects.manifests import Manifests
from installer.objects.ownership import NAMESPACES_ENV, TENANT_KINDS_ENV
from installer.objects.refs import Ref
from installer.objects.removal import PURGE_ENV
from installer.settings import NAMESPACE
from installer.version import INSTALLER_VERSION

log = logging.getLogger("installer")
ERROR_TAIL = 2000
PRUNE_TASK = "Prune what the module no longer makes"
EXTRAVARS = Path("env") / "extravars"
"""Where ansible-runner looks for extra-vars in a private data dir (it passes ``-e @<file>`` when it exists)."""


@dataclass(frozen=True)
class RunOutcome:
    module: str
    action: Action
    ok: bool
    status: str
    failed_task: str | None = None
    message: str | None = None
    tasks: int = 0
    inventory: tuple[Ref, ...] = ()
    """What the run left applied (install/upgrade)."""
    spans: tuple[dict[str, Any], ...] = ()
    """Each task's name, start, end and outcome (ok, changed, skipped, failed), for the timeline."""
    immutable: tuple[str, ...] = ()
    """Objects whose fields that cannot change differed, and what was done (ks_manifest's ``immutable``)."""
    foreign: tuple[str, ...] = ()
    """Fields of other writers removed from the module's objects, planted ServiceAccounts recreated (``foreign``)."""
    objects: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    """What the run's writes returned of each object it left applied: [UID, guard] (Record.objects)."""

    @property
    def interrupted(self) -> bool:
        """Cancelled because the installer is stopping (not a failure of the module)."""
        return self.status == "canceled"


_TASK_ENDS = {"runner_on_ok": "ok", "runner_on_skipped": "skipped", "runner_on_failed": "failed",
              "runner_on_unreachable": "failed"}


class _Progress:
    """ansible-runner event handler: task counters in the log, the first failure remembered, task spans."""

    def __init__(self, module: str, on_task: Callable[[str, int, str], None] | None = None) -> None:
        self.module = module
        self.on_task = on_task
        self.tasks = 0
        self.failed_task: str | None = None
        self.message: str | None = None
        self.spans: list[dict[str, Any]] = []
        self.immutable: list[str] = []

    def __call__(self, event: dict[str, Any]) -> bool:
        kind, data = event.get("event"), event.get("event_data") or {}
        if kind == "playbook_on_task_start" and not data.get("is_conditional"):
            self.tasks += 1
            log.info("[%s] task %d: %s", self.module, self.tasks, data.get("task", "").strip())
            self.spans.append({"task": data.get("task", "").strip(), "start": event.get("created"),
                               "end": event.get("created"), "outcome": "running"})
            if self.on_task:
                self.on_task(self.module, self.tasks, self.spans[-1]["task"])
        elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            if self.failed_task is None:
                self.failed_task = data.get("task")
                self.message = _error_text(data.get("res") or {})
                log.error("[%s] task failed: %s: %s", self.module, self.failed_task, self.message)
        elif kind == "runner_on_ok":
            res = data.get("res") or {}
            for line in res.get("immutable") or []:
                self.immutable.append(line)
                log.warning("[%s] %s", self.module, escaped(line, 400))
            for warning in (res.get(WARNINGS_KEY) or [])[:50]:
                log.warning("[%s] %s", self.module, escaped(warning, 400))
        if kind in _TASK_ENDS and self.spans:
            self._end_span(_TASK_ENDS[kind], event, data)
        return True

    def _end_span(self, outcome: str, event: dict[str, Any], data: dict[str, Any]) -> None:
        if outcome == "ok" and (data.get("res") or {}).get("changed"):
            outcome = "changed"
        elif outcome == "failed" and data.get("ignore_errors"):
            outcome = "ok"
        self.spans[-1].update(end=event.get("created"), outcome=outcome)


def _error_text(res: dict[str, Any]) -> str:
    parts = [str(res[k]) for k in ("msg", "stderr", "reason") if res.get(k)]
    text = "\n".join(parts) or "task failed without a message"
    return text[-ERROR_TAIL:]


def _drop_environment(command_file: Path) -> None:
    """ansible-runner records the run's whole environment beside the command line: keep only the command."""
    try:
        command = json.loads(command_file.read_text())
    except (OSError, ValueError):
        return
    command.pop("env", None)
    command_file.write_text(json.dumps(command, indent=2))


def _processes_with(entry: bytes) -> list[int]:
    """Processes (of this user) whose environment holds ``entry`` (``NAME=value``)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if int(proc.name) != os.getpid() and entry in environ.split(b"\0"):
            found.append(int(proc.name))
    return found


def end_leftovers(entry: bytes, grace: float = 5.0) -> list[int]:
    """End the processes of a killed run, found by ``entry`` in their environment: SIGTERM, then SIGKILL after
    ``grace`` seconds. ansible-runner kills ansible-playbook's process group only; its workers (each in a session
    of its own, running the tasks in-process) and their children are not in it. Returns the pids found."""
    leftovers = _processes_with(entry)
    pids = leftovers
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while (pids := _processes_with(entry)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not pids:
            break
    return leftovers


class _Unsafe(str):
    """A string Ansible must never template."""


class _VarsDumper(yaml.SafeDumper):
    """YAML for extra-vars: each string value (not key) tagged ``!unsafe``."""


_VarsDumper.add_representer(_Unsafe, lambda dumper, value: dumper.represent_scalar("!unsafe", str(value), style='"'))
_RESOLVER = yaml.resolver.Resolver()
_STR = "tag:yaml.org,2002:str"


def _reads_as_str(value: str) -> bool:
    """Whether Ansible reads ``!unsafe`` over ``value`` as a string: it resolves the tagged scalar as if plain, so
    ``""``, ``"true"`` or ``"12"`` would become null, a bool, an int."""
    return _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR


def _unsafe(value: Any) -> Any:
    """``value`` with every string in it marked unsafe. A string YAML would read as another type is left plain: it
    matches YAML's null/bool/number/date patterns, so it holds no template syntax."""
    if isinstance(value, dict):
        return {key: _unsafe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_unsafe(item) for item in value]
    if isinstance(value, str) and _reads_as_str(value):
        return _Unsafe(value)
    return value


def unsafe_yaml(variables: dict[str, Any]) -> str:
    """``variables`` as YAML for Ansible, every string value ``!unsafe``: Ansible uses them as they are and never
    evaluates one as a template (a spec value is data, never code)."""
    return yaml.dump(_unsafe(variables), Dumper=_VarsDumper, allow_unicode=True, sort_keys=False)


def write_extravars(pdd: Path, variables: dict[str, Any]) -> Path:
    """Write ``variables`` (:func:`unsafe_yaml`, mode 0600) where ansible-runner passes them as extra-vars."""
    path = pdd / EXTRAVARS
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as out:
        out.write(unsafe_yaml(variables))
    return path


MODULE_FILE = "module"
"""The file of a run's private data dir that names its module (read back from a killed run's leftovers)."""


def killed_runs(run_dir: Path) -> dict[str, tuple[list[Ref], dict[str, list[str]]]]:
    """What killed runs left in ``run_dir``: per module, the objects their applies wrote and what the API server
    returned of each (UID, guard), read from their inventory files (a line cut short by the kill is skipped)."""
    found: dict[str, tuple[list[Ref], dict[str, list[str]]]] = {}
    for pdd in sorted(run_dir.glob("*/")) if run_dir.is_dir() else ():
        try:
            module = (pdd / MODULE_FILE).read_text(encoding="utf-8")
        except OSError:
            continue
        refs, facts = found.setdefault(module, ([], {}))
        inventory = pdd / "inventory.jsonl"
        refs.extend(read_inventory(inventory))
        facts.update(read_facts(inventory))
    return found


def clean_run_dirs(run_dir: Path) -> None:
    """Remove what a killed run left behind (its private data dir holds the spec as extra-vars)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)


def run_variables(spec: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """The variables every module's playbook receives: the spec (with its defaults), the cluster's facts and the
    engine's own (``ks_module``, ``ks_role``, ``ks_action`` and ``ks_hash`` are each run's)."""
    return {**spec, **facts, "ks_version": KS_VERSION, "ks_installer_version": INSTALLER_VERSION,
            "ks_namespace": NAMESPACE}


#: The installer's Ansible plugins: the ``ks_*`` tasks (each file is its own action plugin) and the callback plugin
#: ks_preload.
TASKS_DIR = Path(installer.ansible_tasks.__file__).parent
CALLBACKS_DIR = Path(installer.ansible_callbacks.__file__).parent


def ansible_environment(work: Path) -> dict[str, str]:
    """The Ansible settings of every playbook run (a module's run and a render), with its files in ``work`` (the
    roles path is each caller's: ansible-runner's ``roles_path``). A run records nothing (``KS_CAPTURE_DIR`` empty):
    only a render, which sets it after these, does."""
    return {
        "ANSIBLE_ACTION_PLUGINS": str(TASKS_DIR),
        "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS_DIR),
        CAPTURE_ENV: "",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_HOME": str(work / ".ansible"),
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        # Module payloads (their arguments hold spec values) stay in the run's dir, not ~/.ansible/tmp.
        "ANSIBLE_REMOTE_TEMP": str(work / "remote-tmp"),
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        # How often Ansible's main process looks for a task's result: 1 ms by default, for terminal
        # responsiveness; 10 ms costs no wall time here and less CPU (default platform + redis test: -4 %).
        "ANSIBLE_INTERNAL_POLL_INTERVAL": "0.01",
    }


class PlaybookRunner:
    """Runs modules' install/uninstall plays (installer.engine.plays) with a fresh private_data_dir per run."""

    def __init__(self, settings: Settings, variables: dict[str, Any] | Future[dict[str, Any]], cancel: threading.Event,
                 on_task: Callable[[str, int, str], None] | None = None,
                 inventories: Callable[[str], tuple[Ref, ...]] | None = None, api: Any = None,
                 facts: Callable[[str], dict[str, tuple[str, str]]] | None = None) -> None:
        self.settings = settings
        self.variables = variables
        """The variables of every run (:func:`run_variables`), or their Future (the cluster's facts, read beside)."""
        self.cancel = cancel
        self.on_task = on_task
        self.inventories = inventories
        """The module's recorded inventory (its record's), which a successful run prunes against."""
        self.facts = facts
        """The module's recorded objects (Record.objects): which UIDs it owns, and what it left on them."""
        self.api = api
        self._labelled: Future[dict[str, list[Ref]]] | None = None
        """Every module's labelled objects (Manifests.labelled), read once per reconcile while its first install's
        playbook runs, for the installs' prunes."""
        self._labelled_lock = threading.Lock()

    def run(self, step: Step) -> RunOutcome:
        module = get_module(step.module)
        uninstall = step.action == Action.UNINSTALL
        if step.action == Action.INSTALL and self.api is not None:
            self._labelled_objects(module.name)  # read beside the playbook; its prune waits for it
        results = self.settings.results_dir
        shutil.rmtree(results / module.name, ignore_errors=True)
        results.mkdir(parents=True, exist_ok=True)
        progress = _Progress(module.name, self.on_task)
        self.settings.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{module.name}-", dir=self.settings.run_dir) as pdd:
            variables = self.variables.result() if isinstance(self.variables, Future) else self.variables
            extravars = {**variables, **play_variables(module), "ks_action": step.action.value,
                         "ks_hash": step.hash or ""}
            (Path(pdd) / MODULE_FILE).write_text(module.name, encoding="utf-8")
            write_extravars(Path(pdd), extravars)  # not extravars=: ansible-runner would write them as JSON
            (Path(pdd) / "project").mkdir(mode=0o700)  # the run's working directory
            # playbooks/install.yaml or uninstall.yaml, run with the module's name and role (or the play replacing it).
            playbook = playbook_file(module, uninstall, self.settings.playbooks_dir)
            inventory_file = str(Path(pdd) / "inventory.jsonl")
            recorded = self.inventories(module.name) if self.inventories is not None else ()
            recorded_facts = dict(self.facts(module.name)) if self.facts is not None else {}
            recorded_env = {}
            if recorded:
                recorded_file = Path(pdd) / "recorded.json"
                recorded_file.write_text(json.dumps({"refs": [list(r) for r in recorded],
                                                     "objects": {k: list(v) for k, v in recorded_facts.items()}}))
                recorded_env = {RECORDED_ENV: str(recorded_file)}
            client = SERVER.client()
            command = {"binary": str(client), "cmdline": shlex.quote(str(playbook))} if client else \
                {"playbook": str(playbook)}
            result = ansible_runner.run(
                private_data_dir=pdd,
                **command,
                artifact_dir=str(results),
                ident=module.name,
                roles_path=str(self.settings.roles_dir),
                suppress_env_files=True,  # the environment and command line stay arguments, not files in the dir
                inventory=f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}",
                envvars={**self._env(Path(pdd)), INVENTORY_ENV: inventory_file, **recorded_env,
                         NAMESPACES_ENV: json.dumps(list(module.namespaces)),
                         TENANT_KINDS_ENV: json.dumps(list(module.tenant_kinds)),
                         **({PURGE_ENV: "1"} if step.purge else {})},
                quiet=True,
                event_handler=progress,
                cancel_callback=self.cancel.is_set,
                timeout=self.settings.module_timeout,
            )
            if result.status in ("canceled", "timeout"):
                # Every process of this run carries its inventory file in its environment.
                ended = end_leftovers(f"{INVENTORY_ENV}={inventory_file}".encode())
                log.debug("[%s] %s run: ended its leftover processes %s", module.name, result.status, ended)
            inventory = tuple(read_inventory(inventory_file))
            objects = {k: (v[0], v[1]) for k, v in read_facts(inventory_file).items()}
            for spared in read_notes(inventory_file, "spared"):
                log.warning("[%s] not deleted although it carries the module's label: %s", module.name, spared)
            foreign = tuple(read_notes(inventory_file, "foreign"))
            for line in foreign:
                log.warning("[%s] %s", module.name, escaped(line, 1000))
        _drop_environment(results / module.name / "command")
        ok = result.status == "successful" and result.rc == 0
        message = progress.message
        failed_task = progress.failed_task
        install = step.action == Action.INSTALL
        if ok and not uninstall and (recorded or install) and self.api is not None:
            try:
                inventory = self._prune(module.name, recorded, inventory, install, recorded_facts)
            except Exception as exc:  # the run did not finish: its objects stay recorded, the next run prunes
                ok, failed_task = False, PRUNE_TASK
                message = api_reason(exc) if hasattr(exc, "body") else f"{type(exc).__name__}: {exc}"
                log.error("[%s] task failed: %s: %s", module.name, failed_task, message)
        if result.status == "canceled":
            message = "interrupted: the installer is stopping; it is re-run on the next start"
        elif not ok and message is None:
            message = f"ansible-playbook ended with status {result.status} (rc={result.rc})"
        status = "failed" if failed_task == PRUNE_TASK else result.status
        kept = {object_key(r) for r in inventory}
        objects = {k: v for k, v in {**recorded_facts, **objects}.items() if k in kept}
        return RunOutcome(module.name, step.action, ok, status, failed_task, None if ok else message, progress.tasks,
                          inventory, tuple(progress.spans), tuple(progress.immutable), foreign, objects)

    def _prune(self, module: str, recorded: tuple[Ref, ...], inventory: tuple[Ref, ...],
               install: bool, facts: dict[str, tuple[str, str]]) -> tuple[Ref, ...]:
        """After a successful run: delete what the recorded inventory (for an install, with the module's labelled
        objects: Manifests.prune_base) has and the run's lacks, through the deletion policy
        (installer.objects.manifests.Manifests.prune_inventory); returns the run's inventory with what the policy
        kept."""
        entry = get_module(module)
        manifests = Manifests(self.api, module, facts={k: list(v) for k, v in facts.items()},
                              namespaces=entry.namespaces, tenant_kinds=entry.tenant_kinds)
        labelled = self._labelled_objects(module).result() if install else None
        pruned = manifests.prune_run(recorded, inventory, install, labelled)
        if pruned is None:
            return inventory
        for spared in dict.fromkeys(pruned.spared):
            log.warning("[%s] not deleted although it carries the module's label: %s", module, spared)
        if pruned.deleted:
            log.info("[%s] pruned what it no longer makes: %s", module, ", ".join(pruned.deleted))
        return tuple(sorted(set(inventory) | set(pruned.survivors)))

    def _labelled_objects(self, module: str) -> Future[dict[str, list[Ref]]]:
        """Every module's labelled objects, read once per reconcile (in a thread, started by the first install): what
        an earlier installation of a module left stays until that module's install prunes it, whichever module's
        install read them (each prunes only its own). Read before or after a run, the prune is the same: what the
        run applies is in its inventory, and what it deleted is gone."""
        with self._labelled_lock:
            if self._labelled is None:  # a failed read fails the prune that waits for it
                self._labelled = beside(Manifests(self.api, module).labelled, "labelled-objects")
            return self._labelled

    def _env(self, pdd: Path) -> dict[str, str]:
        # ansible-playbook is installed beside the interpreter that runs the engine.
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        return {"PATH": path, **ansible_environment(pdd)}
