"""The devops role's manifests, rendered by Ansible for spec variants and cluster facts (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import upstream_fixture
import yaml
from installer_state import upstream_objects
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults
from installer.spec import leaves

REPO = Path(__file__).resolve().parents[2]
NS, WORKER, ARGO = "kubesphere-devops-system", "kubesphere-devops-worker", "argocd"
ON: dict[str, Any] = {"devops": {"enabled": True}}
ZONE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
S3 = {"endpoint": "https://s3.example.com", "region": "eu-west-1", "disableSSL": False, "forcePathStyle": True,
      "accessKeyID": "given-s3-ak", "secretAccessKey": "given-s3-sk", "openpitrixBucket": "apps"}
# What tasks/main.yaml reads from a cluster (for the "live" scenario).
LIVE = {"ks_devops_jwt_secret": "jwt-key", "ks_devops_admin_token": "admin.token",
        "ks_devops_minio_keys": {"accessKeyID": "minio-ak", "secretAccessKey": "minio-sk"},
        "ks_node_runtime_version": "docker://20.10.8", "ks_devops_ca_bundle": "Q0E=",
        "ks_devops_live_claim": {"storage": "20Gi", "storageClassName": "old"}, "ks_devops_served_monitors": []}
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": ON,
    "custom": {"devops": {"enabled": True, "jenkinsCpuReq": 0.3, "jenkinsCpuLim": 2, "jenkinsMemoryReq": "2Gi",
                          "jenkinsMemoryLim": "6144Mi", "jenkinsVolumeSize": "32Gi",
                          "resources": {"limits": {"memory": "1Gi"}},
                          "sonarqube": {"externalSonarUrl": "http://sonar.example.com",
                                        "externalSonarToken": "sonar-tok-123"},
                          "argocd": {"installation": "custom", "namespace": "gitops"},
                          "nodeSelector": {"pool": "devops"}, "tolerations": [{"key": "devops", "operator": "Exists"}]},
               "persistence": {"storageClass": "fast"}, "nodeSelector": {"pool": "infra"}, "affinity": ZONE},
    "global": {**ON, "nodeSelector": {"pool": "infra"}, "tolerations": [{"operator": "Exists"}], "affinity": ZONE,
               "local_registry": "registry.local:5000", "common": {"s3": S3}, "servicemesh": {"enabled": True}},
    "live": ON,
}
# Ensured by tasks/main.yaml, not rendered: Secrets devops-jenkins (the admin password created once, the LDAP manager
# password) and argocd-secret (Argo CD's generated key), and the S2I webhook certificate (ks_webhook_cert).
APART = {("Secret", ARGO, "argocd-secret"), ("Secret", NS, "devops-jenkins"), ("Secret", NS, "s2i-webhook-server-cert")}
# Rendered beyond upstream's objects: namespaces upstream created outside its charts.
EXTRA = {("Namespace", "", NS), ("Namespace", "", ARGO)}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: apply_defaults(changes) | (LIVE if name == "live" else {})
                 for name, changes in SCENARIOS.items()}
    return render_scenarios("devops", "ks_devops_objects", scenarios, tmp_path_factory.mktemp("devops"))


def argocd(objects: Objects) -> set[tuple[str, str, str]]:
    return {k for k in keys(objects) if k[1] == ARGO or k == ("Namespace", "", ARGO) or "argoproj.io" in k[2]
            or k[2].startswith("devops-argocd")}


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    for name, objects in rendered.items():
        assert len(objects) == len(keys(objects)), name
        expected = (upstream_objects("devops") - APART) | EXTRA
        if name == "custom":  # Argo CD is the user's
            assert argocd(objects) == set()
            expected -= argocd(rendered["default"])
        if name == "live":  # the cluster serves no prometheus-operator CRDs
            expected = {k for k in expected if k[1] != "kubesphere-monitoring-system"}
        assert keys(objects) == expected, name
    labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in rendered["default"] if o["kind"] == "Namespace"}
    assert all(v["kubesphere.io/workspace"] == "system-workspace" for v in labels.values())
    assert labels[WORKER]["component"] == "devops-jenkins-master"


def test_argocd_pod_labels_are_the_charts(rendered: dict[str, Objects]) -> None:
    """Argo CD's pod templates carry the chart's labels, Helm's managed-by included (in no selector): a switch from
    v3.4.1 keeps its pods."""
    theirs = {o["metadata"]["name"]: o["spec"]["template"]["metadata"]["labels"]
              for step in upstream_fixture.load("pluggable").modules["devops"] for o in step.objects
              if o["kind"] in ("Deployment", "StatefulSet") and o["metadata"]["name"].startswith("devops-argocd-")}
    ours = {o["metadata"]["name"]: o["spec"]["template"]["metadata"]["labels"] for o in rendered["default"]
            if o["kind"] in ("Deployment", "StatefulSet") and o["metadata"]["name"].startswith("devops-argocd-")}
    assert len(ours) == 7 and ours == theirs


def test_images_and_registry(rendered: dict[str, Objects]) -> None:
    workloads = [("Deployment", "devops-apiserver", "kubesphere/devops-apiserver:ks-v3.4.1"),
                 ("Deployment", "devops-controller", "kubesphere/devops-controller:ks-v3.4.1"),
                 ("Deployment", "devops-jenkins", "kubesphere/ks-jenkins:v3.4.0-2.319.3-1"),
                 ("StatefulSet", "s2ioperator", "kubesphere/s2ioperator:v3.2.1"),
                 ("Deployment", "devops-argocd-server", "quay.io/argoproj/argocd:v2.3.3"),
                 ("Deployment", "devops-argocd-dex-server", "ghcr.io/dexidp/dex:v2.30.2"),
                 ("Deployment", "devops-argocd-redis", "redis:6.2.6-alpine"),
                 ("Deployment", "devops-argocd-applicationset-controller",
                  "quay.io/argoproj/argocd-applicationset:v0.4.1")]
    for scenario, registry in (("default", ""), ("global", "registry.local:5000/")):
        objects = rendered[scenario]
        for kind, name, image in workloads:
            want = registry + image.removeprefix("quay.io/").removeprefix("ghcr.io/") if registry else image
            assert pod(objects, kind, name)["containers"][0]["image"] == want, (scenario, name)
        init = pod(objects, "Deployment", "devops-apiserver")["initContainers"][0]
        assert init["image"] == registry + "kubesphere/devops-tools:ks-v3.4.1"
        assert init["command"] == ["devops-tool", "init-config", "--namespace", NS]
        s2i = pod(objects, "StatefulSet", "s2ioperator")["containers"][0]
        assert {"name": "S2IIMAGENAME", "value": registry + "kubesphere/s2irun:v3.2.0"} in s2i["env"]
        java = find(objects, "S2iBuilderTemplate", "java")["spec"]
        assert java["defaultBaseImage"] == registry + "kubesphere/java-8-centos7:v3.2.0"
        assert java["containerInfo"][1]["runtimeImage"] == registry + "kubesphere/java-11-runtime:v3.2.0"


def test_jenkins_as_upstream(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    deployment = find(objects, "Deployment", "devops-jenkins")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    spec = pod(objects, "Deployment", "devops-jenkins")
    (jenkins,) = spec["containers"]
    assert jenkins["resources"] == {"requests": {"cpu": "0.5", "memory": "4Gi"},
                                    "limits": {"cpu": "1", "memory": "4Gi"}}
    assert spec["initContainers"][0]["resources"] == jenkins["resources"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in jenkins["env"]}
    assert "-XX:MaxRAM=4G " in env["JAVA_TOOL_OPTIONS"]
    assert env["ADMIN_PASSWORD"] == {"secretKeyRef": {"name": "devops-jenkins", "key": "jenkins-admin-password"}}
    assert env["LDAP_MANAGER_PASSWORD"] == {"secretKeyRef": {"name": "devops-jenkins", "key": "ldap-manager-password"}}
    assert "SONAR_ENABLED" not in env and env["EMAIL_SMTP_PORT"] == "465"
    assert jenkins["readinessProbe"]["httpGet"] == {"path": "/login", "port": "http"}
    claim = next(v for v in spec["volumes"] if v["name"] == "jenkins-home")["persistentVolumeClaim"]["claimName"]
    assert claim == "devops-jenkins"
    pvc = find(objects, "PersistentVolumeClaim", "devops-jenkins")["spec"]
    assert pvc["resources"]["requests"]["storage"] == "16Gi" and "storageClassName" not in pvc
    service = find(objects, "Service", "devops-jenkins")["spec"]
    assert service["type"] == "NodePort" and service["ports"][0]["nodePort"] == 30180
    assert find(objects, "Service", "devops-jenkins-agent")["spec"]["ports"][0]["port"] == 50000
    assert find(objects, "ConfigMap", "ks-devops-agent")["metadata"]["namespace"] == WORKER
    home = find(objects, "ConfigMap", "devops-jenkins")["data"]
    assert "<image>jenkins/inbound-agent:4.10-2</image>" in home["config.xml"] and "initUsers.groovy" in home
    casc = yaml.safe_load(find(objects, "ConfigMap", "jenkins-casc-config")["data"]["jenkins.yaml"])
    realm = casc["jenkins"]["securityRealm"]["ldap"]["configurations"][0]
    assert realm["managerPasswordSecret"] == "${LDAP_MANAGER_PASSWORD}"
    assert realm["server"] == "ldap://openldap.kubesphere-system.svc:389"
    templates = {t["name"]: t for t in casc["jenkins"]["clouds"][0]["kubernetes"]["templates"]}
    assert list(templates) == ["base", "nodejs", "maven", "mavenjdk11", "go", "go16", "go17", "go18", "python"]
    assert templates["maven"]["containers"][0]["image"] == "kubesphere/builder-maven:v3.2.0-podman"
    assert templates["maven"]["containers"][0]["privileged"] is True
    assert templates["go18"] == {"name": "go18", "label": "go18", "inheritFrom": "go",
                                 "containers": [{"name": "go", "image": "kubesphere/builder-go:v3.2.2-1.18-podman"}]}
    assert yaml.safe_load(templates["maven"]["yaml"])["spec"]["volumes"][0]["configMap"]["name"] == "ks-devops-agent"
    monitor = find(objects, "ServiceMonitor", "devops-jenkins")
    assert monitor["metadata"]["namespace"] == "kubesphere-monitoring-system"
    assert monitor["spec"]["selector"] == {"matchLabels": {"app": "devops-jenkins"}}
    rules = find(objects, "PrometheusRule", "devops-jenkins-rules")["spec"]["groups"][0]["rules"]
    # The expressions of the ks-devops 0.2.2 chart's jenkins PrometheusRule (ks-installer v3.4.1), but the last one's
    # job, which upstream rendered as '%!s(<nil>)-%!s(<nil>)' (no target has it): the ServiceMonitor's job here.
    assert [r["expr"] for r in rules] == [
        'sum(rate(process_cpu_seconds_total{container="devops-jenkins", namespace="kubesphere-devops-system"}[5m]))'
        ' by (container, instance) > 0.8\n',
        "absent(default_jenkins_up)",
        "avg_over_time(jenkins_queue_size_value[5m]) > 10",
        "increase(jenkins_runs_failure_total{namespace='kubesphere-devops-system', container='devops-jenkins',"
        " job='devops-jenkins'}[5m]) > 5"]
    assert monitor["spec"]["jobLabel"] == "devops-jenkins"  # no such Service label: the job is the Service's name


def test_jenkins_spec_fields(rendered: dict[str, Objects]) -> None:
    objects = rendered["custom"]
    jenkins = pod(objects, "Deployment", "devops-jenkins")["containers"][0]
    assert jenkins["resources"] == {"requests": {"cpu": "0.3", "memory": "2Gi"},
                                    "limits": {"cpu": "2", "memory": "6144Mi"}}
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in jenkins["env"]}
    assert "-XX:MaxRAM=6144M " in env["JAVA_TOOL_OPTIONS"]
    assert env["SONAR_ENABLED"] == "true" and env["SONAR_SERVER_URL"] == "http://sonar.example.com"
    # The token, a credential, from Secret devops-jenkins (upstream: a plain value in the Deployment).
    assert env["SONAR_AUTH_TOKEN"] == {"secretKeyRef": {"name": "devops-jenkins", "key": "sonar-auth-token"}}
    assert "sonar-tok-123" not in json.dumps(pod(objects, "Deployment", "devops-jenkins"))
    pvc = find(objects, "PersistentVolumeClaim", "devops-jenkins")["spec"]
    assert pvc["resources"]["requests"]["storage"] == "32Gi" and pvc["storageClassName"] == "fast"
    config = yaml.safe_load(find(objects, "ConfigMap", "devops-config")["data"]["kubesphere.yaml"])
    assert config["sonarQube"] == {"host": "http://sonar.example.com", "token": "sonar-tok-123"}
    # A volume that exists keeps its size and StorageClass; docker nodes get the docker builder images.
    live = rendered["live"]
    pvc = find(live, "PersistentVolumeClaim", "devops-jenkins")["spec"]
    assert (pvc["resources"]["requests"]["storage"], pvc["storageClassName"]) == ("20Gi", "old")
    casc = yaml.safe_load(find(live, "ConfigMap", "jenkins-casc-config")["data"]["jenkins.yaml"])
    base = casc["jenkins"]["clouds"][0]["kubernetes"]["templates"][0]["containers"][0]
    assert (base["image"], base["privileged"]) == ("kubesphere/builder-base:v3.2.2", False)


def test_devops_config_and_argocd_namespace(rendered: dict[str, Objects]) -> None:
    config = yaml.safe_load(find(rendered["live"], "ConfigMap", "devops-config")["data"]["kubesphere.yaml"])
    assert config["authentication"]["jwtSecret"] == "jwt-key"
    assert config["devops"] == {"host": "http://devops-jenkins.kubesphere-devops-system", "username": "admin",
                                "password": "admin.token", "maxConnections": 100, "namespace": NS,
                                "workerNamespace": WORKER}
    assert config["s3"] == {"endpoint": "http://minio.kubesphere-system.svc:9000", "region": "us-east-1",
                            "disableSSL": True, "forcePathStyle": True, "accessKeyID": "minio-ak",
                            "secretAccessKey": "minio-sk", "bucket": "s2i-binaries"}
    external = yaml.safe_load(find(rendered["global"], "ConfigMap", "devops-config")["data"]["kubesphere.yaml"])["s3"]
    assert external == {k: v for k, v in S3.items() if k != "openpitrixBucket"} | {"bucket": "s2i-binaries"}
    apiserver = pod(rendered["default"], "Deployment", "devops-apiserver")["containers"][0]
    assert apiserver["args"] == ["--argocd-namespace=argocd", "--argocd-enabled=true"]
    assert apiserver["ports"] == [{"containerPort": 9090, "protocol": "TCP"}]
    controller = pod(rendered["custom"], "Deployment", "devops-controller")["containers"][0]
    assert "--argocd-namespace=gitops" in controller["args"]
    assert controller["resources"] == {"limits": {"memory": "1Gi"}}
    hashes = {find(rendered[s], "Deployment", "devops-apiserver")["spec"]["template"]["metadata"]["annotations"][
        "installer.kubesphere.io/config-hash"] for s in ("default", "live")}
    assert len(hashes) == 2  # a changed devops-config rolls the pods that read it at start-up
    assert find(rendered["default"], "Service", "devops-apiserver")["spec"]["ports"][0]["port"] == 9090


def test_scheduling_module_over_global(rendered: dict[str, Objects]) -> None:
    workloads = [("Deployment", "devops-apiserver"), ("Deployment", "devops-controller"),
                 ("Deployment", "devops-jenkins"), ("StatefulSet", "s2ioperator"),
                 ("Deployment", "devops-argocd-server"), ("StatefulSet", "devops-argocd-application-controller")]
    for kind, name in workloads:
        spec = pod(rendered["global"], kind, name)
        assert spec["nodeSelector"] == {"pool": "infra"} and spec["affinity"] == ZONE, name
        assert spec["tolerations"] == [{"operator": "Exists"}], name
        assert "nodeSelector" not in pod(rendered["default"], kind, name)
    for kind, name in workloads[:4]:
        spec = pod(rendered["custom"], kind, name)
        assert spec["nodeSelector"] == {"pool": "devops"} and spec["affinity"] == ZONE, name
        assert spec["tolerations"] == [{"key": "devops", "operator": "Exists"}], name


def test_s2i_webhooks_and_monitors(rendered: dict[str, Objects]) -> None:
    for scenario, bundle in (("default", ""), ("live", "Q0E=")):
        objects = rendered[scenario]
        mutating = find(objects, "MutatingWebhookConfiguration", "mutating-webhook-configuration")["webhooks"]
        validating = find(objects, "ValidatingWebhookConfiguration", "validating-webhook-configuration")["webhooks"]
        assert [w["name"] for w in mutating + validating] == [
            "s2ibuilder.kb.io", "vs2ibuilder.kb.io", "s2ibuildertemplate.kb.io", "vs2irun.kb.io"]
        for hook in mutating + validating:
            assert hook["failurePolicy"] == "Fail" and hook["clientConfig"]["caBundle"] == bundle
            assert hook["clientConfig"]["service"]["name"] == "webhook-server-service"
    spec = pod(rendered["default"], "StatefulSet", "s2ioperator")
    assert spec["volumes"][0]["secret"]["secretName"] == "s2i-webhook-server-cert"
    assert find(rendered["default"], "Service", "webhook-server-service")["spec"]["ports"] == [
        {"port": 443, "targetPort": 443}]
    # Without prometheus-operator's CRDs, no monitors.
    assert not [o for o in rendered["live"] if o["apiVersion"].startswith("monitoring.coreos.com")]


def test_crds_and_templates(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    crd = find(objects, "CustomResourceDefinition", "pipelineruns.devops.kubesphere.io")["spec"]
    assert (crd["scope"], crd["names"]["shortNames"], crd["versions"][0]["name"]) == ("Namespaced", ["pr"], "v1alpha3")
    assert crd["versions"][0]["subresources"] == {"status": {}}
    app = find(objects, "CustomResourceDefinition", "applications.argoproj.io")
    assert app["metadata"]["labels"]["app.kubernetes.io/part-of"] == "argocd"
    assert "subresources" not in app["spec"]["versions"][0]
    template = find(objects, "ClusterTemplate", "golang")
    assert template["apiVersion"] == "devops.kubesphere.io/v1alpha3" and template["spec"]["template"]
    step = find(objects, "ClusterStepTemplate", "cd")
    assert step["metadata"]["labels"] == {"step.devops.kubesphere.io/category": "Container"}
    assert step["spec"]["template"].endswith("}\n")


def _config(objects: Objects) -> dict[str, Any]:
    return yaml.safe_load(find(objects, "ConfigMap", "devops-config")["data"]["kubesphere.yaml"])


def test_devops_config_ldap_section(rendered: dict[str, Objects]) -> None:
    # Chart ks-devops 0.2.2's section, naming the openldap module's directory; the password by its variable only.
    for objects in rendered.values():
        assert _config(objects)["ldap"] == {
            "host": "openldap.kubesphere-system.svc:389", "managerDN": "cn=admin,dc=kubesphere,dc=io",
            "managerPassword": "KUBESPHERE_LDAP_MANAGERPASSWORD", "userSearchBase": "ou=Users,dc=kubesphere,dc=io",
            "groupSearchBase": "ou=Groups,dc=kubesphere,dc=io"}


def test_variables_devops_config_names_come_from_secrets(rendered: dict[str, Objects]) -> None:
    """A value of devops-config that names a variable (KUBESPHERE_<KEY_PATH>, KubeSphere's convention) is that
    key's path, and every Deployment that mounts devops-config gets it from a key of a Secret the role ensures."""
    main = yaml.safe_load((REPO / "roles/devops/tasks/main.yaml").read_text())
    jenkins_secret = next(t for t in main if t["name"].startswith("DevOps | Apply Secret"))
    definition = jenkins_secret["ks_manifest"]["definition"]
    assert "'name': ks_devops_jenkins_secret" in definition
    defaults = yaml.safe_load((REPO / "roles/devops/defaults/main.yaml").read_text())
    assert defaults["ks_devops_jenkins_secret"] == "devops-jenkins"
    ldap_key = defaults["ks_devops_ldap_env"]["key"]
    assert "ks_devops_ldap_env.key:" in definition  # Secret devops-jenkins holds that key
    for scenario, objects in rendered.items():
        named = {value: path for path, value in leaves(_config(objects))
                 if isinstance(value, str) and value.startswith("KUBESPHERE_")}
        assert set(named.values()) == {"ldap.managerPassword"}, scenario
        for variable, path in named.items():  # each rendered name is that of its key path
            assert variable == "KUBESPHERE_" + path.upper().replace(".", "_"), scenario
        readers = [o for o in objects if o["kind"] == "Deployment" and any(
            (v.get("configMap") or {}).get("name") == "devops-config"
            for v in o["spec"]["template"]["spec"].get("volumes", []))]
        assert {o["metadata"]["name"] for o in readers} == {"devops-apiserver", "devops-controller"}, scenario
        for deployment in readers:
            for container in deployment["spec"]["template"]["spec"]["containers"]:
                env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in container.get("env", [])}
                for variable in named:
                    assert env[variable] == {"name": "devops-jenkins", "key": ldap_key}, scenario


def test_no_credential_in_configmaps_but_what_ks_devops_reads_from_its_file(rendered: dict[str, Objects]) -> None:
    """The credentials the role is given or reads (the JWT key, the admin token, S3 keys, the SonarQube token) are in
    no ConfigMap but devops-config, and there only where ks-devops v3.4.1 reads them: it binds no environment
    variable to its configuration. The LDAP password is no input of the manifests at all: devops-config names its
    variable, Jenkins' configuration its ${LDAP_MANAGER_PASSWORD} (both from Secret devops-jenkins)."""
    credentials = {"live": {"jwt-key", "admin.token", "minio-ak", "minio-sk"},
                   "custom": {"sonar-tok-123"}, "global": {S3["accessKeyID"], S3["secretAccessKey"]}}
    read_from_file = {"authentication.jwtSecret", "devops.password", "s3.accessKeyID", "s3.secretAccessKey",
                      "sonarQube.token"}
    for scenario, values in credentials.items():
        configmaps = [o for o in rendered[scenario] if o["kind"] == "ConfigMap"]
        for configmap in configmaps:
            if configmap["metadata"]["name"] == "devops-config":
                continue
            text = json.dumps(configmap)
            assert not [v for v in values if v in text], (scenario, configmap["metadata"]["name"])
        found = {path for path, value in leaves(_config(rendered[scenario]))
                 if isinstance(value, str) and value in values}
        assert found and found <= read_from_file, (scenario, found)


def test_devops_namespace_excluded_from_injection_while_servicemesh_is_on(rendered: dict[str, Objects]) -> None:
    """istio-injection=disabled on the namespaces servicemesh names, those devops creates labelled by devops itself
    while servicemesh.enabled (servicemesh labels only the namespaces that exist when it runs)."""
    mesh = yaml.safe_load((REPO / "roles/servicemesh/defaults/main.yaml").read_text())
    excluded = set(mesh["ks_servicemesh_injection_disabled"])
    assert NS in excluded
    for scenario, objects in rendered.items():
        labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in objects if o["kind"] == "Namespace"}
        labelled = {name for name, value in labels.items() if value.get("istio-injection") == "disabled"}
        assert not {v for value in labels.values() for k, v in value.items() if k == "istio-injection"} - {"disabled"}
        assert labelled == (excluded & labels.keys() if scenario == "global" else set()), scenario
