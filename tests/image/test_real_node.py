"""The shipped image installed as docs/deploy.md says, run as pods by a real kubelet.

A dev cluster with no kwok node and one real kubelet node (:mod:`vkprovider.devcluster.kubelet_node`:
containerd + runc, pods on a CNI bridge in the node's network namespace, kube-proxy and a cluster
DNS for Services), the image of ``make image`` imported into its containerd (no registry here:
the import stands in for ``make image-push``). Then the Install steps of docs/deploy.md with the
demo overlay in place of the runpod one (its fakeclouds instead of a key, so no Secret, and it
serves ``default``, which exists): the namespaces, your own overlay with the image and the
apiserver's address set through kustomize (``images:``, the NetworkPolicy patch), a server-side
dry-run, the apply, ``rollout status``, ``approve-csr``, the leader from the Lease.

Checked: both vkprovider pods Running and Ready on the real node; ``vk-external`` registered by
them (InternalIP = a pod IP) and Ready, with ``ProvidersReachable`` True (the fakecloud pods
reached at their ``.svc`` names); the leader's logs through the real kubelet; a GPU pod bursting
to a fakecloud, and its ``kubectl logs`` and ``kubectl top`` (metrics-server) through the leader's
kubelet API on its pod IP.
Skips, naming the reason, where containers or a kubelet node cannot run (not root, no podman).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.image.image_support import MARKS
from tests.image.real_node_support import (
    FAKECLOUDS,
    JSON,
    NAMESPACE,
    NODE,
    REPO,
    SERVED,
    VIRTUAL_NODE_PODS,
    kubectl,
    kubectl_result,
    kubectl_stdin,
    leader_of,
    pods,
    ready,
)
from tests.support import bound_gpu_pod, eventually
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.kubelet_node import RealNode

pytestmark = MARKS


@pytest.fixture(scope="module")
def mine(image: str, node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Install step 2: your own overlay (outside the repository, as in your own), on the shipped
    demo overlay, with your image and your apiserver's address (here the host end of the node's
    veth: where the apiserver's connections to the pods come from)."""
    overlay = tmp_path_factory.mktemp("overlays") / "mine"
    overlay.mkdir()
    demo = os.path.relpath(REPO / "deploy" / "overlays" / "demo", overlay)
    name, tag = image.rsplit(":", 1)
    (overlay / "kustomization.yaml").write_text(
        textwrap.dedent(
            f"""\
            apiVersion: kustomize.config.k8s.io/v1beta1
            kind: Kustomization
            resources:
              - {demo}
            images:
              - name: vkprovider
                newName: {name}
                newTag: {tag}
            patches:
              - target: {{kind: NetworkPolicy, name: vkprovider-kubelet-api}}
                patch: |-
                  - op: replace
                    path: /spec/ingress/0/from/0/ipBlock/cidr
                    value: {node.net.host_ip}/32
            """
        )
    )
    return overlay


@pytest.fixture(scope="module")
async def installed(cluster: Cluster, node: RealNode, mine: Path) -> Path:
    """Install steps 3, 5 and 6 of docs/deploy.md, as written (the demo serves ``default``,
    which exists; it needs no key Secret)."""
    overlay = str(mine)
    kubectl(cluster, "apply", "--server-side", "-f", "deploy/base/namespace.yaml")
    kubectl(cluster, "apply", "--server-side", "--dry-run=server", "-k", overlay)
    kubectl(cluster, "apply", "--server-side", "-k", overlay)
    await asyncio.to_thread(
        kubectl, cluster, "-n", NAMESPACE, "rollout", "status", "deploy/vkprovider", "--timeout=480s"
    )
    return mine


async def test_the_demo_overlay_runs_as_pods_of_a_real_kubelet(
    cluster: Cluster, node: RealNode, installed: Path
) -> None:
    service = pods(cluster, VIRTUAL_NODE_PODS)
    assert len(service) == 2
    for pod in service:
        assert pod["spec"]["nodeName"] == node.name
        assert pod["status"]["phase"] == "Running" and ready(pod)
        assert pod["spec"]["containers"][0]["image"] == "localhost/vkprovider:0.1.0"
        assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(node.pod_cidr)

    async def virtual_node_ready() -> JSON | None:
        out = await asyncio.to_thread(kubectl, cluster, "get", "nodes", "-o", "json")
        found = [n for n in json.loads(out)["items"] if n["metadata"]["name"] == NODE]
        return found[0] if found and ready(found[0]) else None

    virtual = await eventually(virtual_node_ready, timeout=120)
    addresses = {a["type"]: a["address"] for a in virtual["status"]["addresses"]}
    assert addresses["InternalIP"] in {p["status"]["podIP"] for p in service}  # status.podIP, as configured

    async def fakeclouds_running() -> list[JSON]:
        clouds = await asyncio.to_thread(pods, cluster, FAKECLOUDS)
        return clouds if clouds and all(p["status"].get("phase") == "Running" for p in clouds) else []

    for cloud in await eventually(fakeclouds_running, timeout=240):
        assert cloud["spec"]["nodeName"] == node.name

    # Services and cluster DNS on the real node: the providers answer at their .svc names
    async def providers_reachable() -> bool:
        out = await asyncio.to_thread(kubectl, cluster, "get", "node", NODE, "-o", "json")
        conditions = {c["type"]: c["status"] for c in json.loads(out)["status"]["conditions"]}
        return conditions.get("ProvidersReachable") == "True"

    await eventually(providers_reachable, timeout=180)

    leader = await asyncio.to_thread(leader_of, cluster)
    assert leader in {p["metadata"]["name"] for p in service}
    # the apiserver calls the real kubelet at the node's namespace address for the logs
    logs = kubectl(cluster, "-n", NAMESPACE, "logs", leader, "--tail=200")
    assert NODE in logs


async def test_a_burst_pod_runs_and_its_logs_come_through_the_pods_kubelet_api(
    cluster: Cluster, node: RealNode, installed: Path
) -> None:
    """Install step 7 (approve the kubelet API's serving certificates), then a GPU pod in the
    served namespace bursts to a fakecloud, and ``kubectl logs`` of it goes from the apiserver to
    the leader's kubelet API at its pod IP (on the real node's bridge) and on to the fakecloud;
    ``kubectl top`` of it comes from metrics-server scraping the same kubelet API.

    Step 7 runs as written (``vkprovider approve-csr`` alone): the CLI finds the cluster through
    ``$KUBECONFIG`` as kubectl does."""
    members = {p["metadata"]["name"] for p in pods(cluster, VIRTUAL_NODE_PODS)}

    async def approved() -> bool:
        await asyncio.to_thread(
            subprocess.run,
            [str(REPO / ".venv" / "bin" / "vkprovider"), "approve-csr"],
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
            capture_output=True,
            timeout=120,
            check=False,
        )
        listed = json.loads(
            await asyncio.to_thread(
                kubectl, cluster, "get", "csr", "-l", f"vkprovider.io/node-name={NODE}", "-o", "json"
            )
        )["items"]
        issued = [c for c in listed if c.get("status", {}).get("certificate")]
        return len(issued) >= len(members)

    await eventually(approved, timeout=120, interval=2)

    name = "burst-logs"
    pod = {"apiVersion": "v1", "kind": "Pod", **bound_gpu_pod(name, NODE)}
    pod["metadata"]["namespace"] = SERVED
    kubectl_stdin(cluster, json.dumps(pod), "apply", "-f", "-")
    try:

        async def running() -> bool:
            out = await asyncio.to_thread(kubectl, cluster, "-n", SERVED, "get", "pod", name, "-o", "json")
            return bool(json.loads(out)["status"].get("phase") == "Running")

        await eventually(running, timeout=180)

        async def logged() -> str | None:
            done = await asyncio.to_thread(kubectl_result, cluster, "-n", SERVED, "logs", name)
            return done.stdout if done.returncode == 0 and "container server started" in done.stdout else None

        out = await eventually(logged, timeout=120, interval=2)
        print(f"\nkubectl logs {name} (through {leader_of(cluster)}'s kubelet API):\n{out}")

        # metrics-server scrapes the leader's kubelet API (/metrics/resource) like a node's
        async def top() -> str | None:
            done = await asyncio.to_thread(
                kubectl_result, cluster, "-n", SERVED, "top", "pod", name, "--no-headers"
            )
            return done.stdout if done.returncode == 0 and done.stdout.startswith(name) else None

        print(f"kubectl top pod {name}: {(await eventually(top, timeout=180, interval=3)).strip()}")
    finally:
        kubectl(cluster, "-n", SERVED, "delete", "pod", name, "--wait=false")
