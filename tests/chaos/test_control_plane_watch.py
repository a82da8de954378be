"""The rig's control-plane watch, against the real session cluster, and the service's Kubernetes
client across the same event.

Seed 889513 of the small run failed because the kube-apiserver stopped with no fault on it (the
proxy in front of it refused every connection for 5 minutes) and the rig read the silence as
"no pods", reporting six orphans. Here a stray SIGTERM stops the apiserver: the watch must name
it, keep its log and start it again, and the service's ``KubeClient`` talking through the
rig's proxy must fail with ``KubeUnavailable`` meanwhile and work again afterwards (no pooled
connection or TLS state poisoned by the resets), with an ``Informer`` over it re-listing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import pytest
import yaml

from tests.chaos import controlplane
from tests.chaos.proxy import TcpProxy
from tests.support import eventually
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.process import Process
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeUnavailable
from vkprovider.kube.informer import Informer

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]


def _kubeconfig_via(cluster: Cluster, port: int, path: Path) -> Path:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(config))
    return path


async def _answers(kube: KubeClient) -> bool:
    try:
        await kube.request("GET", "/api/v1/namespaces/default")
    except KubeUnavailable:
        return False
    return True


async def test_a_dead_apiserver_is_named_restarted_and_the_client_recovers(
    cluster: Cluster, tmp_path: Path
) -> None:
    api = cluster.component("kube-apiserver")
    assert await controlplane.check(cluster, tmp_path) == []  # all alive: nothing to do

    port = int(cluster.server.rsplit(":", 1)[1])
    proxy = TcpProxy("127.0.0.1", port)
    kube = await KubeClient.connect(str(_kubeconfig_via(cluster, await proxy.start(), tmp_path / "kc")))
    seen: list[str] = []
    informer = Informer(
        kube, "/api/v1/namespaces", handler=lambda kind, old, new: seen.append(new["metadata"]["name"])
    )
    task = asyncio.create_task(informer.run())
    try:
        await eventually(lambda: _synced(informer), timeout=60)
        assert await _answers(kube)

        os.kill(api.pid, signal.SIGTERM)  # not the rig's doing: no fault restarts it
        await eventually(lambda: _dead(api), timeout=90)
        with pytest.raises(KubeUnavailable):
            await kube.request("GET", "/api/v1/namespaces/default")
        assert proxy.refused > 0
        # While a fault restarts the apiserver itself, the watch leaves it to the fault.
        assert await controlplane.check(cluster, tmp_path, restarting={"kube-apiserver"}) == []

        [death] = await controlplane.check(cluster, tmp_path)
        assert (death.component, death.pid) == ("kube-apiserver", api.pid)
        assert death.how.startswith("exited with code 0 (stopped gracefully"), death.how  # Go on SIGTERM
        assert death.restarted_at is not None, death.restart_error
        assert death.log_copy.read_text().strip(), "the apiserver's log tail is kept"
        assert cluster.component("kube-apiserver").pid != api.pid

        # The same client, the same pool: it works again, and the informer re-lists and sees a
        # namespace created after the outage.
        await eventually(lambda: _answers(kube), timeout=60)
        name = f"after-outage-{uuid.uuid4().hex[:6]}"
        await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
        await eventually(lambda: _has(seen, name), timeout=90)
        await kube.request("DELETE", f"/api/v1/namespaces/{name}")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()
        await proxy.stop()
        if not cluster.component("kube-apiserver").alive():
            await controlplane.check(cluster, tmp_path)  # leave the session cluster serving


async def _synced(informer: Informer) -> bool:
    return informer.synced.is_set()


async def _dead(proc: Process) -> bool:
    return not proc.alive()


async def _has(seen: list[str], name: str) -> bool:
    return name in seen
