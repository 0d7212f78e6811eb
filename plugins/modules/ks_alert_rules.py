#!/usr/bin/python
"""Ansible module: bring KubeSphere's older alerting rules to v3.4 (upstream ks-monitor tasks/thanos-ruler.yaml's
relabelling and files/alert-migrate/migrate-alertrules.sh, without kubectl, jq or a shell)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_alert_rules
short_description: Relabel legacy Thanos Ruler PrometheusRules and migrate v1beta1 custom alerting rules to
  alerting.kubesphere.io/v2beta1 rule groups.
description:
  - Relabel - PrometheusRules labelled thanosruler=thanos-ruler,role=thanos-alerting-rules (any namespace) get
    thanos-ruler=kubesphere,role=alert-rules and lose thanosruler, the labels ks-apiserver v3.4 looks for.
  - Migrate - every rule of a PrometheusRule labelled custom-alerting-rule-level=cluster (in I(namespace)) or
    =namespace (any namespace) becomes a ClusterRuleGroup or a RuleGroup (in the rule's namespace) named after its
    alert, with alerting.kubesphere.io/enable=true and the v1beta1 threshold as an exprBuilder; then the
    PrometheusRule is labelled migrated-to-alerting-v2beta1=true and never migrated again.
  - The groups are the user's - no installer label, never pruned or deleted by the installer. An existing group is
    never overwritten - one that came from the same rule (annotation installer.kubesphere.io/migrated-from, e.g.
    written by an interrupted run) counts as done; another one of that name makes the new group's name take a
    hash suffix.
  - Kinds the cluster does not serve mean nothing to do (no prometheus-operator CRDs), or a failure when there
    are rules to migrate and the rule group kinds (ks-core's CRDs) are missing.
options:
  namespace: {description: Namespace of the cluster-level custom rules., type: str,
              default: kubesphere-monitoring-system}
  relabel: {description: Relabel the legacy Thanos Ruler rules., type: bool, default: true}
  migrate: {description: Migrate the v1beta1 custom rules., type: bool, default: true}
"""

from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import ks_alert_rules as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
