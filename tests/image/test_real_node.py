"""The shipped image installed as docs/deploy.md says, run as pods by a real kubelet.

A dev cluster with no kwok node and one real kubelet node (:mod:`vkprovider.devcluster.kubelet_node`:
containerd + runc, pods on a CNI bridge in the node's network namespace), the image of ``make
image`` imported into its containerd (no registry here: the import stands in for ``make
image-push``). Then the Install steps of docs/deploy.md, as written, with the demo overlay in
place of the runpod one (its fakeclouds instead of a key, so no Secret, and it serves
``default``, which exists): the namespaces, your own overlay with the image and the apiserver's
address set through kustomize (``images:``, the NetworkPolicy patch), a server-side dry-run,
the apply, ``rollout status``. Checked: both vkprovider pods Running and Ready on the real node,
the virtual node ``vk-external`` registered by them and Ready, the demo's fakecloud pods Running,
and ``kubectl logs`` of the leader through the real kubelet.

Not checked, because the dev cluster has no cluster DNS and no kube-proxy: the overlay's
providers at ``fakecloud-*.vkprovider-system.svc`` (the node reports them unreachable). Skips,
naming the reason, where containers or a kubelet node cannot run (not root, no podman).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import eventually
from tests.unit.deploy import rendering
from vkprovider.devcluster import Cluster
from vkprovider.devcluster import image as image_build
from vkprovider.devcluster.containers import Unavailable
from vkprovider.devcluster.kubelet_node import NodeUnavailable, RealNode, unavailable
from vkprovider.devcluster.process import StartupError

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.image,
    pytest.mark.skipif(rendering.kubectl() is None, reason="no kubectl: run `make cluster-build`"),
]

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "vkprovider-system"
NODE = "vk-external"
FAKECLOUDS = "app.kubernetes.io/component in (fakecloud-cheap,fakecloud-premium)"
JSON = dict[str, Any]


@pytest.fixture(scope="module")
def image() -> str:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    try:
        return image_build.ensure()
    except Unavailable as exc:
        pytest.skip(f"containers cannot run here: {exc}")
    except StartupError as exc:
        pytest.fail(f"the image does not build: {exc}")


@pytest.fixture(scope="module")
async def cluster(image: str) -> AsyncIterator[Cluster]:
    started = await Cluster.start(f"realnode-{os.getpid()}", gpu_nodes=0)
    try:
        yield started
    finally:
        await started.stop(remove=True)


@pytest.fixture(scope="module")
async def node(cluster: Cluster, image: str) -> AsyncIterator[RealNode]:
    try:
        started = await RealNode.start(cluster)
    except NodeUnavailable as exc:
        pytest.skip(f"no real kubelet node here: {exc}")
    try:
        await asyncio.to_thread(started.import_image, image)
        yield started
    finally:
        await started.stop()


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


def kubectl(cluster: Cluster, *args: str) -> str:
    binary = rendering.kubectl()
    assert binary is not None
    done = subprocess.run(
        [binary, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        timeout=600,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def pods(cluster: Cluster, selector: str) -> list[JSON]:
    items: list[JSON] = json.loads(
        kubectl(cluster, "-n", NAMESPACE, "get", "pods", "-l", selector, "-o", "json")
    )["items"]
    return items


def ready(obj: JSON) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in obj.get("status", {}).get("conditions", [])
    )


async def test_the_demo_overlay_runs_as_pods_of_a_real_kubelet(
    cluster: Cluster, node: RealNode, mine: Path
) -> None:
    overlay = str(mine)
    # Install steps 3 and 5 of docs/deploy.md, as written (the demo serves `default`: it exists)
    kubectl(cluster, "apply", "--server-side", "-f", "deploy/base/namespace.yaml")
    kubectl(cluster, "apply", "--server-side", "--dry-run=server", "-k", overlay)
    kubectl(cluster, "apply", "--server-side", "-k", overlay)
    # step 6
    await asyncio.to_thread(
        kubectl, cluster, "-n", NAMESPACE, "rollout", "status", "deploy/vkprovider", "--timeout=480s"
    )

    service = pods(cluster, "app.kubernetes.io/component=virtual-node")
    assert len(service) == 2
    for pod in service:
        assert pod["spec"]["nodeName"] == node.name
        assert pod["status"]["phase"] == "Running" and ready(pod)
        assert pod["spec"]["containers"][0]["image"] == "localhost/vkprovider:0.1.0"
        assert pod["status"]["podIP"].startswith(node.pod_cidr.rsplit(".", 2)[0])

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

    lease = json.loads(
        kubectl(cluster, "-n", NAMESPACE, "get", "lease", "vkprovider-vk-external", "-o", "json")
    )
    leader = lease["spec"]["holderIdentity"]
    assert leader in {p["metadata"]["name"] for p in service}
    # the apiserver calls the real kubelet at the node's namespace address for the logs
    logs = kubectl(cluster, "-n", NAMESPACE, "logs", leader, "--tail=200")
    assert NODE in logs
