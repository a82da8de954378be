"""One ``vkprovider serve`` (or ``gate``) process for a test, started from a config file.

The chaos replicas, the serve-process tests and the gate-in-serve tests all need the same
things of such a process: a config file with a free admin port, the process against the test
cluster with its output in a log, a wait for ``/readyz`` that fails with the log's tail when the
process died instead, and a stop by signal to its PID that returns the exit code. They share
this one class; what differs between them is only the config they write.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import httpx
import yaml

from tests.support import eventually, vkprovider_process
from vkprovider.devcluster.process import free_port

JSON = dict[str, Any]


def write_config(path: Path, config: JSON) -> int:
    """Write ``config`` to ``path`` as YAML, with a free admin port unless it names one; return
    the admin port."""
    http = config.setdefault("http", {})
    if not http.get("admin_port"):
        http["admin_port"] = free_port()
    path.write_text(yaml.safe_dump(config))
    return int(http["admin_port"])


@dataclass
class ServeProcess:
    """``vkprovider <command> --config <config>`` against ``kubeconfig``, output appended to
    ``log``; ``start`` may be called again after a stop (a restart with the same config)."""

    config: Path
    log: Path
    kubeconfig: Path
    admin_port: int
    command: str = "serve"
    proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def configured(
        cls, config: JSON, path: Path, kubeconfig: Path, *, command: str = "serve", **fields: Any
    ) -> Self:
        """Write ``config`` to ``path`` (a free admin port added unless it names one); the log is
        ``path`` with the suffix ``.log``; ``fields`` are a subclass's own. Not started."""
        port = write_config(path, config)
        return cls(path, path.with_suffix(".log"), kubeconfig, port, command, **fields)

    @property
    def url(self) -> str:
        """The admin port's base URL."""
        return f"http://127.0.0.1:{self.admin_port}"

    def start(self) -> None:
        self.proc = vkprovider_process(self.command, self.config, self.kubeconfig, self.log)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    async def ready(self, client: httpx.AsyncClient) -> bool:
        return await self._ok(client, "/readyz")

    async def healthy(self, client: httpx.AsyncClient) -> bool:
        return await self._ok(client, "/healthz")

    async def state(self, client: httpx.AsyncClient) -> JSON | None:
        """The admin ``/state``, or None while it does not answer."""
        try:
            response = await client.get(self.url + "/state", timeout=5)
            return dict(response.json()) if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    async def wait_ready(self, timeout: float = 60) -> None:
        """Until ``/readyz`` answers 200; fails at once, with the log's tail, if the process ended."""
        async with httpx.AsyncClient() as client:

            async def ready() -> bool:
                assert self.alive(), self.log_tail()
                return await self.ready(client)

            await eventually(ready, timeout=timeout)

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send ``sig`` to the process and wait for it to end; its exit code."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)
        return await asyncio.wait_for(asyncio.to_thread(self.proc.wait), timeout)

    async def close(self) -> None:
        """Kill the process if it still runs (a test's clean-up after a failure)."""
        if self.alive():
            await self.stop(signal.SIGKILL)

    async def _ok(self, client: httpx.AsyncClient, path: str) -> bool:
        try:
            return (await client.get(self.url + path, timeout=5)).status_code == 200
        except httpx.HTTPError:
            return False
