"""Helpers shared by every test package."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx

from vkprovider.kube.client import MERGE_PATCH, KubeClient
from vkprovider.kube.errors import KubeConflict
from vkprovider.retry import retrying


async def eventually(
    check: Callable[[], Awaitable[Any]], timeout: float = 60.0, interval: float = 0.2
) -> Any:
    """Poll ``check`` until it returns something truthy and return it; fail (never hang) after
    ``timeout`` seconds with ``TimeoutError``. No timing is asserted, only the outcome."""
    async with asyncio.timeout(timeout):
        while True:
            result = await check()
            if result:
                return result
            await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def background(loop: Coroutine[Any, Any, None]) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``loop`` (a component's ``run()``) as a task for the block; cancel it and wait for it
    to end afterwards, so no task outlives the test."""
    task = asyncio.create_task(loop)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def fakecloud_process(config: dict[str, Any], directory: Path) -> AsyncIterator[str]:
    """A fakecloud in a process of its own (``vkprovider fakecloud``), yielding its URL.

    In the test's own event loop a fakecloud answers only while the test does not block that
    loop (a hypothesis draw, a sync read); a stall of seconds reads to vkprovider as an outage
    and marks the provider unhealthy. Tests that are not about the cloud's behaviour under such
    stalls run it apart."""
    path = directory / "fakecloud.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vkprovider", "fakecloud", "--port", "0", "--config", str(path),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode().strip()
        if not line.startswith("fakecloud listening on "):
            raise RuntimeError(f"fakecloud did not start: {line!r}")
        yield line.rsplit(" ", 1)[1]
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


async def ledger_entry(cloud_url: str, uid: str) -> dict[str, Any]:
    """Fakecloud's ledger entry (``/admin/ledger``) for pod ``uid``'s one deployment: the cloud's
    own record of when it started and ended, independent of what vkprovider says."""
    async with httpx.AsyncClient(base_url=cloud_url) as http:
        entries = (await http.get("/admin/ledger")).json()["entries"]
    (entry,) = [e for e in entries if e["uid"] == uid]
    return dict(entry)


async def edit_node_taints(
    kube: KubeClient, node: str, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
) -> None:
    """A second writer's change to a Node's ``spec.taints``, done the careful way: read, ``edit``,
    write guarded by the read's ``resourceVersion``, and on a 409 read again and redo (with
    backoff), as the gate's and the node agent's own writers do. The agent writes the Node's
    status every few seconds, so an unretried guarded write meets a 409 now and then (1 in 200
    measured against a running agent): a test failure that says nothing about the code."""
    async for attempt in retrying(base=0.02, cap=1.0, attempts=10, retry_on=(KubeConflict,)):
        with attempt:
            body = await kube.request("GET", f"/api/v1/nodes/{node}")
            taints = edit(list(body["spec"].get("taints") or []))
            patch = {
                "metadata": {"resourceVersion": body["metadata"]["resourceVersion"]},
                "spec": {"taints": taints},
            }
            await kube.request("PATCH", f"/api/v1/nodes/{node}", body=patch, content_type=MERGE_PATCH)


def vkprovider_process(
    command: str, config: Path, kubeconfig: Path, log: Path, *args: str
) -> subprocess.Popen[bytes]:
    """``vkprovider <command> --config <config> [args]`` in a process of its own against
    ``kubeconfig``, its output appended to ``log``; the caller stops it (by its PID) and waits."""
    env = {**os.environ, "VKPROVIDER_KUBE__KUBECONFIG": str(kubeconfig)}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "vkprovider", command, "--config", str(config), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )


def bound_gpu_pod(
    name: str,
    node: str,
    *,
    gpus: int = 1,
    grace_seconds: int | None = None,
    env: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A bare Pod already bound to ``node`` (``nodeName``: no scheduler involved), tolerating the
    virtual node's taint, one container ``server`` asking for ``gpus`` GPUs (with ``env``)."""
    container: dict[str, Any] = {"name": "server", "image": "img:1"}
    if env is not None:
        container["env"] = env
    container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec: dict[str, Any] = {
        "nodeName": node,
        "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
        "containers": [container],
    }
    if grace_seconds is not None:
        spec["terminationGracePeriodSeconds"] = grace_seconds
    return {"metadata": {"name": name}, "spec": spec}


def gpu_worker_pod(node: str, *, run_seconds: float, grace_seconds: int) -> dict[str, Any]:
    """The pod spec of a Job's one-GPU worker pinned to the virtual node ``node`` (tolerating its
    taint); fakecloud runs it ``run_seconds`` (``FAKECLOUD_RUN_SECONDS``), then it exits 0."""
    return {
        "restartPolicy": "Never",
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": grace_seconds,
        "containers": [
            {
                "name": "worker",
                "image": "registry.example/trainer:1.0",
                "env": [{"name": "FAKECLOUD_RUN_SECONDS", "value": f"{run_seconds:g}"}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        ],
    }


@contextlib.asynccontextmanager
async def http_server(
    handler: Callable[[Any], Awaitable[Any]], *, on_stop: Callable[[], None] | None = None
) -> AsyncIterator[str]:
    """An aiohttp server on 127.0.0.1 (a free port) answering every method and path with
    ``handler``; yields its base URL (``http://127.0.0.1:<port>``). ``on_stop`` runs before the
    server stops (e.g. to release handlers a test left waiting)."""
    from aiohttp import web

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        if on_stop is not None:
            on_stop()
        await runner.cleanup()
