"""The manifests under deploy/ on a real apiserver, and the RBAC they grant proven both ways.

One control plane for the module, started with an audit log of the base's ServiceAccount:

* ``kubectl apply -k`` of the base and every overlay, server-side, dry-run then real;
* **sufficient**: two ``vkprovider serve`` processes authenticated as that ServiceAccount (a
  TokenRequest token in a kubeconfig), with the rendered ConfigMap's config, run a pod of a
  served namespace (bound like an overlay's served-namespaces.yaml) through create → Running →
  delete, keep a pod with a missing Secret Pending, keep a pod of a namespace the node does not
  serve Pending with a named error (its Secret read refused), hand leadership over, report a
  provider whose key Secret is missing (naming the Secret) and open the circuit breaker when
  every provider is gone;
* **minimal**: afterwards every (verb, resource) the ClusterRoles and Roles grant appears in the
  audit log, except the rules in ``KEPT_ANYWAY`` (each with its reason);
* ``kubectl auth can-i`` as the ServiceAccount: no pod creation, no Secret list/watch, no
  Secret read outside the served namespaces, no other node's object or heartbeat Lease.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pydantic import ValidationError

from tests.support import bound_gpu_pod, eventually
from tests.unit.deploy import rendering
from vkprovider.config import Settings
from vkprovider.devcluster import Cluster, kwok
from vkprovider.devcluster.audit import Access, accesses, granted_rules, read_events, unused_rules
from vkprovider.devcluster.process import free_port
from vkprovider.kube.client import KubeClient
from vkprovider.placement.health import TAINT_UNAVAILABLE
from vkprovider.sim.local import cloud_config, fakecloud_module

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
NAMESPACE, ACCOUNT = rendering.SERVICE_ACCOUNT
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
NODE = "vk-external"
KEY_SECRET = "vkprovider-system/vkprovider-provider-keys"

#: Granted (verb, group, resource) that this run need not exercise, and why they stay.
KEPT_ANYWAY: dict[tuple[str, str, str], str] = {
    ("get", "apps", "replicasets"): "the gate's return wave reads the owner of a ReplicaSet replica on "
    "the virtual node; this run's pods are bare (tests/integration/test_return_matrix.py uses it)",
    ("get", "apps", "statefulsets"): "the same for a StatefulSet replica",
    ("list", "policy", "poddisruptionbudgets"): "the return wave marks only replicas a PDB covers; "
    "read for the namespaces of owned replicas on the virtual node, none in this run",
    **{
        (verb, "kueue.x-k8s.io", resource): "the return wave follows Kueue's Workloads and queues (pending "
        "gangs admitted next) only when Kueue's API is served; this run's cluster has no Kueue"
        for verb in ("list", "watch")
        for resource in ("workloads", "clusterqueues", "localqueues")
    },
    ("get", "", "pods"): "re-read of a pod after a 409 on its status write (only under a race)",
    ("patch", "", "pods"): "placement annotations ride the status patch; a metadata patch of their own "
    "only when no status write follows the create (e.g. the provider's API went away right after)",
    ("create", "authentication.k8s.io", "tokenreviews"): "kubelet API / admin API authentication",
    ("create", "authorization.k8s.io", "subjectaccessreviews"): "kubelet API / admin API authorization",
    # EndpointSlices are written only once a Service selects an external replica (issue 25).
    ("create", "discovery.k8s.io", "endpointslices"): "publish an external replica a Service selects",
    ("update", "discovery.k8s.io", "endpointslices"): "an endpoint's readiness or route changes",
    ("delete", "discovery.k8s.io", "endpointslices"): "the last replica of a slice goes away",
    ("get", "", "nodes/proxy"): "the admin API's /state for `kubectl exec <leader> -- vkprovider status`: "
    "checked by the service's own SubjectAccessReview, never a request of the service to the apiserver",
    ("create", "", "nodes/proxy"): "the admin API's POST /explain, likewise",
}
#: The served namespaces' role (deploy/base/clusterrole.yaml), bound per namespace by overlays.
NAMESPACE_ROLE = "vkprovider-namespace"


def gate_section() -> JSON | None:
    """The gate with its kube signal on the kwok GPU pool, if this build has the gate (it is
    opt-in in the config); None otherwise, and then its rules are kept without being used."""
    if "gate" not in Settings.model_fields:
        return None
    section: JSON = {"signal": {"kind": "kube", "kube": {"node_selector": kwok.GPU_POOL_SELECTOR}}}
    try:
        Settings.model_validate({"gate": section})
    except ValidationError:
        return None
    return section


def served_kustomization(directory: Path) -> Path:
    """The base plus the components this run's config needs (the gate's kube signal, when this
    build has the gate; the kubelet serving CSR, which the shipped overlays ask for): what an
    operator applies for the same config."""
    components = [rendering.DEPLOY / "components" / "gate-kube-signal"] if gate_section() is not None else []
    if (rendering.service_config(rendering.objects(rendering.render("demo"))).get("kubelet") or {}).get(
        "csr"
    ):
        components.append(rendering.DEPLOY / "components" / "kubelet-csr")
    directory.mkdir(exist_ok=True)
    (directory / "kustomization.yaml").write_text(rendering.with_components(directory, *components))
    return directory


def served_namespace_binding(namespace: str) -> JSON:
    """An overlay's RoleBinding of the namespace role (deploy/overlays/runpod), for ``namespace``."""
    docs = rendering.objects(rendering.render("runpod"))
    (binding,) = [b for b in rendering.find(docs, "RoleBinding") if b["roleRef"]["name"] == NAMESPACE_ROLE]
    return {**binding, "metadata": {**binding["metadata"], "namespace": namespace}}


def kubectl(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = rendering.kubectl()
    assert binary is not None
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    done = subprocess.run([binary, *args], capture_output=True, text=True, env=env, timeout=120, check=False)
    if check:
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done


@pytest.fixture(scope="module")
async def audited() -> AsyncIterator[Cluster]:
    started = await Cluster.start(f"deploy-{os.getpid()}", gpu_nodes=1, audit_users=(USER,))
    try:
        yield started
    finally:
        await started.stop(remove=not os.environ.get("VKPROVIDER_TEST_KEEP_CLUSTER"))


@pytest.fixture(scope="module")
async def applied(audited: Cluster) -> Cluster:
    """Every target applied server-side (dry-run first), the base last: it is what runs.

    A server-side dry-run cannot create the namespace the other objects go into, so the
    Namespace is applied first (docs/deploy.md says the same)."""
    kubectl(audited, "apply", "--server-side", "-f", str(rendering.TARGETS["base"] / "namespace.yaml"))
    kubectl(audited, "create", "namespace", "inference")  # the runpod overlay serves it
    for target in ("demo", "runpod", "base"):
        directory = str(rendering.TARGETS[target])
        dry = kubectl(audited, "apply", "--server-side", "--dry-run=server", "-k", directory)
        assert "serverside-applied (server dry run)" in dry.stdout
        real = kubectl(audited, "apply", "--server-side", "-k", directory)
        assert "deployment.apps/vkprovider serverside-applied" in real.stdout
    return audited


async def test_every_target_applies_server_side(applied: Cluster) -> None:
    docs = rendering.objects(rendering.render("base"))
    for doc in docs:
        namespace = doc["metadata"].get("namespace")
        where = ["-n", namespace] if namespace else []
        kubectl(applied, "get", doc["kind"].lower(), doc["metadata"]["name"], *where)
    got = kubectl(applied, "-n", NAMESPACE, "get", "deployment", "vkprovider", "-o", "yaml")
    assert yaml.safe_load(got.stdout)["spec"]["replicas"] == 2


async def test_can_i_as_the_service_account(applied: Cluster) -> None:
    def can(*args: str) -> bool:
        done = kubectl(applied, "auth", "can-i", f"--as={USER}", *args, check=False)
        return done.stdout.strip() == "yes"

    assert not can("create", "pods", "-n", "default")
    assert not can("create", "pods", "--all-namespaces")
    assert not can("update", "pods", "-n", "default")
    assert not can("list", "secrets", "--all-namespaces")
    assert not can("watch", "secrets", "-n", "default")
    assert not can("list", "configmaps", "-n", "default")
    # Env resolution: by name, only in the served namespaces (the overlays bind default, inference).
    assert can("get", "secrets", "-n", "inference") and can("get", "configmaps", "-n", "default")
    assert not can("get", "secrets", "-n", "kube-system")
    assert not can("get", "secrets", "-n", NAMESPACE)  # not even its own: the keys come by envFrom
    assert not can("get", "configmaps", "-n", "kube-public")
    assert can("patch", "pods", "-n", "inference") and not can("patch", "pods", "-n", "kube-system")
    assert can("patch", "pods", "--subresource=status", "-n", "kube-system")  # status anywhere
    assert not can("list", "nodes")  # the gate's component
    # The shipped overlays add deploy/components/kubelet-csr: create and read back its CSR, never
    # approve or sign one.
    assert can("create", "certificatesigningrequests") and not can(
        "update", "certificatesigningrequests/approval"
    )
    assert not can("patch", f"nodes/{applied.gpu_nodes[0]}")
    assert can("patch", f"nodes/{NODE}")
    assert not can("delete", f"nodes/{NODE}")
    assert not can("update", f"leases/{applied.gpu_nodes[0]}", "-n", "kube-node-lease")
    assert can("update", f"leases/{NODE}", "-n", "kube-node-lease")
    assert not can("update", "leases/kube-scheduler", "-n", "kube-system")
    assert not can("create", "serviceaccounts", "--subresource=token", "-n", NAMESPACE)
    assert can("patch", f"nodes/{NODE}", "--subresource=status")
    assert not can("patch", f"nodes/{applied.gpu_nodes[0]}", "--subresource=status")


# ---------------------------------------------------------------- running as the ServiceAccount


async def service_account_kubeconfig(cluster: Cluster, path: Path) -> Path:
    """A kubeconfig holding a TokenRequest token of the base's ServiceAccount."""
    async with cluster.http() as client:
        response = await client.post(
            f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{ACCOUNT}/token",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
    response.raise_for_status()
    token = response.json()["status"]["token"]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": cluster.server, "certificate-authority": str(cluster.ca_cert)},
                    }
                ],
                "users": [{"name": ACCOUNT, "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": ACCOUNT}}],
                "current-context": "c",
            }
        )
    )
    return path


def deployed_config(path: Path, cloud_url: str) -> Path:
    """The demo overlay's rendered config with its cloud at ``cloud_url``, plus the runpod
    overlay's provider, whose key Secret does not exist (its URL is a closed local port; the
    missing key stops it before any request)."""
    config = rendering.service_config(rendering.objects(rendering.render("demo")))
    (cheap, _premium) = config["providers"]
    cheap["settings"]["url"] = cloud_url
    (runpod,) = rendering.service_config(rendering.objects(rendering.render("runpod")))["providers"]
    runpod["settings"]["base_url"] = "http://127.0.0.1:9"
    config["providers"] = [cheap, runpod]
    gate = gate_section()
    if gate is not None:
        config["gate"] = gate
    if "kubelet" in config:  # the CSR is posted (its rights used), never approved here
        config["kubelet"]["cert_dir"] = str(path.parent / "kubelet")
        config["node"]["kubelet_port"] = free_port()
    path.write_text(yaml.safe_dump(config))
    return path


class Replica:
    def __init__(self, name: str, config: Path, kubeconfig: Path, log: Path) -> None:
        self.name, self.admin_port, self.log = name, free_port(), log
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VKPROVIDER_", "RUNPOD_"))}
        env.update(
            VKPROVIDER_KUBE__KUBECONFIG=str(kubeconfig),
            VKPROVIDER_HTTP__ADMIN_HOST="127.0.0.1",
            VKPROVIDER_HTTP__ADMIN_PORT=str(self.admin_port),
            VKPROVIDER_LEADER_ELECTION__IDENTITY=name,
            VKPROVIDER_NODE__INTERNAL_IP="127.0.0.1",
            VKPROVIDER_NODE__PROBE_SECONDS="1",
            VKPROVIDER_NODE__STATUS_UPDATE_SECONDS="2",
            VKPROVIDER_PODS__STATUS_POLL_SECONDS="0.5",
            VKPROVIDER_PODS__BACKOFF_MAX_SECONDS="2",
            VKPROVIDER_PODS__DRAIN_TIMEOUT_SECONDS="2",
            VKPROVIDER_PLACEMENT__BREAKER_SECONDS="3",
        )
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "vkprovider", "serve", "--config", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )

    async def role(self) -> str | None:
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                response = await client.get(f"http://127.0.0.1:{self.admin_port}/readyz")
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        role = response.json().get("role")
        return str(role) if role else "leader"

    async def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(asyncio.to_thread(self.proc.wait), 60)


async def test_serve_as_the_service_account_then_the_audit_log_shows_every_rule(
    applied: Cluster, tmp_path: Path
) -> None:
    server = fakecloud_module("server").FakeCloudServer(cloud_config("fakecloud-cheap", 1.0))
    await server.start()
    server_up = True
    kubeconfig = await service_account_kubeconfig(applied, tmp_path / "sa-kubeconfig")
    config = deployed_config(tmp_path / "config.yaml", server.url)
    admin = await KubeClient.connect(str(applied.kubeconfig))
    ns, other = f"t-{uuid.uuid4().hex[:8]}", f"u-{uuid.uuid4().hex[:8]}"
    replicas: dict[str, Replica] = {}
    kubectl(applied, "apply", "--server-side", "-k", str(served_kustomization(tmp_path / "served")))
    try:
        for name in (ns, other):  # other: a namespace the node does not serve
            await admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
        await admin.request(
            "POST",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            body=served_namespace_binding(ns),
        )
        await admin.request(
            "POST",
            f"/api/v1/namespaces/{ns}/configmaps",
            body={"metadata": {"name": "model"}, "data": {"name": "llama"}},
        )
        for name in ("a", "b"):
            replicas[name] = Replica(name, config, kubeconfig, tmp_path / f"serve-{name}.log")

        async def roles() -> dict[str, str] | None:
            seen = {name: await r.role() for name, r in replicas.items()}
            ok = sorted(v for v in seen.values() if v) == ["leader", "standby"]
            return {v: k for k, v in seen.items() if v} if ok else None

        leader = (await eventually(roles, timeout=120))["leader"]

        async def node_condition() -> JSON | None:
            node = await admin.request("GET", f"/api/v1/nodes/{NODE}")
            for cond in node["status"].get("conditions") or []:
                if cond["type"] == "ProvidersReachable" and "runpod-secure" in cond["message"]:
                    return dict(cond)
            return None

        cond = await eventually(node_condition, timeout=60)
        assert cond["status"] == "False" and cond["reason"] == "ProviderUnreachable"
        assert "RUNPOD_API_KEY is unset" in cond["message"] and KEY_SECRET in cond["message"]

        pods = f"/api/v1/namespaces/{ns}/pods"
        model = {"name": "MODEL", "valueFrom": {"configMapKeyRef": {"name": "model", "key": "name"}}}
        token = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
        await admin.request("POST", pods, body=bound_gpu_pod("served", NODE, env=[model]))
        await admin.request("POST", pods, body=bound_gpu_pod("needs-secret", NODE, env=[token]))
        await admin.request(
            "POST", f"/api/v1/namespaces/{other}/pods", body=bound_gpu_pod("not-served", NODE, env=[token])
        )

        async def phase(name: str, wanted: str) -> JSON | None:
            pod = await admin.request("GET", f"{pods}/{name}")
            return dict(pod) if pod["status"].get("phase") == wanted else None

        served = await eventually(lambda: phase("served", "Running"), timeout=90)
        assert "fakecloud-cheap" in str(served["metadata"].get("annotations"))

        async def waiting_for_secret() -> bool:
            events = await admin.request(
                "GET",
                f"/api/v1/namespaces/{ns}/events",
                query={"fieldSelector": "reason=MandatorySecretNotFound"},
            )
            counts = [int(e.get("count") or 1) for e in events["items"]]
            return bool(counts) and max(counts) >= 2  # a repeat: the Event was patched

        await eventually(waiting_for_secret, timeout=90)
        pending = await admin.request("GET", f"{pods}/needs-secret")
        assert pending["status"]["phase"] == "Pending"

        async def refused() -> JSON | None:
            events = await admin.request(
                "GET",
                f"/api/v1/namespaces/{other}/events",
                query={"fieldSelector": "reason=SecretReadForbidden,involvedObject.name=not-served"},
            )
            return dict(events["items"][0]) if events["items"] else None

        event = await eventually(refused, timeout=90)
        assert event["type"] == "Warning"
        assert '"hf-token"' in event["message"] and f"does not serve namespace {other}" in event["message"]
        not_served = await admin.request("GET", f"/api/v1/namespaces/{other}/pods/not-served")
        assert not_served["status"]["phase"] == "Pending"
        (waiting,) = [c["state"]["waiting"] for c in not_served["status"]["containerStatuses"]]
        assert waiting["reason"] == "CreateContainerConfigError" and other in waiting["message"]

        assert await replicas[leader].stop() == 0  # SIGTERM: drain, release the Lease
        standby = next(n for n in replicas if n != leader)

        async def took_over() -> bool:
            return await replicas[standby].role() == "leader"

        await eventually(took_over, timeout=90)
        secret = {"metadata": {"name": "hf-token"}, "data": {"token": base64.b64encode(b"t").decode()}}
        await admin.request("POST", f"/api/v1/namespaces/{ns}/secrets", body=secret)
        await eventually(lambda: phase("needs-secret", "Running"), timeout=90)
        assert len(server.store.deployments) == 2  # the new leader adopted, never redeployed

        await admin.request("DELETE", f"{pods}/served")

        async def gone() -> bool:
            listed = await admin.request("GET", pods)
            names = {p["metadata"]["name"] for p in listed["items"]}
            return "served" not in names and len(server.store.deployments) == 1

        await eventually(gone, timeout=90)

        await server.stop()  # every provider gone: the circuit breaker taints the node
        server_up = False

        async def breaker_open() -> bool:
            node = await admin.request("GET", f"/api/v1/nodes/{NODE}")
            return any(t["key"] == TAINT_UNAVAILABLE for t in node["spec"].get("taints") or [])

        await eventually(breaker_open, timeout=90)
    finally:
        for replica in replicas.values():
            await replica.stop()
        if server_up:
            await server.stop()
        for name in (ns, other):
            await admin.request("DELETE", f"/api/v1/namespaces/{name}")
        await admin.close()
        # The component's binding goes with the run (kubectl apply does not prune): the other
        # tests of this module see the base and the overlays only.
        kubectl(applied, "delete", "clusterrolebinding", "vkprovider-gate-kube-signal", "--ignore-not-found")

    assert_every_rule_used(applied, tmp_path / "served", refused_in=other)


def assert_every_rule_used(cluster: Cluster, served: Path, *, refused_in: str) -> None:
    """Every rule of the ``served`` kustomization was used, and the only refusals were the reads
    of the pod in the namespace not served (``refused_in``)."""
    assert cluster.audit_log is not None
    events = read_events(cluster.audit_log)
    denied = accesses(events, USER, decision="forbid")
    expected = {a for a in denied if (a.verb, a.resource, a.namespace) == ("get", "secrets", refused_in)}
    assert expected, "the read in the namespace not served was never refused"
    assert not denied - expected, f"the service was refused (RBAC insufficient): {sorted(denied - expected)}"
    used: set[Access] = accesses(events, USER)
    rules = granted_rules(rendering.objects(rendering.render(served)))
    kept = KEPT_ANYWAY
    unused = sorted(rule for rule in unused_rules(rules, used) if rule[:3] not in kept)
    assert not unused, (
        f"granted but never used (drop them, or keep them in KEPT_ANYWAY with a reason): {unused}"
    )
    assert not set(kept) - {r[:3] for r in rules}, "KEPT_ANYWAY names a rule no longer granted"
    print("\nRBAC rules the audit log showed in use (verb, group/resource, namespace):")
    for verb, group, resource, scope in sorted(rules):
        if (verb, group, resource) in kept:
            continue
        namespaces = sorted(
            {a.namespace or "-" for a in used if (a.verb, a.group, a.resource) == (verb, group, resource)}
            if scope == "*"
            else {scope}
        )
        print(f"  {verb:7} {group or 'core'}/{resource:22} {','.join(namespaces)}")
    for rule, why in sorted(kept.items()):
        print(f"  kept, not exercised here: {rule[0]} {rule[1] or 'core'}/{rule[2]}: {why}")


async def test_cluster_wide_env_is_opt_in(applied: Cluster, tmp_path: Path) -> None:
    """deploy/components/cluster-wide-env: Secrets/ConfigMaps readable in every namespace, and
    only while that component is applied."""

    def can_get_secrets(namespace: str) -> bool:
        done = kubectl(
            applied, "auth", "can-i", f"--as={USER}", "get", "secrets", "-n", namespace, check=False
        )
        return done.stdout.strip() == "yes"

    assert not can_get_secrets("kube-system")
    (tmp_path / "kustomization.yaml").write_text(
        rendering.with_component(rendering.DEPLOY / "components" / "cluster-wide-env", tmp_path)
    )
    try:
        kubectl(applied, "apply", "--server-side", "-k", str(tmp_path))
        assert can_get_secrets("kube-system") and can_get_secrets(NAMESPACE)
    finally:
        kubectl(applied, "delete", "clusterrolebinding", NAMESPACE_ROLE)  # apply does not prune
    assert not can_get_secrets("kube-system")
