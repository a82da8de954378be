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
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.serve_process import ServeProcess


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


@dataclass(kw_only=True)
class Replica(ServeProcess):
    """A serve process with a leader-election identity, killed and restarted by the chaos."""

    identity: str
    kills: int = 0
    #: set while the test holds the replica down (between a kill and the restart)
    held_down: bool = False
    #: (return code, last log lines) of exits the test did not cause
    exits: list[tuple[int, str]] = field(default_factory=list)

    def start(self) -> None:
        self.held_down = False
        super().start()

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
        try:
            await self.stop(sig)
        except TimeoutError:
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait)
        for pid in plugins:
            with contextlib.suppress(OSError):
                if b"plugin\0serve" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
        self.kills += 1

    async def close(self) -> None:
        """SIGTERM if it still runs, its plugin processes stopped as after a kill."""
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


def serve_config(
    *,
    node: str,
    identity: str,
    providers: list[dict[str, Any]],
    lease: str | None,
) -> dict[str, Any]:
    """A replica's config (``tests.serve_process`` adds the free admin port when it writes it)."""
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
    return config
