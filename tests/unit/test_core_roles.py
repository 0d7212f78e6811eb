"""The preinstall, ks-core and ks-config roles, rendered by Ansible for several specs (no cluster needed)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from role_harness import REPO, engine_vars, filter_plugins, run_play

from installer.config.defaults import apply_defaults
from installer.spec import leaves

ALL_ON = {
    "common": {"redis": {"enabled": True}, "openldap": {"enabled": True},
               "monitoring": {"GPUMonitoring": {"enabled": True}},
               "s3": {"endpoint": "https://s3.example.com", "accessKeyID": "AK", "secretAccessKey": "SK",
                      "openpitrixBucket": "apps"}},
    "authentication": {"oauthOptions": {"accessTokenMaxAge": "1h"}, "maximumClockSkew": "20s"},
    "devops": {"enabled": True, "sonarqube": {"externalSonarUrl": "http://sonar.example.com",
                                              "externalSonarToken": "tok"}},
    "logging": {"enabled": True}, "events": {"enabled": True}, "auditing": {"enabled": True},
    "alerting": {"enabled": True}, "servicemesh": {"enabled": True},
    "edgeruntime": {"enabled": True, "kubeedge": {"enabled": True}},
    "openpitrix": {"store": {"enabled": True}},
    "network": {"networkpolicy": {"enabled": True}, "ippool": {"type": "calico"},
                "topology": {"type": "weave-scope"}},
    "multicluster": {"clusterRole": "host", "proxyPublishAddress": "http://10.0.0.9:8080"},
    "terminal": {"image": "busybox:1.36", "timeout": 0}, "gateway": {"namespace": "gateways"},
    "local_registry": "reg.local",
}
# name → (spec changes, extra variables)
CORE: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {}),
    "three_masters": ({}, {"nodeNum": 5, "ks_master_num": 3}),
    "tuned": ({"common": {"core": {"apiserver": {"resources": {"limits": {"cpu": "4"}}},
                                   "controllerManager": {"resources": {"requests": {"cpu": "1"}}},
                                   "nodeSelector": {"core": "yes"}, "tolerations": [{"operator": "Exists"}],
                                   "console": {"type": "ClusterIP", "extraVolumes": [{"name": "x", "emptyDir": {}}],
                                               "extraVolumeMounts": [{"name": "x", "mountPath": "/x"}]}},
                          "redis": {"enabled": True}},
               "nodeSelector": {"global": "yes"}, "zone": "cn"}, {}),
    "hostile": ({"common": {"core": {"console": {"type": "NodePort\n  injected: true"}}}}, {}),
    "global_scheduling": ({"nodeSelector": {"global": "yes"}, "tolerations": [{"key": "k", "operator": "Exists"}],
                           "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
                           "common": {"core": {"console": {"type": "LoadBalancer", "port": 30999}}}}, {}),
    "external_s3": ({"common": {"s3": {"endpoint": "https://s3.example.com", "accessKeyID": "AK",
                                       "secretAccessKey": "S&K\n\"x\""}}}, {}),
}
CONFIG: dict[str, dict[str, Any]] = {
    "default": {},
    "all_on": ALL_ON,
    "external_es": {"logging": {"enabled": True},
                    "common": {"es": {"externalElasticsearchHost": "es.example.com", "externalElasticsearchPort": 9201,
                                      "externalElasticsearchProtocol": "https", "elkPrefix": "mine",
                                      "basicAuth": {"enabled": True, "username": "u", "password": "p"}}}},
    "external_opensearch": {"events": {"enabled": True},
                            "common": {"opensearch": {"externalOpensearchHost": "os.example.com",
                                                      "externalOpensearchPort": "9202",
                                                      "basicAuth": {"enabled": False}}}},
    "internal_es": {"auditing": {"enabled": True}, "common": {"es": {"enabled": True}}},
    "member": {"multicluster": {"clusterRole": "member"}},
    "edge_without_kubeedge": {"edgeruntime": {"enabled": True}},
    "internal_minio": {"devops": {"enabled": True}, "openpitrix": {"store": {"enabled": True}}},
    # values validation refuses, rendered anyway: they must stay values, never become YAML keys
    "hostile": {"terminal": {"timeout": "1\ninjected: true"},
                "authentication": {"authenticateRateLimiterMaxTries": "3\n  injected: true"}},
}
# name → (kubernetes_version, adminPassword or None)
CHECKS: dict[str, tuple[str, str | None]] = {
    "ok": ("v1.34.4", None), "k3s": ("v1.27.3+k3s1", "Abcdefg1"), "old": ("v1.18.20", None),
    "empty_password": ("v1.19.0", ""), "weak": ("v1.19.0", "password"), "short": ("v1.19.0", "Ab1"),
}


def _play(out: Path) -> dict[str, Any]:
    tasks: list[dict[str, Any]] = []
    for name, (changes, extra) in CORE.items():
        tasks += [{"ansible.builtin.include_role": {"name": "ks-core", "tasks_from": "render"},
                   "vars": {**apply_defaults(changes), **extra}},
                  {"ansible.builtin.copy": {"content": "{{ ks_core_objects | to_json }}",
                                            "dest": str(out / f"core-{name}.json")}},
                  {"ansible.builtin.copy": {"content": "{{ ks_core_s3_objects | to_json }}",
                                            "dest": str(out / f"core-s3-{name}.json")}}]
    for name, changes in CONFIG.items():
        tasks += [{"ansible.builtin.include_role": {"name": "ks-config", "tasks_from": "render"},
                   "vars": {**apply_defaults(changes), "ks_jwt_secret": "jwt-key"}},
                  {"ansible.builtin.copy": {"content": "{{ ks_config_text }}",
                                            "dest": str(out / f"config-{name}.yaml")}},
                  {"ansible.builtin.copy": {"content": "{{ ks_config_objects | to_nice_yaml }}",
                                            "dest": str(out / f"config-objects-{name}.yaml")}}]
    for name, (version, password) in CHECKS.items():
        auth = {} if password is None else {"adminPassword": password}
        result = str(out / f"check-{name}.txt")
        tasks.append({"block": [{"ansible.builtin.include_role": {"name": "preinstall", "tasks_from": "checks"},
                                 "vars": {**apply_defaults({"authentication": auth}), "kubernetes_version": version}},
                                {"ansible.builtin.copy": {"content": "ok", "dest": result}}],
                      "rescue": [{"ansible.builtin.copy": {"content": "{{ ansible_failed_result.msg }}",
                                                           "dest": result}}]})
    return {"hosts": "localhost", "gather_facts": False, "roles": ["kubesphere-defaults"], "tasks": tasks,
            "vars": {**engine_vars("ks-core"), "ks_module": "test", "nodeNum": 1}}


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("core-roles")
    run_play(_play(out), out)
    return out


def core(out: Path, name: str) -> dict[tuple[str, str], dict[str, Any]]:
    objects = json.loads((out / f"core-{name}.json").read_text())
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def config(out: Path, name: str) -> dict[str, Any]:
    return yaml.safe_load((out / f"config-{name}.yaml").read_text())


def credentials(out: Path, name: str) -> dict[str, str]:
    """The data of ks-config's Secret kubesphere-config-credentials, decoded."""
    secret = yaml.safe_load((out / f"config-objects-{name}.yaml").read_text())[-1]
    assert (secret["kind"], secret["metadata"]["name"]) == ("Secret", "kubesphere-config-credentials")
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def pod(objects: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, Any]:
    return objects[("Deployment", name)]["spec"]["template"]["spec"]


# ------------------------------------------------------------------------------------------------ ks-core


def test_core_objects(out: Path) -> None:
    objects = core(out, "default")
    for ref in [("ServiceAccount", "kubesphere"), ("ClusterRoleBinding", "kubesphere"),
                ("ConfigMap", "ks-console-config"), ("GlobalRole", "platform-admin"), ("GlobalRoleBinding", "admin"),
                ("WorkspaceTemplate", "system-workspace"), ("CustomResourceDefinition", "users.iam.kubesphere.io"),
                ("CustomResourceDefinition", "workspaces.tenant.kubesphere.io"),
                ("CustomResourceDefinition", "workspacetemplates.tenant.kubesphere.io"),
                ("CustomResourceDefinition", "clusters.cluster.kubesphere.io")]:
        assert ref in objects, ref
    assert not any(kind in ("Secret", "User", "Namespace") for kind, _ in objects)  # never pruned; preinstall's
    assert objects[("ClusterRoleBinding", "kubesphere")]["roleRef"]["name"] == "cluster-admin"
    ports = {name: [(p["port"], p["targetPort"], p.get("nodePort"))
                    for p in objects[("Service", name)]["spec"]["ports"]]
             for name in ("ks-apiserver", "ks-console", "ks-controller-manager")}
    assert ports == {"ks-apiserver": [(80, 9090, None)], "ks-console": [(80, 8000, 30880)],
                     "ks-controller-manager": [(443, 8443, None), (8080, 8080, None)]}
    assert objects[("Service", "ks-console")]["spec"]["type"] == "NodePort"
    assert objects[("Service", "ks-apiserver")]["spec"]["type"] == "ClusterIP"


def test_core_workloads(out: Path) -> None:
    objects = core(out, "default")
    for name in ("ks-apiserver", "ks-console", "ks-controller-manager"):
        deployment = objects[("Deployment", name)]
        assert deployment["spec"]["replicas"] == 1
        spec = pod(objects, name)
        container = spec["containers"][0]
        assert container["image"] == f"kubesphere/{name}:v3.4.1"
        assert container["resources"]["limits"] and container["imagePullPolicy"] == "Always"  # upstream's
        assert ("readinessProbe" in container) == (name != "ks-console")
        assert spec["serviceAccountName"] == "kubesphere"
        assert spec["tolerations"][0] == {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}
        assert spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
            {"weight": 100, "preference": {"matchExpressions": [
                {"key": "node-role.kubernetes.io/master", "operator": "In", "values": [""]}]}}]
        assert "nodeSelector" not in spec
        assert deployment["spec"]["selector"]["matchLabels"] == deployment["spec"]["template"]["metadata"]["labels"]
    for name in ("ks-apiserver", "ks-controller-manager"):
        spec = pod(objects, name)
        assert {"name": "kubesphere-config", "configMap": {"name": "kubesphere-config", "defaultMode": 420,
                                                           "optional": True}} in spec["volumes"]
        credentials = "kubesphere-config-credentials"  # ks-config's Secret
        assert spec["containers"][0]["env"] == [
            {"name": "KUBESPHERE_AUTHENTICATION_JWTSECRET", "valueFrom": {
                "secretKeyRef": {"name": "kubesphere-secret", "key": "secret"}}},
            {"name": "KUBESPHERE_DEVOPS_PASSWORD", "valueFrom": {
                "secretKeyRef": {"name": "kubesphere-secret", "key": "token"}}},
            {"name": "KUBESPHERE_SONARQUBE_TOKEN", "valueFrom": {
                "secretKeyRef": {"name": credentials, "key": "sonarqube-token", "optional": True}}},
            *({"name": f"KUBESPHERE_{section}_PASSWORD", "valueFrom": {
                "secretKeyRef": {"name": credentials, "key": "log-store-password", "optional": True}}}
              for section in ("LOGGING", "EVENTS", "AUDITING")),
            {"name": "KUBESPHERE_LDAP_MANAGERPASSWORD", "valueFrom": {
                "secretKeyRef": {"name": "openldap-secret", "key": "password", "optional": True}}},
            *s3_env("minio")]
    assert pod(objects, "ks-apiserver")["containers"][0]["resources"] == {
        "limits": {"cpu": "1", "memory": "1024Mi"}, "requests": {"cpu": "20m", "memory": "100Mi"}}
    assert core(out, "three_masters")[("Deployment", "ks-apiserver")]["spec"]["replicas"] == 3


def s3_env(secret: str) -> list[dict[str, Any]]:
    """The variables kubesphere.yaml's two s3 sections name, from ``secret``'s keys."""
    return [{"name": f"KUBESPHERE_{path}_{var}", "valueFrom": {
                "secretKeyRef": {"name": secret, "key": key, "optional": True}}}
            for path in ("S3", "OPENPITRIX_S3")
            for var, key in (("ACCESSKEYID", "accesskey"), ("SECRETACCESSKEY", "secretkey"))]


def test_external_s3_keys_come_from_a_secret(out: Path) -> None:
    """An external S3's keys (common.s3) go into Secret kubesphere-s3, under Secret minio's key names, and
    ks-apiserver and ks-controller-manager read the variables kubesphere.yaml names from it (no key in a
    ConfigMap). Without an external S3 the Secret is rendered without keys (applied only over an existing one, to
    empty it)."""
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "kubesphere-s3", "namespace": "kubesphere-system"}}
    rendered = json.loads((out / "core-s3-external_s3.json").read_text())
    assert rendered == [{**secret, "data": {"accesskey": base64.b64encode(b"AK").decode(),
                                            "secretkey": base64.b64encode(b'S&K\n"x"').decode()}}]
    assert json.loads((out / "core-s3-default.json").read_text()) == [secret]
    objects = core(out, "external_s3")
    for name in ("ks-apiserver", "ks-controller-manager"):
        env = pod(objects, name)["containers"][0]["env"]
        assert [e for e in env if "_S3_" in e["name"]] == s3_env("kubesphere-s3")
    assert "S&K" not in json.dumps(list(objects.values()))


def test_core_spec_settings(out: Path) -> None:
    objects = core(out, "tuned")
    apiserver, controller, console = (pod(objects, n) for n in ("ks-apiserver", "ks-controller-manager", "ks-console"))
    assert apiserver["containers"][0]["resources"] == {"limits": {"cpu": "4", "memory": "1024Mi"},
                                                       "requests": {"cpu": "20m", "memory": "100Mi"}}
    assert controller["containers"][0]["resources"] == {"limits": {"cpu": "1", "memory": "1000Mi"},
                                                        "requests": {"cpu": "1", "memory": "50Mi"}}
    assert apiserver["nodeSelector"] == {"core": "yes"}  # common.core wins over the global key
    assert apiserver["tolerations"] == [{"operator": "Exists"}]
    assert apiserver["containers"][0]["image"] == \
        "registry.cn-beijing.aliyuncs.com/kubesphereio/ks-apiserver:v3.4.1"
    for reader in (apiserver, controller):  # kubesphere.yaml's cache.options.password, as upstream's chart sets it
        env = reader["containers"][0]["env"]
        assert {"name": "KUBESPHERE_CACHE_OPTIONS_PASSWORD", "valueFrom": {"secretKeyRef": {
            "name": "redis-secret", "key": "auth", "optional": True}}} in env
        assert not [e for e in env if e["name"] == "KUBESPHERE_REDIS_PASSWORD"]  # no key of kubesphere.yaml
    assert {"name": "x", "emptyDir": {}} in console["volumes"]
    assert {"name": "x", "mountPath": "/x"} in console["containers"][0]["volumeMounts"]
    service = objects[("Service", "ks-console")]["spec"]
    assert service["type"] == "ClusterIP" and "nodePort" not in service["ports"][0]

    objects = core(out, "global_scheduling")
    apiserver = pod(objects, "ks-apiserver")
    assert apiserver["nodeSelector"] == {"global": "yes"}
    assert apiserver["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert apiserver["affinity"]["nodeAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": {}}
    assert apiserver["affinity"]["podAntiAffinity"]  # the default spread is kept
    service = objects[("Service", "ks-console")]["spec"]
    assert service["type"] == "LoadBalancer" and service["ports"][0]["nodePort"] == 30999


# ---------------------------------------------------------------------------------------------- ks-config


def test_default_config(out: Path) -> None:
    cfg = config(out, "default")
    assert list(cfg) == ["authentication", "network", "multicluster", "monitoring", "gpu", "notification",
                         "terminal", "gateway"]  # disabled components have no section
    assert cfg["authentication"] == {
        "authenticateRateLimiterMaxTries": 10, "authenticateRateLimiterDuration": "10m0s",
        "loginHistoryRetentionPeriod": "168h", "maximumClockSkew": "10s", "multipleLogin": True,
        "kubectlImage": "kubesphere/kubectl:v1.22.0", "jwtSecret": "jwt-key",
        "oauthOptions": {"clients": [{"name": "kubesphere", "secret": "kubesphere", "redirectURIs": ["*"]}]}}
    assert cfg["multicluster"] == {"clusterRole": "none"}  # enable only for a host or a member, as upstream
    assert cfg["monitoring"] == {"endpoint": "http://prometheus-operated.kubesphere-monitoring-system.svc:9090",
                                 "enableGPUMonitoring": False}
    assert cfg["gpu"] == {"kinds": [{"resourceName": "nvidia.com/gpu", "resourceType": "GPU", "default": True}]}
    assert cfg["network"] == {"ippoolType": "none"}  # enableNetworkPolicy only when on, as upstream
    assert cfg["terminal"] == {"image": "alpine:3.14", "timeout": 600}
    assert cfg["gateway"] == {"watchesPath": "/var/helm-charts/watches.yaml",
                              "repository": "kubesphere/nginx-ingress-controller", "tag": "v1.3.1",
                              "namespace": "kubesphere-controls-system"}


def test_every_section(out: Path) -> None:
    cfg = config(out, "all_on")
    assert {"ldap", "cache", "s3", "devops", "sonarQube", "servicemesh", "openpitrix", "logging", "events", "auditing",
            "alerting", "edgeruntime"} <= cfg.keys()
    auth = cfg["authentication"]
    assert auth["maximumClockSkew"] == "20s" and auth["kubectlImage"] == "reg.local/kubesphere/kubectl:v1.22.0"
    assert auth["oauthOptions"]["accessTokenMaxAge"] == "1h" and auth["oauthOptions"]["clients"]
    # ks-apiserver v3.4.1 reads the cache section (a `redis:` key would leave it on an in-memory cache per replica)
    assert "redis" not in cfg
    assert cfg["cache"] == {"type": "redis", "options": {"host": "redis.kubesphere-system.svc", "port": 6379,
                                                         "password": "KUBESPHERE_CACHE_OPTIONS_PASSWORD", "db": 0}}
    assert cfg["edgeruntime"] == {"endpoint": "http://edgeservice.kubeedge.svc/api/"}
    # the manager password is openldap's generated one, read by ks-apiserver from openldap-secret
    assert cfg["ldap"]["managerPassword"] == "KUBESPHERE_LDAP_MANAGERPASSWORD"
    # an external S3's keys by their variables too (ks-core takes them from Secret kubesphere-s3)
    assert cfg["s3"] == {"endpoint": "https://s3.example.com", "region": "us-east-1", "disableSSL": True,
                         "forcePathStyle": True, "accessKeyID": "KUBESPHERE_S3_ACCESSKEYID",
                         "secretAccessKey": "KUBESPHERE_S3_SECRETACCESSKEY", "bucket": "s2i-binaries"}
    assert cfg["openpitrix"]["s3"]["bucket"] == "apps"
    assert cfg["openpitrix"]["s3"]["secretAccessKey"] == "KUBESPHERE_OPENPITRIX_S3_SECRETACCESSKEY"
    assert not {"AK", "SK"} & {value for _, value in leaves(cfg) if isinstance(value, str)}
    # credentials by the variables ks-core fills from kubesphere-secret and ks-config's Secret, none in the ConfigMap
    assert cfg["devops"]["password"] == "KUBESPHERE_DEVOPS_PASSWORD"
    assert cfg["sonarQube"] == {"host": "http://sonar.example.com", "token": "KUBESPHERE_SONARQUBE_TOKEN"}
    assert credentials(out, "all_on") == {"sonarqube-token": "tok", "log-store-password": "admin"}
    assert credentials(out, "default") == {}
    assert cfg["network"] == {"enableNetworkPolicy": True, "ippoolType": "calico",
                              "weaveScopeHost": "weave-scope-app.weave"}
    assert cfg["multicluster"] == {"clusterRole": "host", "enable": True,
                                   "agentImage": "reg.local/kubesphere/tower:v0.2.1",
                                   "proxyPublishService": "tower.kubesphere-system.svc",
                                   "proxyPublishAddress": "http://10.0.0.9:8080"}
    assert cfg["monitoring"]["enableGPUMonitoring"] is True
    opensearch = {"host": "https://opensearch-cluster-data.kubesphere-logging-system.svc:9200", "basicAuth": True,
                  "username": "admin"}
    assert cfg["logging"] == {**opensearch, "password": "KUBESPHERE_LOGGING_PASSWORD",
                              "indexPrefix": "ks-whizard-logging"}
    assert cfg["events"] == {**opensearch, "password": "KUBESPHERE_EVENTS_PASSWORD", "indexPrefix": "ks-whizard-events"}
    assert cfg["auditing"] == {"enable": True, "webhookURL": "https://kube-auditing-webhook-svc.kubesphere-logging-system"
                               ".svc:6443/audit/webhook/event", **opensearch,
                               "password": "KUBESPHERE_AUDITING_PASSWORD", "indexPrefix": "ks-whizard-auditing"}
    assert cfg["terminal"] == {"image": "busybox:1.36", "timeout": 0}
    assert cfg["gateway"]["namespace"] == "gateways"
    assert cfg["gateway"]["repository"] == "reg.local/kubesphere/nginx-ingress-controller"


def test_keys_read_from_variables_are_left_out_of_the_roll_decision(out: Path) -> None:
    """ks-config decides whether to roll the readers on kubesphere.yaml without the keys they read from a variable:
    every variable it names is one ks-core's render gives both readers (so no live read is needed), and the original's
    file with the values written in their place (as v3.4.1 wrote the LDAP manager password) compares equal; any
    other key still counts."""
    f = filter_plugins("kubesphere-defaults", "ks_env").FilterModule().filters()
    ours = config(out, "all_on")
    objects = core(out, "tuned")  # redis on: the cache password's variable too
    readers = [objects[("Deployment", name)] for name in ("ks-apiserver", "ks-controller-manager")]
    paths = f["ks_env_placeholders"](ours)
    named = {value for _, value in leaves(ours) if isinstance(value, str) and value.startswith("KUBESPHERE_")}
    assert sorted(f["ks_env_name"](".".join(p)) for p in paths) == sorted(named)
    for reader in readers:  # ks-core gives every container of both readers each variable the file names
        for container in reader["spec"]["template"]["spec"]["containers"]:
            assert named <= {e["name"] for e in container.get("env") or []}, container["name"]
    assert ["ldap", "managerPassword"] in paths and ["openpitrix", "s3", "accessKeyID"] in paths

    theirs = json.loads(json.dumps(ours))
    theirs["ldap"]["managerPassword"] = "admin"
    theirs["openpitrix"]["s3"]["accessKeyID"] = "openpitrixminioaccesskey"
    assert f["ks_without_keys"](theirs, paths) == f["ks_without_keys"](ours, paths)
    assert f["ks_without_keys"](ours, paths)["ldap"] == {k: v for k, v in ours["ldap"].items()
                                                          if k != "managerPassword"}
    theirs["ldap"]["host"] = "ldap.example.com:389"
    assert f["ks_without_keys"](theirs, paths) != f["ks_without_keys"](ours, paths)


def test_credentials_are_compared_as_the_readers_take_them(out: Path) -> None:
    """The credentials of Secret kubesphere-config-credentials enter ks-config's roll decision as the pods read them:
    the Secret's value where it holds the key (their variable is set), else the value the file wrote. Pods started
    over the original's file, which wrote the passwords in place, before the Secret existed (ks-core's roll at the
    switch) read what ours gives them: no second roll. Another value either way, or the file naming a variable the
    pods were not given, is a roll."""
    f = filter_plugins("kubesphere-defaults", "ks_env").FilterModule().filters()
    defaults = yaml.safe_load((REPO / "roles/kubesphere-defaults/defaults/main.yaml").read_text())
    name = defaults["ks_config_credentials_secret"]
    creds = [{**c, "secret": name if "{{" in c["secret"] else c["secret"]} for c in defaults["ks_config_credentials"]]
    ours = config(out, "all_on")
    data = {k: base64.b64encode(v.encode()).decode() for k, v in credentials(out, "all_on").items()}

    def read(config: dict[str, Any], secret: dict[str, str] | None) -> dict[str, Any]:
        return f["ks_read_credentials"](config, secret, creds, name)

    assert read(ours, data) == {"sonarQube.token": "tok", "logging.password": "admin", "events.password": "admin",
                                "auditing.password": "admin"}
    theirs = json.loads(json.dumps(ours))
    for section in ("logging", "events", "auditing"):
        theirs[section]["password"] = "admin"
    theirs["sonarQube"]["token"] = "tok"
    assert read(theirs, None) == read(ours, data)
    assert read(theirs, {}) == read(ours, data)
    assert read(ours, None) != read(ours, data)  # our file names the variables: pods without them must roll
    theirs["events"]["password"] = "old"
    assert read(theirs, None) != read(ours, data)
    assert read(theirs, data) == read(ours, data)  # the variable, set, wins over the file
    assert read(ours, {**data, "log-store-password": base64.b64encode(b"old").decode()}) != read(ours, data)


def test_log_store_choice(out: Path) -> None:
    assert config(out, "external_es")["logging"] == {"host": "https://es.example.com:9201", "basicAuth": True,
                                                     "username": "u", "password": "KUBESPHERE_LOGGING_PASSWORD",
                                                     "indexPrefix": "ks-mine-log"}
    assert credentials(out, "external_es") == {"log-store-password": "p"}
    assert credentials(out, "external_opensearch") == {}  # basicAuth off
    assert config(out, "external_opensearch")["events"] == {"host": "https://os.example.com:9202",
                                                            "indexPrefix": "ks-whizard-events"}
    auditing = config(out, "internal_es")["auditing"]
    assert auditing["host"] == "http://elasticsearch-logging-data.kubesphere-logging-system.svc:9200"
    assert auditing["indexPrefix"] == "ks-logstash-auditing" and "basicAuth" not in auditing


def test_internal_minio_keys_come_from_its_secret(out: Path) -> None:
    """No key in the ConfigMap: kubesphere.yaml names the environment variables ks-core fills from Secret minio."""
    cfg = config(out, "internal_minio")
    minio = {"endpoint": "http://minio.kubesphere-system.svc:9000", "region": "us-east-1", "disableSSL": True,
             "forcePathStyle": True}
    assert cfg["s3"] == {**minio, "accessKeyID": "KUBESPHERE_S3_ACCESSKEYID",
                         "secretAccessKey": "KUBESPHERE_S3_SECRETACCESSKEY", "bucket": "s2i-binaries"}
    assert cfg["openpitrix"]["s3"] == {**minio, "accessKeyID": "KUBESPHERE_OPENPITRIX_S3_ACCESSKEYID",
                                       "secretAccessKey": "KUBESPHERE_OPENPITRIX_S3_SECRETACCESSKEY",
                                       "bucket": "app-store"}


def test_hostile_values_stay_values(out: Path) -> None:
    """Defence in depth behind validation: every spec value is quoted into the YAML the roles render."""
    cfg = config(out, "hostile")
    assert cfg["terminal"]["timeout"] == "1\ninjected: true" and "injected" not in cfg["terminal"]
    assert cfg["authentication"]["authenticateRateLimiterMaxTries"] == "3\n  injected: true"
    assert "injected" not in cfg["authentication"]
    service = core(out, "hostile")[("Service", "ks-console")]
    assert service["spec"]["type"] == "NodePort\n  injected: true" and "injected" not in service["spec"]


def test_member_cluster(out: Path) -> None:
    cfg = config(out, "member")
    assert cfg["multicluster"] == {"clusterRole": "member", "enable": False}
    assert cfg["authentication"]["oauthOptions"]["accessTokenMaxAge"] == 0


def test_edgeruntime_section_only_with_kubeedge(out: Path) -> None:
    # As upstream: ks-apiserver proxies to KubeEdge's edgeservice, which only edgeruntime.kubeedge deploys.
    assert "edgeruntime" not in config(out, "edge_without_kubeedge")


# --------------------------------------------------------------------------------------------- preinstall


def test_preinstall_checks(out: Path) -> None:
    results = {name: (out / f"check-{name}.txt").read_text() for name in CHECKS}
    assert results["ok"] == results["k3s"] == results["empty_password"] == "ok"
    assert results["old"] == "KubeSphere v3.4.1 needs Kubernetes v1.19 or newer; this cluster runs v1.18.20"
    assert results["weak"] == "authentication.adminPassword is too weak: it needs an uppercase letter, a digit"
    assert results["short"] == "authentication.adminPassword is too weak: it needs at least 8 characters"


def test_preinstall_filters() -> None:
    f = filter_plugins("preinstall", "preinstall")
    assert f.ks_password_missing("Passw0rd") == []
    assert f.ks_password_missing("") == ["at least 8 characters", "an uppercase letter", "a lowercase letter",
                                         "a digit"]
    classes = [{"metadata": {"name": "a"}},
               {"metadata": {"name": "b", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}},
               {"metadata": {"name": "c", "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"}}},
               {"metadata": {"name": "d", "annotations": {"storageclass.kubernetes.io/is-default-class": "false"}}}]
    assert f.ks_default_storage_classes(classes) == ["b", "c"]
