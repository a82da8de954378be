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
            env=env,
        )


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
