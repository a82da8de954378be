"""kubectl against the real-kubelet dev cluster, shared by test_real_node.py and
test_docs_verbatim.py (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.unit.deploy import rendering
from vkprovider.devcluster import Cluster

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "vkprovider-system"
NODE = "vk-external"
SERVED = "default"  # the demo overlay's served namespace (served-namespaces.yaml)
VIRTUAL_NODE_PODS = "app.kubernetes.io/component=virtual-node"
FAKECLOUDS = "app.kubernetes.io/component in (fakecloud-cheap,fakecloud-premium)"
JSON = dict[str, Any]


def kubectl_result(
    cluster: Cluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    binary = rendering.kubectl()
    assert binary is not None
    return subprocess.run(
        [binary, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        timeout=600,
        check=False,
        cwd=REPO,
    )


def kubectl_stdin(cluster: Cluster, stdin: str, *args: str) -> str:
    done = kubectl_result(cluster, *args, stdin=stdin)
    assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def kubectl(cluster: Cluster, *args: str) -> str:
    done = kubectl_result(cluster, *args)
    assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def pods(cluster: Cluster, selector: str, namespace: str = NAMESPACE) -> list[JSON]:
    items: list[JSON] = json.loads(
        kubectl(cluster, "-n", namespace, "get", "pods", "-l", selector, "-o", "json")
    )["items"]
    return items


def ready(obj: JSON) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in obj.get("status", {}).get("conditions", [])
    )


def leader_of(cluster: Cluster) -> str:
    """Install step 8's ``LEADER=$(kubectl ... get lease ... -o jsonpath=...)``."""
    jsonpath = "jsonpath={.spec.holderIdentity}"
    return kubectl(cluster, "-n", NAMESPACE, "get", "lease", "vkprovider-vk-external", "-o", jsonpath).strip()


def fakecloud_admin(cluster: Cluster, cloud: str, path: str) -> Any:
    """GET a fakecloud's admin API (``/admin/stats``, ``/admin/ledger``) through the apiserver's
    Service proxy: what the cloud itself saw, independent of vkprovider."""
    raw = kubectl(
        cluster, "get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/services/{cloud}:8080/proxy/admin/{path}"
    )
    return json.loads(raw)
