"""``vkprovider status`` and ``uninstall-check`` against two real replicas with leader election,
their admin APIs bound off loopback (authentication on, as deployed), a real ServiceAccount token
authorized by RBAC on ``nodes/<node>/proxy``, on a real control plane (issue 29).

The leader is found among the replicas; a standby says it is one and names the leader; a token
without the role is refused naming the flag; the uninstall check lists the deployment that still
runs at the provider and cannot pass until it is gone."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_serve_leader import cloud, replica_settings  # noqa: F401 - fixture
from tests.support import bound_gpu_pod, eventually
from vkprovider.cli import main
from vkprovider.devcluster import Cluster
from vkprovider.kube.client import KubeClient
from vkprovider.service import Service

pytestmark = pytest.mark.cluster


async def cli(*argv: str) -> int:
    """The CLI in a thread: the replicas it reads run on this event loop."""
    return await asyncio.to_thread(main, list(argv))


async def token_for(kube: KubeClient, namespace: str, account: str) -> str:
    await kube.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body={"metadata": {"name": account}}
    )
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    answer = await kube.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", body=body
    )
    return str(answer["status"]["token"])


@pytest.fixture
async def admin_role(cluster: Cluster, namespace: str) -> AsyncIterator[tuple[KubeClient, str]]:
    """The ClusterRole of deploy/base (vkprovider-admin-api's rule) for a fresh node name, bound
    to a ServiceAccount ``operator`` of the test namespace."""
    node = f"vk-{uuid.uuid4().hex[:8]}"
    kube = await KubeClient.connect(str(cluster.kubeconfig))
    name = f"admin-api-{node}"
    rule = {
        "apiGroups": [""],
        "resources": ["nodes/proxy"],
        "resourceNames": [node],
        "verbs": ["get", "create"],
    }
    await kube.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        body={"metadata": {"name": name}, "rules": [rule]},
    )
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}],
    }
    await kube.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body=binding)
    try:
        yield kube, node
    finally:
        for kind in ("clusterrolebindings", "clusterroles"):
            await kube.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{kind}/{name}")
        await kube.close()


async def test_status_finds_the_leader_and_uninstall_check_sees_what_runs(
    cluster: Cluster,
    namespace: str,
    cloud: Any,  # noqa: F811 - fixture
    admin_role: tuple[KubeClient, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kube, node = admin_role
    operator = await token_for(kube, namespace, "operator")
    viewer = await token_for(kube, namespace, "viewer")  # no role
    (tmp_path / "token").write_text(operator)
    replicas = {}
    for identity in ("replica-a", "replica-b"):
        settings = replica_settings(cluster, node, cloud.url, identity)
        settings.http.admin_host = "0.0.0.0"  # off loopback: the views need a token, as deployed
        replicas[identity] = Service(settings)
    tasks = [asyncio.create_task(service.run()) for service in replicas.values()]
    try:

        async def one_leader() -> str | None:
            synced = [n for n, s in replicas.items() if s.controller and s.controller.synced.is_set()]
            return synced[0] if len(synced) == 1 else None

        leader = await eventually(one_leader, timeout=60)
        standby = next(n for n in replicas if n != leader)
        urls = {}
        for name, service in replicas.items():
            assert service.admin is not None
            urls[name] = f"http://127.0.0.1:{service.admin.port}"
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=bound_gpu_pod("one", node))

        async def deployed() -> bool:
            controller = replicas[leader].controller
            return controller is not None and len(controller.tracker.deployments) == 1

        await eventually(deployed, timeout=60)
        capsys.readouterr()

        # Both replicas asked, the standby first: the leader's state, the standby named.
        token = ("--token-file", str(tmp_path / "token"))

        async def standby_names_the_leader() -> tuple[str, str] | None:
            # the standby learns who leads from its own reading of the Lease, one retry period
            # after it starts: until then it truthfully says "not known yet"
            code = await cli("status", "--admin", urls[standby], "--admin", urls[leader], *token, "--json")
            out, err = capsys.readouterr()
            assert code == 0, err
            return (out, err) if f"the leader is {leader})" in err else None

        out, err = await eventually(standby_names_the_leader, timeout=60, interval=1.0)
        state = json.loads(out)
        assert state["role"] == "leader" and state["deployments"] == 1 and state["pods"] == 1
        assert f"{urls[standby]}: a standby (the leader is {leader})" in err

        # Only the standby: no zeros, an error naming the leader (exit 3).
        assert await cli("status", "--admin", urls[standby], *token) == 3
        assert f"the leader is {leader}" in capsys.readouterr().err

        # A token whose user lacks the role, and no token: refused, naming what to fix.
        assert await cli("status", "--admin", urls[leader], "--token", viewer) == 1
        assert "'get' on nodes/<node>/proxy" in capsys.readouterr().err
        assert await cli("status", "--admin", urls[leader]) == 1
        assert "--token or --token-file" in capsys.readouterr().err

        # The uninstall check: the deployment still runs at the provider, the leader tracks it.
        config = tmp_path / "config.yaml"
        provider = {"name": "shared", "adapter": "fakecloud", "settings": {"url": cloud.url}}
        config.write_text(yaml.safe_dump({"node": {"name": node}, "providers": [provider]}))
        check = (
            "uninstall-check",
            "--config",
            str(config),
            "--admin",
            urls[standby],
            "--admin",
            urls[leader],
        )
        assert await cli(*check, *token) == 1
        out = capsys.readouterr().out
        assert "RUNNING  provider shared: deployment of pod uid" in out
        assert (
            f"RUNNING  service (leader at {urls[leader]}): 1 pods bound to node {node}, 1 deployments" in out
        )

        # Drained (the pod deleted through the API, as an eviction does): the check passes.
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/one")

        async def nothing_runs() -> bool:
            code = await cli(*check, *token)
            capsys.readouterr()
            return code == 0

        await eventually(nothing_runs, timeout=90, interval=1)
    finally:
        for service in replicas.values():
            service.stopping.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
