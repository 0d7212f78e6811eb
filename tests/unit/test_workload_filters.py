"""The pod-spec filters of kubesphere-defaults: scheduling and resources from the spec over upstream defaults."""

from __future__ import annotations

from jinja2 import Undefined
from role_harness import filter_plugins

f = filter_plugins("kubesphere-defaults", "ks_workloads")
DEFAULT = {"nodeSelector": {"kubernetes.io/os": "linux"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}]}


def test_first_set_skips_undefined_and_null_but_not_empty() -> None:
    assert f.ks_first_set([None, Undefined(), 2, 3], 1) == 2
    assert f.ks_first_set([None, Undefined()], 1) == 1
    assert f.ks_first_set([{}, {"a": "b"}], {"c": "d"}) == {}


def test_scheduling_takes_each_field_from_the_first_layer_that_sets_it() -> None:
    module = {"nodeSelector": {"role": "monitoring"}, "replicas": 2}
    global_ = {"nodeSelector": {"global": "yes"}, "tolerations": [{"operator": "Exists"}], "affinity": None}
    assert f.ks_scheduling([module, global_], DEFAULT) == {
        "nodeSelector": {"role": "monitoring"}, "tolerations": [{"operator": "Exists"}]}
    assert f.ks_scheduling([{}, {"nodeSelector": None}], DEFAULT) == DEFAULT
    assert f.ks_scheduling([None, {}], None) == {}
    # An explicitly empty value wins over the default and is left out: no nodeSelector at all.
    assert f.ks_scheduling([{"nodeSelector": {}}], DEFAULT) == {"tolerations": DEFAULT["tolerations"]}


def test_resources_replace_the_defaults_field_by_field() -> None:
    default = {"limits": {"cpu": "1", "memory": "100Mi"}, "requests": {"cpu": "10m", "memory": "20Mi"}}
    assert f.ks_resources(None, default) == default
    assert f.ks_resources({}, default) == default
    assert f.ks_resources({"limits": {"cpu": 2}, "requests": None}, default) == {
        "limits": {"cpu": 2, "memory": "100Mi"}, "requests": {"cpu": "10m", "memory": "20Mi"}}
    assert f.ks_resources({"limits": {"nvidia.com/gpu": 1}}, default)["limits"] == {
        "cpu": "1", "memory": "100Mi", "nvidia.com/gpu": 1}
    assert default == {"limits": {"cpu": "1", "memory": "100Mi"}, "requests": {"cpu": "10m", "memory": "20Mi"}}
    assert set(f.FilterModule().filters()) == {"ks_first_set", "ks_scheduling", "ks_resources"}
