"""Upstream's own CI flow (ks-installer v3.4.1 .github/workflows: deploy, switch plugins on with `kubectl patch`,
`kubectl rollout restart deploy ks-installer`, then scripts/check_cluster_status.sh's wait until every pod in the
cluster is Running or Completed) under the real shell-operator: three patches in a row switch devops, logging and
metrics_server on; the installer "pod" restarts in the middle of the run (shell-operator stopped as a pod is, and
started again); nothing is lost, no module runs twice at once, every pod ends Running or Completed, the cc Ready.
The job itself, step for step with check_cluster_status.sh's wait for `Welcome to KubeSphere` in `kubectl logs` of
the installer's pod, runs in tests/e2e/test_image.py, where that pod is the image's container."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from kubernetes import client
from simcluster import SimCluster
from test_installer import REPO, Session, operator_session, started

from installer.settings import NAMESPACE

pytestmark = pytest.mark.cluster
SWITCHES = ({"devops": {"enabled": True}}, {"logging": {"enabled": True}}, {"metrics_server": {"enabled": True}})
ADDED = {"devops", "logging", "metrics_server", "openldap", "minio", "opensearch", "fluentbit"}
RUN_LINE = re.compile(r"^(?:Start (?:installing|upgrading|uninstalling) (\S+)|task (\S+) status is .*)$")


@pytest.fixture
def session(sim_cluster: SimCluster, kube_api: client.ApiClient,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """The default platform installed by the installer under shell-operator, as upstream's CI deploys it."""
    with operator_session(sim_cluster, kube_api, tmp_path_factory.mktemp("upstream-ci")) as s:
        mark = s.operator.mark()
        s.kubectl("apply", "-f", str(REPO / "deploy" / "cluster-configuration.yaml"))
        s.wait_reconciled(mark)
        yield s
        mark = s.operator.mark()  # what the test switched on goes again
        s.patch_spec({"devops": {"enabled": False}, "logging": {"enabled": False},
                      "metrics_server": {"enabled": False}})
        s.wait_reconciled(mark)


def overlapping_runs(lines: list[str]) -> list[str]:
    """Modules whose run started while an earlier run of theirs had not ended, from the hook's log lines."""
    open_runs: set[str] = set()
    out = []
    for line in lines:
        match = RUN_LINE.match(line)
        if not match:
            continue
        if match.group(1):
            if match.group(1) in open_runs:
                out.append(match.group(1))
            open_runs.add(match.group(1))
        else:
            open_runs.discard(match.group(2))
    return out


def pods_not_running(session: Session) -> list[str]:
    """check_cluster_status.sh's test: every pod of `kubectl get pod -A` is Running or Completed."""
    rows = session.kubectl("get", "pod", "-A", "--no-headers").splitlines()
    return [row for row in rows if not re.search(r"\b(Running|Completed)\b", row)]


@pytest.mark.slow(reason="a first install under shell-operator, then devops, logging and metrics_server across a "
                         "restart (245 s wall, 96 CPU-s on the loaded two-core machine)")
def test_three_patches_and_a_restart_mid_run_end_ready(session: Session) -> None:
    mark = session.operator.mark()
    for switch in SWITCHES:  # three `kubectl patch` calls in a row, as upstream's workflow
        session.patch_spec(switch)
    session.operator.wait_for_log(r"Start installing (devops|logging|opensearch|openldap|minio|fluentbit)",
                                  since=mark, timeout=300)
    # `kubectl rollout restart deploy ks-installer`: the Deployment rolls, and its pod (here shell-operator and the
    # hook it runs) is stopped and a new one starts, without the old pod's kubesphere_running. shell-operator waits
    # up to 10 s for a running hook after SIGTERM, time in which a fast machine ends the whole run: the old pod gets
    # one second, as a pod whose grace period ends first, so the restart lands in the middle of the run.
    session.kubectl("-n", NAMESPACE, "rollout", "restart", "deploy", "ks-installer")
    session.operator.stop(timeout=1)
    before = session.hook_lines(mark)
    (session.base / "playbooks" / "kubesphere_running").unlink(missing_ok=True)
    restart = session.operator.mark()
    session.start_operator()
    status = session.wait_observed()
    deadline = time.monotonic() + 300
    while session.condition("Ready")["status"] != "True" and time.monotonic() < deadline:
        time.sleep(2)  # a reconcile that found the old pod's Lease still held ends Pending; the next one runs
        status = session.wait_observed()
    after = session.hook_lines(restart)
    assert session.condition("Ready")["status"] == "True", (status.get("conditions"), after[-40:])
    assert started(before) and started(after), (before, after)
    assert overlapping_runs(after) == [], after
    modules = status["modules"]
    assert {m for m in ADDED if (modules.get(m) or {}).get("phase") == "Installed"} == ADDED, modules
    assert status["devops"]["status"] == "enabled" and status["metricsServer"]["status"] == "enabled"
    # scripts/check_cluster_status.sh: every pod Running or Completed, several checks in a row
    deadline, ok = time.monotonic() + 180, 0
    while ok < 5:
        waiting = pods_not_running(session)
        ok = 0 if waiting else ok + 1
        assert time.monotonic() < deadline, waiting
        time.sleep(1)
