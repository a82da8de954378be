"""The operator's path of docs/deploy.md and docs/operations.md, run as written (issue 29).

On a dev cluster with one real kubelet node and the image of ``make image`` (conftest.py), the
commands are taken from the docs' ``sh`` blocks (:mod:`tests.image.docs_shell`): editing a
command in the docs changes what runs here. In order: Install → ``vkprovider status`` with a
token of your own (operations.md, *Which replica*) → ``kubectl logs``/``top`` on a burst pod →
key rotation (the Secret, ``rollout restart``) → Upgrade (a new tag) → Uninstall, whose
``uninstall-check`` must refuse while the burst pod bills and pass after the drain.

The only changes to the documented commands are the :data:`SUBSTITUTIONS` and :data:`SKIPPED`
below, each with its reason. The fakeclouds' own admin API (``/admin/stats``, ``/admin/ledger``,
through the apiserver's Service proxy) is the truth that nothing was redeployed across the
restart and the upgrade, and that nothing bills after the uninstall. Every command and its
result is printed (``-s``) for the issue's closing note.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from cryptography import x509

from tests.image.docs_shell import DocShell, Substitution, block, commands, substitute
from tests.image.image_support import MARKS
from tests.image.real_node_support import (
    JSON,
    NAMESPACE,
    NODE,
    REPO,
    SERVED,
    VIRTUAL_NODE_PODS,
    fakecloud_admin,
    kubectl,
    kubectl_stdin,
    pods,
)
from tests.support import eventually
from tests.unit.deploy import rendering
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.kubelet_node import RealNode
from vkprovider.devcluster.process import free_port, log_tail

pytestmark = MARKS

CLOUDS = ("fakecloud-cheap", "fakecloud-premium")
BURST = "burst"  # a Deployment in the served namespace: drain needs a controller to evict
#: Commands not run, and why (matched by their start).
SKIPPED = {
    "make image-push": "no registry here: the image is imported into the node's containerd (conftest.py)",
    "kubectl apply --server-side -k deploy/descheduler": "fetches upstream from GitHub (not reachable here)",
}


def pin_fakeclouds() -> str:
    """The patches docs/deploy.md's Upgrade adds for the demo overlay (its fakeclouds pinned to
    the image they run: they keep their deployments in memory), for the heredoc of Install."""
    text = block("deploy.md", "## Upgrade", lang="yaml")
    items = text.split("\npatches:\n", 1)[1]
    return substitute(items, [Substitution("registry.example.com/vkprovider:0.1.0", IMAGE, "your image")])


IMAGE = "localhost/vkprovider:0.1.0"


def install_substitutions(host_ip: str) -> list[Substitution]:
    return [
        Substitution("  - ../runpod", "  - ../demo", "the demo overlay: its fakeclouds instead of a key"),
        Substitution(
            "newName: registry.example.com/vkprovider", "newName: localhost/vkprovider", "your image"
        ),
        Substitution(
            "        value: 10.0.0.10/32\nEOF",
            f"        value: {host_ip}/32\n{pin_fakeclouds()}EOF",
            "your apiserver's address (the node's veth); and the demo's fakeclouds pinned to their"
            " own tag, so an upgrade of the service does not restart them (docs/deploy.md, Upgrade)",
        ),
    ]


def token_substitutions(port: int, token: Path) -> list[Substitution]:
    return [
        Substitution("10255:10255 &", f"{port}:10255 &", "a free local port (other runs share this machine)"),
        Substitution("/tmp/vkprovider-token", str(token), "the test's own directory"),
        Substitution(
            "status --token-file", f"status --admin http://127.0.0.1:{port} --token-file", "that port"
        ),
    ]


@pytest.fixture(scope="module")
def shell(cluster: Cluster, node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocShell]:
    """A clone's working directory (``deploy/`` copied, so ``deploy/overlays/mine`` is written
    outside the repository; ``.venv`` of this checkout), ``KUBECONFIG`` and kubectl on ``PATH``."""
    work = tmp_path_factory.mktemp("clone")
    shutil.copytree(REPO / "deploy", work / "deploy")
    (work / ".venv").symlink_to(REPO / ".venv")
    kubectl_binary = rendering.kubectl()
    assert kubectl_binary is not None
    path = f"{Path(kubectl_binary).parent}:{os.environ['PATH']}"
    started = DocShell(cwd=work, env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": path})
    try:
        yield started
    finally:
        started.close()
        print("\nCommands run (docs/deploy.md, docs/operations.md):")
        for ran in started.ran:
            print(ran.summary())


def run_block(shell: DocShell, text: str, approve: bool = True) -> None:
    """Every command of a block in order; ``approve-csr`` is run again until the new pods'
    CSRs are all approved (a pod posts its CSR when it starts: possibly after the rollout)."""
    for command in commands(text):
        if any(command.startswith(prefix) for prefix in SKIPPED):
            continue
        if command.startswith(".venv/bin/vkprovider approve-csr") and approve:
            approve_until_issued(shell, command)
            continue
        shell.run(command)


def approve_until_issued(shell: DocShell, command: str) -> None:
    deadline = time.monotonic() + 180
    while True:
        done = shell.run(command, expect=None)
        ips = {p["status"].get("podIP") for p in running_service_pods(shell)}
        if done.returncode == 0 and ips and ips <= issued_ips(shell):
            return
        assert time.monotonic() < deadline, (
            f"{command}: not every pod's CSR approved:\n{done.stdout}{done.stderr}"
        )
        time.sleep(3)


def running_service_pods(shell: DocShell) -> list[JSON]:
    out = shell.run(f"kubectl -n {NAMESPACE} get pods -l {VIRTUAL_NODE_PODS} -o json").stdout
    return [p for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")]


def issued_ips(shell: DocShell) -> set[str]:
    """The pod IPs named (as SANs) in the node's issued CSRs."""
    out = shell.run(f"kubectl get csr -l vkprovider.io/node-name={NODE} -o json").stdout
    ips: set[str] = set()
    for csr in json.loads(out)["items"]:
        if not csr.get("status", {}).get("certificate"):
            continue
        request = x509.load_pem_x509_csr(base64.b64decode(csr["spec"]["request"]))
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        ips |= {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    return ips


def deploy_requests(cluster: Cluster) -> dict[str, int]:
    """``POST /v1/deployments`` per fakecloud, from its own request counts."""
    counts: dict[str, int] = {}
    for cloud in CLOUDS:
        requests = fakecloud_admin(cluster, cloud, "stats")["requests"]
        counts[cloud] = sum(
            n for route, n in requests.items() if route.startswith("POST") and "deployments" in route
        )
    return counts


def request_count(cluster: Cluster, cloud: str) -> int:
    """Every API request the cloud answered (whatever the key)."""
    return sum(int(n) for n in fakecloud_admin(cluster, cloud, "stats")["requests"].values())


def billing(cluster: Cluster) -> list[JSON]:
    """The fakeclouds' ledger entries still billing (``ended_at`` null)."""
    return [
        e
        for cloud in CLOUDS
        for e in fakecloud_admin(cluster, cloud, "ledger")["entries"]
        if e["ended_at"] is None
    ]


def burst_deployment() -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": BURST, "namespace": SERVED},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": BURST}},
            "template": {
                "metadata": {"labels": {"app": BURST}},
                "spec": {
                    "nodeSelector": {"type": "virtual-kubelet"},
                    "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
                    "containers": [
                        {"name": "server", "image": "img:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                    ],
                },
            },
        },
    }


def burst_pod(cluster: Cluster) -> JSON | None:
    items = pods(cluster, f"app={BURST}", namespace=SERVED)
    running = [
        p for p in items if p["status"].get("phase") == "Running" and p["spec"].get("nodeName") == NODE
    ]
    return running[0] if running else None


async def test_1_install_as_written(cluster: Cluster, node: RealNode, shell: DocShell) -> None:
    text = substitute(block("deploy.md", "## Install"), install_substitutions(node.net.host_ip))
    await asyncio.to_thread(run_block, shell, text)
    status = shell.ran[-1]
    assert "(leader)" in status.stdout and NODE in status.stdout, status.stdout
    service = pods(cluster, VIRTUAL_NODE_PODS)
    assert {p["spec"]["containers"][0]["image"] for p in service} == {"localhost/vkprovider:0.1.0"}


async def test_2_status_with_a_token_of_your_own(cluster: Cluster, shell: DocShell, tmp_path: Path) -> None:
    kubectl_stdin(cluster, json.dumps(burst_deployment()), "apply", "-f", "-")
    await eventually(lambda: asyncio.to_thread(burst_pod, cluster), timeout=240, interval=2)
    port = free_port()
    text = substitute(
        block("operations.md", "**Which replica.**"), token_substitutions(port, tmp_path / "token")
    )
    for command in commands(text):
        if command.startswith(".venv/bin/vkprovider status"):
            await eventually(lambda: asyncio.to_thread(listening, port), timeout=60)
        await asyncio.to_thread(shell.run, command)
    shell.close()  # the port-forward
    status = shell.ran[-1].stdout
    assert f"node {NODE} (leader)" in status and re.search(r"\bpods 1\b", status), status


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def test_3_logs_and_top_of_a_burst_pod(cluster: Cluster, shell: DocShell) -> None:
    await logs_and_top(cluster, shell)


async def logs_and_top(cluster: Cluster, shell: DocShell) -> None:
    """``kubectl logs`` (through the leader's kubelet API) and ``kubectl top pod`` (metrics-server
    scraping it) of the burst pod, as docs/deploy.md (The kubelet API) says to check them."""
    pod = await eventually(lambda: asyncio.to_thread(burst_pod, cluster), timeout=240, interval=2)
    name = pod["metadata"]["name"]

    async def logged() -> bool:
        done = await asyncio.to_thread(shell.run, f"kubectl -n {SERVED} logs {name}", expect=None)
        return done.returncode == 0 and "container server started" in done.stdout

    await eventually(logged, timeout=180, interval=3)

    async def top() -> bool:
        done = await asyncio.to_thread(shell.run, f"kubectl -n {SERVED} top pod {name}", expect=None)
        return done.returncode == 0 and name in done.stdout

    try:
        await eventually(top, timeout=240, interval=5)
    except TimeoutError:
        raise AssertionError(
            f"kubectl top pod {name}: no metrics after 240 s\n{top_evidence(cluster, shell)}"
        ) from None


def top_evidence(cluster: Cluster, shell: DocShell) -> str:
    """What metrics-server was given and what it said, for a ``kubectl top`` that never answered
    (seen once in CI after the upgrade, not reproduced): the node's kubelet endpoint, the leader's
    resource metrics through the apiserver, and metrics-server's last log lines."""
    node = shell.run(f"kubectl get node {NODE} -o json", expect=None).stdout
    try:
        status = json.loads(node)["status"]
        endpoint = f"{status.get('addresses')} port {status.get('daemonEndpoints')}"
    except (ValueError, KeyError):
        endpoint = node[:300]
    scraped = shell.run(f"kubectl get --raw /api/v1/nodes/{NODE}/proxy/metrics/resource", expect=None)
    return (
        f"node {NODE}: {endpoint}\n"
        f"its /metrics/resource (exit {scraped.returncode}):\n{scraped.stdout[-2000:]}{scraped.stderr[-500:]}\n"
        f"metrics-server log:\n{log_tail(cluster.workdir / 'logs' / 'metrics-server.log', 30)}"
    )


@pytest.fixture(scope="module")
def truth() -> JSON:
    """What the fakeclouds saw before the restarts (filled by the first restart's test)."""
    return {}


def same_as_before(cluster: Cluster, truth: JSON) -> None:
    """Nothing redeployed: the clouds got no new ``POST /v1/deployments``, the same deployment
    bills, and the burst pod is the same pod, Running on the node (adopted by each new term)."""
    pod = burst_pod(cluster)
    assert pod is not None and pod["metadata"]["uid"] == truth["pod"]
    assert deploy_requests(cluster) == truth["deploys"]
    assert {e["deployment_id"] for e in billing(cluster)} == truth["bills"]


async def test_4_key_rotation_variables_restart_redeploys_nothing(
    cluster: Cluster, shell: DocShell, truth: JSON
) -> None:
    """The shipped overlays' way: the Secret, then new pods (``rollout restart``)."""
    pod = await asyncio.to_thread(burst_pod, cluster)
    assert pod is not None
    truth["pod"] = pod["metadata"]["uid"]
    truth["deploys"] = await asyncio.to_thread(deploy_requests, cluster)
    truth["bills"] = {e["deployment_id"] for e in await asyncio.to_thread(billing, cluster)}
    assert truth["bills"] and sum(truth["deploys"].values()) >= 1
    await asyncio.to_thread(run_block, shell, block("deploy.md", "## Rotating a provider key"))
    await asyncio.to_thread(same_as_before, cluster, truth)


KEY_FILE = "/etc/vkprovider-keys/FAKECLOUD_API_KEY"


def secret_command(key: str) -> str:
    """Rotation step 2, for the demo's fakecloud key instead of RunPod's."""
    text = substitute(
        block("deploy.md", "## Rotating a provider key"),
        [Substitution("RUNPOD_API_KEY=rpa_new...", f"FAKECLOUD_API_KEY={key}", "the demo's key")],
    )
    return commands(text)[0]


def console(cluster: Cluster, cloud: str, *keys: str) -> None:
    """The provider's console: the keys it accepts (fakecloud's ``PUT /admin/api-keys``, at its
    pod IP: the host routes the node's pod network; ``kubectl replace --raw`` sends no JSON
    content type, which FastAPI refuses)."""
    (pod,) = pods(cluster, f"app.kubernetes.io/component={cloud}")
    url = f"http://{pod['status']['podIP']}:8080/admin/api-keys"
    with httpx.Client(trust_env=False, timeout=30) as client:  # no egress proxy for a pod IP
        answer = client.put(url, json={"keys": list(keys)})
    assert answer.status_code == 200 and answer.json() == {"keys": len(keys)}, answer.text


def leader_json(shell: DocShell) -> JSON:
    """``kubectl -n vkprovider-system exec "$LEADER" -- vkprovider status`` (the check the
    rotation section names), with ``--json`` to read it."""
    shell.run(commands(block("deploy.md", "## Upgrade"))[-2])  # LEADER=$(...)
    out = shell.run(commands(block("deploy.md", "## Upgrade"))[-1] + " --json").stdout
    state: JSON = json.loads(out)
    return state


def quota_errors(cluster: Cluster, leader: str, provider: str) -> float:
    """``vkprovider_provider_call_errors_total{error="QuotaOrBilling"}`` of one provider, from
    the leader's ``/metrics`` (through the apiserver's pod proxy)."""
    text = kubectl(
        cluster, "get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods/{leader}:10255/proxy/metrics"
    )
    total = 0.0
    for line in text.splitlines():
        series = line.startswith("vkprovider_provider_call_errors_total{")
        if series and 'error="QuotaOrBilling"' in line and f'provider="{provider}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_5_key_rotation_files_without_a_restart(cluster: Cluster, shell: DocShell, truth: JSON) -> None:
    """The files way: the Secret mounted, ``api_key_file``, and the cloud's old key revoked once
    the kubelet projected the new one: no restart, no ``QuotaOrBilling``."""
    cloud = "fakecloud-cheap"
    await asyncio.to_thread(shell.run, secret_command("old-key"))
    mine = shell.cwd / "deploy" / "overlays" / "mine"
    config = (shell.cwd / "deploy" / "overlays" / "demo" / "config.yaml").read_text()
    url = f"url: http://{cloud}.vkprovider-system.svc:8080"
    assert url in config
    (mine / "config.yaml").write_text(config.replace(url, f"{url}\n      api_key_file: {KEY_FILE}"))
    kustomization = yaml.safe_load((mine / "kustomization.yaml").read_text())
    for key, value in yaml.safe_load(block("deploy.md", "**Files (no restart).**", lang="yaml")).items():
        kustomization[key] = [*kustomization.get(key, []), *value] if isinstance(value, list) else value
    (mine / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    # a config change rolls the Deployment like an upgrade (docs/deploy.md, Upgrade: steps 2-4)
    await asyncio.to_thread(run_block, shell, block("deploy.md", "## Upgrade"))
    await asyncio.to_thread(console, cluster, cloud, "old-key")  # from now on the cloud needs it

    # 1. the new key at the cloud, the old one still valid; 2. the Secret
    await asyncio.to_thread(console, cluster, cloud, "old-key", "new-key")
    await asyncio.to_thread(shell.run, secret_command("new-key"))
    leader = shell.variables["LEADER"]

    async def projected() -> bool:  # the kubelet's sync period plus its Secret cache
        done = await asyncio.to_thread(
            shell.run,
            f"kubectl -n {NAMESPACE} exec {leader} -- python -c \"print(open('{KEY_FILE}').read())\"",
            expect=None,
        )
        return done.stdout.strip() == "new-key"

    await eventually(projected, timeout=240, interval=5)
    await asyncio.to_thread(console, cluster, cloud, "new-key")  # 4. revoke the old key
    calls = await asyncio.to_thread(request_count, cluster, cloud)

    async def called_again() -> bool:
        return await asyncio.to_thread(request_count, cluster, cloud) > calls + 3

    await eventually(called_again, timeout=120, interval=3)
    state = await asyncio.to_thread(leader_json, shell)
    health = state["providers"][cloud]
    assert health.get("reachable", True) and not health.get("disabled"), health
    assert await asyncio.to_thread(quota_errors, cluster, leader, cloud) == 0
    assert shell.variables["LEADER"] == leader  # no restart: the same leader throughout
    await asyncio.to_thread(same_as_before, cluster, truth)


async def test_6_upgrade_to_a_new_tag_redeploys_nothing(
    cluster: Cluster, node: RealNode, shell: DocShell, truth: JSON
) -> None:
    # step 1's push: a new tag in the node's containerd; the overlay's newTag, as step 1 says
    await asyncio.to_thread(node.tag_image, "localhost/vkprovider:0.1.0", "localhost/vkprovider:0.2.0")
    mine = shell.cwd / "deploy" / "overlays" / "mine" / "kustomization.yaml"
    text = mine.read_text()
    assert "newTag: 0.1.0" in text
    mine.write_text(text.replace("newTag: 0.1.0", "newTag: 0.2.0"))
    await asyncio.to_thread(run_block, shell, block("deploy.md", "## Upgrade"))
    assert "(leader)" in shell.ran[-1].stdout, shell.ran[-1].stdout
    live = [p for p in pods(cluster, VIRTUAL_NODE_PODS) if not p["metadata"].get("deletionTimestamp")]
    assert {p["spec"]["containers"][0]["image"] for p in live} == {"localhost/vkprovider:0.2.0"}
    await asyncio.to_thread(same_as_before, cluster, truth)
    await logs_and_top(cluster, shell)  # the new pods' certificates, approved as step 3 says


async def test_7_uninstall_refused_while_billing_then_clean(cluster: Cluster, shell: DocShell) -> None:
    drain, check = block("deploy.md", "## Uninstall", 0), commands(block("deploy.md", "## Uninstall", 1))
    leader, uninstall_check = check[1], check[2]
    assert leader.startswith("LEADER=") and "uninstall-check" in uninstall_check
    # before the drain: the burst pod's deployment bills, so the check must refuse
    await asyncio.to_thread(shell.run, leader)
    refused = await asyncio.to_thread(shell.run, uninstall_check, expect=1)
    assert "RUNNING" in refused.stdout + refused.stderr

    await asyncio.to_thread(run_block, shell, drain)
    assert not await asyncio.to_thread(billing, cluster)
    for command in check:
        done = await asyncio.to_thread(shell.run, command)
        if command.startswith("kubectl get pods"):
            assert not done.stdout.strip(), done.stdout  # "expect none"
    assert "vkprovider-system" not in kubectl(cluster, "get", "namespaces", "-o", "name")
    assert NODE not in kubectl(cluster, "get", "nodes", "-o", "name")
    kubectl(cluster, "-n", SERVED, "delete", "deployment", BURST, "--wait=false")
