"""The remote-Kubernetes adapter reads logs over an API client and connection pool of its own."""

from __future__ import annotations

from pathlib import Path

from kubeconfig_stub import KUBECONFIG
from vkprovider_kubernetes.client import RemoteCluster


async def test_log_streams_do_not_share_the_call_pool(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    cluster = RemoteCluster(
        "remote", kubeconfig=path, context=None, qps=10, burst=10, timeout=5, log_max_connections=7
    )
    try:
        calls, logs = (await cluster._core()).api_client, (await cluster._core(logs=True)).api_client
        assert calls is not logs
        assert logs.rest_client.pool_manager.connector.limit == 7
        assert (
            calls.rest_client.pool_manager.connector.limit == 100
        )  # kubernetes_asyncio's default, untouched
    finally:
        await cluster.close()
