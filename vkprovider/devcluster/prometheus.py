"""Debian's Prometheus for the gate's tests: install it where missing, start it on 127.0.0.1.

``python -m vkprovider.devcluster.prometheus install`` (``make prometheus``, run by
``make test``) installs the ``prometheus`` package only when the binary is missing, with no
service start (``devcluster.apt``), and nothing here ever relies on Debian's service:
:func:`start_prometheus` runs its own process with a generated scrape config, on a free
loopback port, stopped by PID.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from vkprovider.devcluster import apt
from vkprovider.devcluster.process import Process, StartupError, free_port, spawn


def binary() -> str | None:
    return shutil.which("prometheus")


def install() -> str:
    """Install Debian's prometheus if it is missing; return the binary's path."""
    apt.install({"prometheus": "prometheus"})
    found = binary()
    if not found:
        raise StartupError("apt-get installed prometheus but no prometheus binary is on PATH")
    return found


def scrape_config(targets: list[str], interval_seconds: float) -> dict[str, object]:
    return {
        "global": {"scrape_interval": f"{interval_seconds}s", "evaluation_interval": f"{interval_seconds}s"},
        "scrape_configs": [{"job_name": "exporter", "static_configs": [{"targets": targets}]}],
    }


def _write_config(workdir: Path, targets: list[str], interval_seconds: float) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config(targets, interval_seconds)))
    return config


async def start_prometheus(
    workdir: Path, targets: list[str], *, interval_seconds: float = 1.0
) -> tuple[Process, str]:
    """Start Prometheus scraping ``targets`` (host:port on 127.0.0.1); returns (process, URL)."""
    path = binary()
    if path is None:
        raise StartupError("prometheus is not installed; run `make prometheus`")
    config = _write_config(workdir, targets, interval_seconds)
    port = free_port()
    proc = spawn(
        "prometheus",
        Path(path),
        [
            f"--config.file={config}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={workdir / 'data'}",
            "--log.level=warn",
        ],
        workdir,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if not proc.alive():
                raise StartupError(proc.exit_reason())
            try:
                if (await client.get(f"{url}/-/ready")).status_code == 200:
                    return proc, url
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                proc.stop()
                raise StartupError(f"prometheus did not become ready; log: {proc.log}")
            await asyncio.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["install"]:
        print("usage: python -m vkprovider.devcluster.prometheus install", file=sys.stderr)
        return 2
    try:
        print(install(), file=sys.stderr)
    except (StartupError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
