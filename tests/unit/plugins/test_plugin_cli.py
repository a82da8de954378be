"""``vkprovider plugin serve``: config forms, handshake output, clear errors."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from vkprovider.cli import build_parser
from vkprovider.cli.plugin import _settings_for
from vkprovider.errors import ConfigError
from vkprovider.plugins.grpc.handshake import parse_handshake

HERE = Path(__file__).parent


def test_registered_under_vkprovider_plugin_serve() -> None:
    args = build_parser().parse_args(["plugin", "serve", "fakecloud", "--address", "unix:/tmp/x.sock"])
    assert (args.adapter, args.address) == ("fakecloud", "unix:/tmp/x.sock")


def test_settings_from_a_plain_mapping_or_a_service_config(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("url: http://a\n")
    assert _settings_for("fakecloud", None, plain) == ("fakecloud", {"url": "http://a"})
    service = tmp_path / "service.yaml"
    service.write_text(
        "providers:\n"
        "  - {name: cheap, adapter: fakecloud, settings: {url: http://cheap}}\n"
        "  - {name: dear, adapter: fakecloud, settings: {url: http://dear}}\n"
    )
    assert _settings_for("fakecloud", "dear", service) == ("dear", {"url": "http://dear"})
    with pytest.raises(ConfigError, match="exactly one provider"):
        _settings_for("fakecloud", None, service)


async def run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vkprovider", "plugin", "serve", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(HERE)},
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_invalid_settings_exit_2_with_the_field_named() -> None:
    code, out, err = await run("plugin_fixtures:TinyProvider", "--name", "tiny-a")
    assert code == 2 and out == ""
    assert "error: providers[tiny-a].settings.url: Field required" in err


async def test_prints_a_handshake_line_then_serves(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("url: u\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vkprovider", "plugin", "serve", "plugin_fixtures:TinyProvider",
        "--config", str(config), "--address", f"unix:{tmp_path}/p.sock",
        stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(HERE)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            line = (await proc.stdout.readline()).decode()
        assert parse_handshake(line).address == f"unix:{tmp_path}/p.sock"
    finally:
        proc.terminate()
        async with asyncio.timeout(30):
            assert await proc.wait() == 0


async def test_a_launched_plugin_stops_when_its_host_dies(tmp_path: Path) -> None:
    """The "host" here is a short-lived middle process that starts the plugin and exits."""
    config = tmp_path / "c.yaml"
    config.write_text("url: u\n")
    serve = [sys.executable, "-m", "vkprovider", "plugin", "serve", "plugin_fixtures:TinyProvider"]
    serve += ["--config", str(config)]
    host = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen({serve!r}, stdout=subprocess.PIPE)\n"
        "print(p.stdout.readline().decode().strip(), p.pid, flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(HERE), "VKPROVIDER_PLUGIN_ADDRESS": f"unix:{tmp_path}/p.sock"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", host, stdout=asyncio.subprocess.PIPE, env=env
    )
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    handshake, pid_text = out.decode().split()
    assert parse_handshake(handshake).address == f"unix:{tmp_path}/p.sock"
    plugin_pid = int(pid_text)
    gone = False
    try:
        async with asyncio.timeout(30):
            while not gone:
                try:
                    os.kill(plugin_pid, 0)
                    await asyncio.sleep(0.1)
                except ProcessLookupError:
                    gone = True
    finally:
        if not gone:  # the test failed: do not leave the plugin running
            with contextlib.suppress(ProcessLookupError):
                os.kill(plugin_pid, signal.SIGKILL)
    assert gone
