"""``vkprovider serve`` replicas as real processes, so SIGKILL is real.

Each replica has a fixed leader-election identity: restarted after a SIGKILL it finds the Lease
still naming itself and resumes at once, as a Deployment's pod with a stable name would.
``exits`` records every exit the test did not cause (a crash the service must never have).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml


def plugin_command(name: str, settings: Path) -> list[str]:
    """``vkprovider plugin serve`` through ``noisy_plugin.py`` (the ``plugin-noise`` fault's hook)."""
    return [
        sys.executable,
        str(Path(__file__).with_name("noisy_plugin.py")),
        "plugin",
        "serve",
        "fakecloud",
        "--name",
        name,
        "--config",
        str(settings),
    ]


@dataclass
class Replica:
    identity: str
    config: Path
    log: Path
    admin_port: int
    kubeconfig: Path
    proc: subprocess.Popen[bytes] | None = None
    kills: int = 0
    #: set while the test holds the replica down (between a kill and the restart)
    held_down: bool = False
    #: (return code, last log lines) of exits the test did not cause
    exits: list[tuple[int, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def start(self) -> None:
        self.held_down = False
        env = {**os.environ, "VKPROVIDER_KUBE__KUBECONFIG": str(self.kubeconfig)}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "vkprovider", "serve", "--config", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """Record and restart an exit nobody asked for (a crash or a fatal error)."""
        if self.proc is not None and self.proc.poll() is not None and not self.held_down:
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
            self.exits.append((self.proc.returncode, tail))
            self.start()

    async def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the replica and wait for it; the test restarts it with ``start``. A SIGKILL
        leaves its plugin process running (nobody to stop it): that one is ours, stop it by PID."""
        assert self.proc is not None
        self.held_down = True
        plugins = self.children()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)
        try:
            await asyncio.wait_for(asyncio.to_thread(self.proc.wait), 30)
        except TimeoutError:
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait)
        for pid in plugins:
            with contextlib.suppress(OSError):
                if b"plugin\0serve" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
        self.kills += 1

    async def stop(self) -> None:
        if self.alive():
            await self.kill(signal.SIGTERM)

    def children(self) -> list[int]:
        """PIDs of this replica's plugin processes (its children running ``plugin serve``)."""
        if self.proc is None:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == self.proc.pid and b"plugin\0serve" in cmdline:
                found.append(int(entry.name))
        return found

    async def state(self, client: httpx.AsyncClient) -> dict[str, Any] | None:
        try:
            response = await client.get(self.url + "/state", timeout=5)
            return dict(response.json()) if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    async def ready(self, client: httpx.AsyncClient) -> bool:
        try:
            return (await client.get(self.url + "/readyz", timeout=5)).status_code == 200
        except httpx.HTTPError:
            return False

    async def healthy(self, client: httpx.AsyncClient) -> bool:
        try:
            return (await client.get(self.url + "/healthz", timeout=5)).status_code == 200
        except httpx.HTTPError:
            return False


def write_config(
    path: Path,
    *,
    node: str,
    identity: str,
    admin_port: int,
    providers: list[dict[str, Any]],
    lease: str | None,
) -> Path:
    config: dict[str, Any] = {
        "node": {"name": node, "lease_renew_seconds": 2, "status_update_seconds": 5, "probe_seconds": 2},
        "kube": {"qps": 50, "burst": 100},
        "pods": {
            "workers": 8,
            "status_poll_seconds": 1,
            "orphan_gc_seconds": 5,
            "lost_grace_seconds": 5,
            "backoff_base_seconds": 0.3,
            "backoff_max_seconds": 5,
            "drain_timeout_seconds": 2,
        },
        "placement": {"offer_refresh_seconds": 2, "blocklist_ttl_seconds": 10},
        "http": {"admin_port": admin_port},
        "providers": providers,
        "log_level": "INFO",
    }
    if lease is not None:
        config["leader_election"] = {
            "enabled": True,
            "namespace": "default",
            "lease_name": lease,
            "identity": identity,
        }
    path.write_text(yaml.safe_dump(config))
    return path
