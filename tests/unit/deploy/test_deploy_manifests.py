"""The kustomize manifests under deploy/: stable output, a config the service accepts, RBAC names
that match the config, and the pod security the issue asks for. No cluster needed (kubectl
only renders); tests/integration/test_deploy_*.py apply them to a real apiserver."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from tests.unit.deploy import rendering
from tests.unit.deploy.rendering import DEPLOY, RENDERED, ROOT, TARGETS, find, objects, one, service_config
from vkprovider.config import Settings, load_settings
from vkprovider.preflight import StartupChecks

pytestmark = pytest.mark.skipif(rendering.kubectl() is None, reason="no kubectl: run `make cluster-build`")

OVERLAY_ONLY = {"providers", "placement"}


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {target: objects(rendering.render(target)) for target in TARGETS}


@pytest.mark.parametrize("target", list(rendering.RENDERED_TARGETS))
def test_rendered_output_matches_the_checked_in_file(target: str) -> None:
    expected = (RENDERED / f"{target}.yaml").read_text()
    assert rendering.render(target) == expected, (
        f"deploy/rendered/{target}.yaml is stale: run `.venv/bin/python -m tests.unit.deploy.rendering`"
    )


@pytest.mark.parametrize("target", list(TARGETS))
def test_the_config_map_is_a_valid_service_config(target: str, rendered: dict[str, Any]) -> None:
    config = service_config(rendered[target])
    checks = StartupChecks(ports=False, kube=False, require_providers=target != "base")
    settings = Settings.model_validate(config, context=checks)
    assert settings.leader_election.enabled
    assert settings.http.admin_host == "0.0.0.0"


def test_the_base_alone_has_no_provider_and_serve_would_say_so(rendered: dict[str, Any]) -> None:
    config = service_config(rendered["base"])
    assert config["providers"] == []
    with pytest.raises(ValidationError, match="no providers configured"):
        Settings.model_validate(config, context=StartupChecks(ports=False, kube=False))


@pytest.mark.parametrize("overlay", ["demo", "runpod"])
def test_overlay_configs_keep_the_base_sections(overlay: str, rendered: dict[str, Any]) -> None:
    base = service_config(rendered["base"])
    config = service_config(rendered[overlay])
    shared = {k: v for k, v in config.items() if k not in OVERLAY_ONLY}
    assert shared == {k: v for k, v in base.items() if k not in OVERLAY_ONLY}
    assert config["providers"], "an overlay must configure at least one provider"


@pytest.mark.parametrize("overlay", ["demo", "runpod"])
def test_shipped_overlays_serve_the_kubelet_api(overlay: str, rendered: dict[str, Any]) -> None:
    """kubectl logs/top reach burst pods: a CSR-issued certificate (with the rights to ask for
    it), the apiserver's client certificates verified, and a writable cert_dir that outlives a
    container restart."""
    docs = rendered[overlay]
    settings = Settings.model_validate(service_config(docs), context=StartupChecks(ports=False, kube=False))
    assert settings.kubelet.enabled and settings.kubelet.csr
    assert set(cluster_wide_rules(docs)) >= CSR_RIGHTS
    pod = one(docs, "Deployment", "vkprovider")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["VKPROVIDER_KUBELET__CLIENT_CA_FILE"] == "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[settings.kubelet.cert_dir])
    assert "emptyDir" in volume  # the root filesystem is read-only


def rules_of(doc: dict[str, Any], resource: str, group: str = "") -> list[dict[str, Any]]:
    return [r for r in doc["rules"] if resource in r["resources"] and group in r["apiGroups"]]


@pytest.mark.parametrize("target", list(TARGETS))
def test_rbac_names_follow_the_config(target: str, rendered: dict[str, Any]) -> None:
    assert_rbac_names_every_node(rendered[target])


def assert_rbac_names_every_node(docs: list[dict[str, Any]]) -> None:
    """Every rule that names the node names exactly the config's nodes (``node:`` or ``nodes:``),
    and the election Role exactly their Leases."""
    config = service_config(docs)
    nodes = [n["name"] for n in config.get("nodes") or [config["node"]]]
    election = config["leader_election"]
    leases = [election.get("lease_name") or f"vkprovider-{node}" for node in nodes]
    role = one(docs, "ClusterRole", "vkprovider")
    named = [r for r in rules_of(role, "nodes") + rules_of(role, "nodes/status") if "resourceNames" in r]
    assert len(named) == 2 and all(r["resourceNames"] == nodes for r in named)
    admin = one(docs, "ClusterRole", "vkprovider-admin-api")
    assert admin["rules"] == [
        {"apiGroups": [""], "resources": ["nodes/proxy"], "resourceNames": nodes, "verbs": ["get", "create"]}
    ]
    node_lease = one(docs, "Role", "vkprovider-node-lease")
    assert node_lease["metadata"]["namespace"] == "kube-node-lease"
    assert [r["resourceNames"] for r in node_lease["rules"] if "resourceNames" in r] == [nodes]
    leader = one(docs, "Role", "vkprovider-leader-election")
    assert leader["metadata"]["namespace"] == election["namespace"] == "vkprovider-system"
    assert [r["resourceNames"] for r in leader["rules"] if "resourceNames" in r] == [leases]


def test_the_several_nodes_example_names_every_node_and_opens_each_kubelet_port(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """deploy/examples/several-nodes: the demo with three nodes, whose patches add each node to
    the base's one-node RBAC; its config is valid with the Deployment's pod-IP variable set."""
    docs = objects(rendering.render(DEPLOY / "examples" / "several-nodes"))
    assert_rbac_names_every_node(docs)
    monkeypatch.setenv("VKPROVIDER_NODE__INTERNAL_IP", "10.1.2.3")  # what the Deployment sets
    mounted = tmp_path / "config.yaml"
    mounted.write_text(yaml.safe_dump(service_config(docs)))
    settings = load_settings(mounted, checks=StartupChecks(ports=False, kube=False))
    nodes = settings.node_list()
    assert [n.name for n in nodes] == ["vk-external", "vk-cheap", "vk-premium"]
    assert {n.internal_ip for n in nodes} == {"10.1.2.3"}
    assert settings.leader_election.replicas == one(docs, "Deployment", "vkprovider")["spec"]["replicas"]
    policy = one(docs, "NetworkPolicy", "vkprovider-kubelet-api")
    assert sorted(p["port"] for p in policy["spec"]["ingress"][0]["ports"]) == [n.kubelet_port for n in nodes]


@pytest.mark.parametrize("target", list(TARGETS))
def test_every_binding_names_the_service_account(target: str, rendered: dict[str, Any]) -> None:
    docs = rendered[target]
    namespace, name = rendering.SERVICE_ACCOUNT
    one(docs, "ServiceAccount", name)
    bindings = list(find(docs, "ClusterRoleBinding")) + list(find(docs, "RoleBinding"))
    # The base binds 4 roles (the service's, the admin API's, the two Leases'); an overlay also
    # its served namespace and the kubelet-csr component's role.
    assert len(bindings) == (4 if target == "base" else 6)
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]


def test_no_rule_grants_wildcards_or_pod_creation(rendered: dict[str, Any]) -> None:
    docs = rendered["base"]
    for doc in list(find(docs, "ClusterRole")) + list(find(docs, "Role")):
        for rule in doc["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], doc["metadata"]["name"]
            if "pods" in rule["resources"]:
                assert not {"create", "update"} & set(rule["verbs"])
            if {"secrets", "configmaps"} & set(rule["resources"]):
                assert rule["verbs"] == ["get"], "env resolution reads by name: no list/watch"


@pytest.mark.parametrize("target", list(TARGETS))
def test_the_deployment_is_locked_down(target: str, rendered: dict[str, Any]) -> None:
    docs = rendered[target]
    deployment = one(docs, "Deployment", "vkprovider")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "vkprovider"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    config = service_config(docs)
    assert ports == {"kubelet": config["node"]["kubelet_port"], "admin": config["http"]["admin_port"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    drain = config["pods"]["drain_timeout_seconds"]
    assert drain < pod["terminationGracePeriodSeconds"], "SIGKILL must not cut the drain short"
    (env_from,) = container["envFrom"]
    assert env_from == {"secretRef": {"name": "vkprovider-provider-keys", "optional": True}}
    assert not list(find(docs, "Secret")), "provider keys are never part of the manifests"
    pdb = one(docs, "PodDisruptionBudget", "vkprovider")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    service = one(docs, "Service", "vkprovider")
    assert {p["port"] for p in service["spec"]["ports"]} == {10250, 10255}
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]


def test_the_runpod_key_names_its_secret(rendered: dict[str, Any]) -> None:
    (provider,) = service_config(rendered["runpod"])["providers"]
    settings = provider["settings"]
    assert settings["api_key_env"] == "RUNPOD_API_KEY"
    assert "vkprovider-system/vkprovider-provider-keys" in settings["api_key_secret"]


def test_the_demo_clouds_are_the_examples(rendered: dict[str, Any]) -> None:
    for name in ("fakecloud-cheap", "fakecloud-premium"):
        cm = next(d for d in find(rendered["demo"], "ConfigMap") if d["metadata"]["name"].startswith(name))
        example = (DEPLOY / "examples" / f"{name}.yaml").read_text()
        assert cm["data"]["config.yaml"] == example, f"deploy/overlays/demo/{name}.yaml drifted"
    urls = [p["settings"]["url"] for p in service_config(rendered["demo"])["providers"]]
    services = {d["metadata"]["name"] for d in find(rendered["demo"], "Service")}
    for url in urls:
        host = re.match(r"http://([^.]+)\.vkprovider-system\.svc:8080$", url)
        assert host and host.group(1) in services


def test_the_dockerfile_is_pinned_non_root_and_serves() -> None:
    text = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", base.group(1))
    assert text.count("FROM ${PYTHON_IMAGE}") == 2  # multi-stage, both from the pinned base
    assert re.search(r"^USER 10001:10001$", text, re.M)
    assert 'ENTRYPOINT ["vkprovider"]' in text and 'CMD ["serve"' in text
    installs = re.findall(r"/opt/vkprovider/bin/pip install ([^&\n]*)", text)
    assert installs == [
        "--no-compile --require-hashes --no-deps -r requirements-image.lock",
        "--no-compile --no-deps --no-build-isolation --no-index . \\",
    ], "every dependency by hash; the project alone, offline"
    # one hash-based compile of everything: no file time in the layers' bytecode
    assert "compileall -q -f --invalidation-mode unchecked-hash /opt/vkprovider/lib" in text
    assert text.count("ARG SOURCE_DATE_EPOCH") == 2  # both stages: useradd's day, setuptools' wheel
    assert "verify-runtime.py requirements-image.lock" in text
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert "!requirements-image.lock" in ignored and "!requirements.lock" not in ignored
    deployment = yaml.safe_load((DEPLOY / "base" / "deployment.yaml").read_text())
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 10001


def load_verify_runtime() -> Any:
    spec = importlib.util.spec_from_file_location("verify_runtime", DEPLOY / "image" / "verify-runtime.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("lock", ["requirements.lock", "requirements-image.lock"])
def test_verify_runtime_reads_every_pin_of_the_lock(lock: str) -> None:
    verify = load_verify_runtime()
    pins = verify.locked(str(ROOT / lock))
    lock_lines = [line for line in (ROOT / lock).read_text().splitlines() if "==" in line]
    assert len(pins) == len(lock_lines)
    assert pins["kubernetes-asyncio"] and pins["pydantic"]
    assert all(re.fullmatch(r"[0-9][0-9a-z.+-]*", version) for version in pins.values())


def test_verify_runtime_fails_on_a_package_missing_from_the_lock(tmp_path: Path) -> None:
    verify = load_verify_runtime()
    lock = tmp_path / "lock.txt"
    full = (ROOT / "requirements.lock").read_text()
    lock.write_text("\n".join(line for line in full.splitlines() if not line.startswith("pyyaml==")))
    assert verify.main(str(ROOT / "requirements.lock")) == 0  # this venv: all pinned
    assert verify.main(str(lock)) == 1


#: (verb, group, resource) the base grants in every namespace (ClusterRoles bound cluster-wide):
#: each is in the RBAC table of docs/deploy.md with its reason. A new cluster-wide right is a
#: deliberate change of this set, and of the table.
BASE_CLUSTER_WIDE = {
    ("get", "", "pods"),
    ("list", "", "pods"),
    ("watch", "", "pods"),
    ("delete", "", "pods"),
    ("patch", "", "pods/status"),
    ("list", "", "services"),
    ("watch", "", "services"),
    ("create", "", "events"),
    ("patch", "", "events"),
    ("create", "", "nodes"),
    ("create", "authentication.k8s.io", "tokenreviews"),
    ("create", "authorization.k8s.io", "subjectaccessreviews"),
    # external replicas as Service endpoints (issue 25): only slices labelled as ours are written
    ("list", "discovery.k8s.io", "endpointslices"),
    ("watch", "discovery.k8s.io", "endpointslices"),
    ("create", "discovery.k8s.io", "endpointslices"),
    ("update", "discovery.k8s.io", "endpointslices"),
    ("delete", "discovery.k8s.io", "endpointslices"),
}

#: deploy/components/kubelet-csr: create the serving CSR, read it back until it is issued.
CSR_RIGHTS = {
    ("create", "certificates.k8s.io", "certificatesigningrequests"),
    ("get", "certificates.k8s.io", "certificatesigningrequests"),
}


def cluster_wide_rules(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[str]]:
    """(verb, group, resource) -> resourceNames ([] = any) of every ClusterRole a
    ClusterRoleBinding binds, i.e. what holds in every namespace (or on cluster objects)."""
    bound = {b["roleRef"]["name"] for b in find(docs, "ClusterRoleBinding")}
    found: dict[tuple[str, str, str], list[str]] = {}
    for role in find(docs, "ClusterRole"):
        if role["metadata"]["name"] not in bound:
            continue
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        found.setdefault((verb, group, resource), []).extend(rule.get("resourceNames") or [])
    return found


@pytest.mark.parametrize("target", list(TARGETS))
def test_cluster_wide_rights_are_the_justified_ones(target: str, rendered: dict[str, Any]) -> None:
    """Secrets, ConfigMaps, pod patches, other nodes, the node list: none cluster-wide. CSRs only
    where the config asks for its kubelet serving certificate with one (every shipped overlay)."""
    rules = cluster_wide_rules(rendered[target])
    unnamed = {rule for rule, names in rules.items() if not names}
    csr = (service_config(rendered[target]).get("kubelet") or {}).get("csr") and target != "base"
    assert unnamed == BASE_CLUSTER_WIDE | (CSR_RIGHTS if csr else set())
    node = service_config(rendered[target])["node"]["name"]
    named = {rule: names for rule, names in rules.items() if names}
    assert named == {
        ("get", "", "nodes"): [node],
        ("patch", "", "nodes"): [node],
        ("patch", "", "nodes/status"): [node],
        ("get", "", "nodes/proxy"): [node],  # the admin API, with the pod's own token
        ("create", "", "nodes/proxy"): [node],
    }


@pytest.mark.parametrize("target", list(TARGETS))
def test_secrets_are_read_only_in_the_served_namespaces(target: str, rendered: dict[str, Any]) -> None:
    docs = rendered[target]
    role = one(docs, "ClusterRole", "vkprovider-namespace")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]},
    ]
    bindings = [
        b
        for b in list(find(docs, "ClusterRoleBinding")) + list(find(docs, "RoleBinding"))
        if b["roleRef"]["name"] == "vkprovider-namespace"
    ]
    assert all(b["kind"] == "RoleBinding" and b["roleRef"]["kind"] == "ClusterRole" for b in bindings)
    served = {b["metadata"]["namespace"] for b in bindings}
    assert served == {"base": set(), "demo": {"default"}, "runpod": {"inference"}}[target]


def test_cluster_wide_env_is_an_opt_in_component(tmp_path: Path) -> None:
    component = DEPLOY / "components" / "cluster-wide-env"
    (tmp_path / "kustomization.yaml").write_text(rendering.with_component(component, tmp_path))
    docs = objects(rendering.render(tmp_path))
    rules = cluster_wide_rules(docs)
    assert {rule for rule, names in rules.items() if not names} - BASE_CLUSTER_WIDE == {
        ("get", "", "configmaps"),
        ("get", "", "secrets"),
        ("patch", "", "pods"),
    }
    assert not {("list", "", "secrets"), ("watch", "", "secrets")} & set(rules)


@pytest.mark.parametrize(
    ("component", "granted"),
    [
        (
            "gate-kube-signal",
            {
                ("list", "", "nodes"),
                ("watch", "", "nodes"),
                ("get", "apps", "replicasets"),
                ("get", "apps", "statefulsets"),
                ("list", "policy", "poddisruptionbudgets"),
                *(
                    (verb, "kueue.x-k8s.io", resource)
                    for verb in ("list", "watch")
                    for resource in ("workloads", "clusterqueues", "localqueues")
                ),
            },
        ),
        ("kubelet-csr", CSR_RIGHTS),
    ],
)
def test_feature_components_add_only_their_rights(
    component: str, granted: set[tuple[str, str, str]], tmp_path: Path
) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        rendering.with_component(DEPLOY / "components" / component, tmp_path)
    )
    rules = cluster_wide_rules(objects(rendering.render(tmp_path)))
    assert {rule for rule, names in rules.items() if not names} - BASE_CLUSTER_WIDE == granted


def network_policies(docs: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """port -> the peers allowed to reach it on the service's pods (one rule per port)."""
    deployment = one(docs, "Deployment", "vkprovider")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    peers: dict[int, list[dict[str, Any]]] = {}
    for policy in find(docs, "NetworkPolicy"):
        spec = policy["spec"]
        assert policy["metadata"]["namespace"] == deployment["metadata"]["namespace"]
        assert spec["policyTypes"] == ["Ingress"]
        selector = spec["podSelector"]["matchLabels"]
        assert selector.items() <= labels.items(), "the policy must select the service's pods"
        for rule in spec["ingress"]:
            assert rule.get("from"), "a rule without peers admits everyone"
            assert rule.get("ports"), "a rule without ports opens every port"
            for port in rule["ports"]:
                assert port["protocol"] == "TCP"
                peers.setdefault(port["port"], []).extend(rule["from"])
    return peers


@pytest.mark.parametrize("target", list(TARGETS))
def test_network_policy_admits_only_the_apiserver_and_monitoring(
    target: str, rendered: dict[str, Any]
) -> None:
    docs = rendered[target]
    config = service_config(docs)
    peers = network_policies(docs)
    assert set(peers) == {config["node"]["kubelet_port"], config["http"]["admin_port"]}
    kubelet = peers[config["node"]["kubelet_port"]]
    assert [p for p in kubelet if "ipBlock" in p] == [{"ipBlock": {"cidr": "192.0.2.0/24"}}]  # to adapt
    assert [p for p in kubelet if "ipBlock" not in p] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "metrics-server"}},
        }
    ]
    assert peers[config["http"]["admin_port"]] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]


def test_the_kueue_quota_component_grants_only_clusterqueues_and_the_node_list(tmp_path: Path) -> None:
    component = DEPLOY / "components" / "kueue-quota"
    (tmp_path / "kustomization.yaml").write_text(rendering.with_component(component, tmp_path))
    docs = objects(rendering.render(tmp_path))
    (role,) = list(find(docs, "ClusterRole", "vkprovider-kueue-quota"))
    assert role["rules"] == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["clusterqueues"],
            "verbs": ["get", "list", "watch", "patch"],
        },
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},  # the node informer
    ]
    (binding,) = list(find(docs, "ClusterRoleBinding", "vkprovider-kueue-quota"))
    (subject,) = binding["subjects"]
    (account,) = list(find(docs, "ServiceAccount"))
    assert (subject["name"], subject["namespace"]) == (
        account["metadata"]["name"],
        account["metadata"]["namespace"],
    )
    base = objects(rendering.render("base"))
    assert not [d for d in base if "kueue" in str(d.get("rules", ""))]  # the base grants none


POLICY = DEPLOY / "descheduler" / "policy.yaml"
#: what upstream's example policy (kubernetes/base/configmap.yaml) runs; never ours
UPSTREAM_EXAMPLE = ("LowNodeUtilization", "RemoveDuplicates", "RemovePodsViolatingInterPodAntiAffinity")


def descheduler_policy(docs: list[dict[str, Any]]) -> tuple[str, str]:
    """(ConfigMap name, policy text) the Descheduler's Deployment mounts at /policy-dir."""
    deployment = one(docs, "Deployment", "descheduler")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args = container["args"]
    assert args[args.index("--policy-config-file") + 1] == "/policy-dir/policy.yaml"
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/policy-dir"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    name = volume["configMap"]["name"]
    return name, one(docs, "ConfigMap", name)["data"]["policy.yaml"]


def test_the_descheduler_overlay_is_upstreams_at_the_pinned_version() -> None:
    from vkprovider.devcluster.build import DESCHEDULER_VERSION

    assert rendering.UPSTREAM_DESCHEDULER.endswith(f"?ref={DESCHEDULER_VERSION}")
    text = (DEPLOY / "descheduler" / "kustomization.yaml").read_text()
    assert f"  - {rendering.UPSTREAM_DESCHEDULER}\n" in text  # what users fetch
    assert not list((DEPLOY / "descheduler").glob("*deployment*"))  # nothing of upstream copied in
    docs = objects(rendering.render("descheduler"))
    (deployment,) = find(docs, "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"registry.k8s.io/descheduler/descheduler:{DESCHEDULER_VERSION}"
    assert {
        d["metadata"].get("namespace") for d in docs if d["kind"] not in ("ClusterRole", "ClusterRoleBinding")
    } == {"kube-system"}


def test_the_descheduler_runs_our_policy_and_upstreams_example_never_reaches_the_cluster() -> None:
    text = rendering.render("descheduler")
    docs = objects(text)
    name, policy = descheduler_policy(docs)
    assert policy == POLICY.read_text()
    assert name.startswith("descheduler-policy-")  # a content hash: see the next test
    assert [d["metadata"]["name"] for d in find(docs, "ConfigMap")] == [name]
    assert not [word for word in UPSTREAM_EXAMPLE if word in text]
    enabled = [
        plugin
        for profile in yaml.safe_load(policy)["profiles"]
        for point in (profile.get("plugins") or {}).values()
        for plugin in point.get("enabled") or []
    ]
    assert enabled and not set(enabled) & set(UPSTREAM_EXAMPLE)
    assert not list(find(docs, "Role")) and not list(find(docs, "RoleBinding"))  # no Secret reads
    args = one(docs, "Deployment", "descheduler")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--descheduling-interval") + 1] == "2m"


def test_an_edited_policy_rolls_the_descheduler(tmp_path: Path) -> None:
    """The Deployment mounts the policy by a name with its content hash: a new policy is a new
    pod template, so applying it rolls the Descheduler (which reads the policy only at start)."""
    copy = shutil.copytree(DEPLOY / "descheduler", tmp_path / "descheduler")
    edited = POLICY.read_text().replace("maxNoOfPodsToEvictTotal:", "maxNoOfPodsToEvictTotal: 3 #", 1)
    assert edited != POLICY.read_text()
    (copy / "policy.yaml").write_text(edited)
    before = descheduler_policy(objects(rendering.render("descheduler")))
    after = descheduler_policy(
        objects(rendering.render(rendering.with_local_upstream(copy, tmp_path / "built")))
    )
    assert after[1] == edited
    assert after[0] != before[0]


def test_the_descheduler_overlay_refuses_an_upstream_it_does_not_expect(tmp_path: Path) -> None:
    """Each patch tests upstream's value first: an upstream whose Deployment differs fails the
    build (here: another interval) instead of being patched blindly."""
    copy = shutil.copytree(DEPLOY / "descheduler", tmp_path / "descheduler")
    text = (copy / "kustomization.yaml").read_text()
    (copy / "kustomization.yaml").write_text(text.replace('"5m"', '"10m"'))
    with pytest.raises(RuntimeError, match="testing value"):
        rendering.render(rendering.with_local_upstream(copy, tmp_path / "built"))
