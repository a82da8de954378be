"""Plugin lifecycle with real subprocesses: handshake, failures, backoff, stop then kill, sidecars."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from plugin_fixtures import TinyProvider

from vkprovider.config import GrpcPluginConfig
from vkprovider.plugins.api import Transient
from vkprovider.plugins.grpc import supervisor as supervisor_module
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.handshake import ADDRESS_ENV
from vkprovider.plugins.grpc.output import MAX_LINE_BYTES
from vkprovider.plugins.grpc.server import serve_adapter
from vkprovider.plugins.grpc.supervisor import PluginSupervisor

HERE = Path(__file__).parent


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


@pytest.fixture
async def closing() -> AsyncIterator[list[PluginSupervisor]]:
    """Supervisors to close after the test, whatever happens."""
    supervisors: list[PluginSupervisor] = []
    try:
        async with asyncio.timeout(60):
            yield supervisors
    finally:
        for supervisor in supervisors:
            await supervisor.close()


def supervisor(closing: list[PluginSupervisor], command: list[str], **kwargs: float) -> PluginSupervisor:
    config = GrpcPluginConfig(command=command, shutdown_grace_seconds=kwargs.pop("grace", 5.0))
    sup = PluginSupervisor("plug", config, env={"PYTHONPATH": str(HERE)}, **kwargs)  # type: ignore[arg-type]
    closing.append(sup)
    return sup


async def test_plugin_exiting_before_its_handshake_fails_fast_with_the_reason(
    closing: list[PluginSupervisor],
) -> None:
    sup = supervisor(closing, python("print('starting up'); raise SystemExit(3)"), backoff_initial=5)
    with pytest.raises(Transient, match=r"exited \(code 3\) before printing its handshake"):
        await GrpcProvider("plug", sup, call_timeout=30).probe()
    assert sup.restarts == 1


async def test_non_loopback_handshake_is_refused_and_the_process_stopped(
    closing: list[PluginSupervisor],
) -> None:
    code = "import time; print('vkprovider-plugin|1|10.1.2.3:5000', flush=True); time.sleep(600)"
    sup = supervisor(closing, python(code), backoff_initial=5)
    with pytest.raises(Transient, match="loopback"):
        await GrpcProvider("plug", sup, call_timeout=30).probe()
    assert sup.process is not None and sup.process.returncode is not None


async def test_plugin_ignoring_sigterm_is_killed_after_the_grace_period(
    closing: list[PluginSupervisor], tmp_path: Path
) -> None:
    code = f"""
        import asyncio, signal
        from plugin_fixtures import TinyProvider
        from vkprovider.plugins.grpc.server import serve_adapter
        async def main():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            server = await serve_adapter(TinyProvider("t", TinyProvider.Settings(url="u")), "unix:{tmp_path}/s.sock")
            print("vkprovider-plugin|1|" + server.address, flush=True)
            await asyncio.sleep(600)
        asyncio.run(main())
    """
    sup = supervisor(closing, python(code), grace=0.5)
    await sup.start()
    proc = sup.process
    assert proc is not None and sup.pid == proc.pid
    await sup.close()
    assert proc.returncode == -signal.SIGKILL
    assert sup.pid is None


async def test_plugin_serve_stops_cleanly_on_sigterm(closing: list[PluginSupervisor], tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text("url: http://example.invalid\n")
    command = [sys.executable, "-m", "vkprovider", "plugin", "serve", "plugin_fixtures:TinyProvider"]
    sup = supervisor(closing, [*command, "--config", str(config)])
    provider = GrpcProvider("plug", sup, call_timeout=30)
    info = await provider.info()
    assert (info.adapter, info.name) == ("tiny", "plug")
    proc = sup.process
    await provider.close()
    assert proc is not None and proc.returncode == 0


async def test_close_during_backoff_does_not_wait_it_out(closing: list[PluginSupervisor]) -> None:
    sup = supervisor(closing, python("raise SystemExit(1)"), backoff_initial=3600)
    with pytest.raises(Transient, match="restarting in"):
        await GrpcProvider("plug", sup, call_timeout=30).probe()
    async with asyncio.timeout(10):
        await sup.close()


def test_backoff_doubles_up_to_the_cap() -> None:
    config = GrpcPluginConfig(command=["x"])
    sup = PluginSupervisor("p", config, backoff_initial=0.5, backoff_max=3)
    assert [sup.backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    sup.backoff.reset()  # after a plugin stayed up for stable_seconds
    assert sup.backoff.next() == 0.5


async def test_plugin_sees_only_its_own_environment(
    closing: list[PluginSupervisor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VKPROVIDER_ADMIN_TOKEN", "host-secret")
    monkeypatch.setenv("RUNPOD_API_KEY", "other-providers-key")
    monkeypatch.setenv("VASTAI_API_KEY", "another-key")
    monkeypatch.setenv("MYCLOUD_API_KEY", "this-plugins-key")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    out = tmp_path / "env.json"
    code = (
        f"import json, os; open({str(out)!r}, 'w').write(json.dumps(dict(os.environ))); raise SystemExit(3)"
    )
    config = GrpcPluginConfig(command=python(code), pass_env=["MYCLOUD_API_KEY"])
    sup = PluginSupervisor("plug", config, env={"PLUGIN_MODE": "test"}, backoff_initial=5)
    closing.append(sup)
    with pytest.raises(Transient, match="exited"):
        await GrpcProvider("plug", sup, call_timeout=30).probe()
    seen = json.loads(out.read_text())
    assert not {"VKPROVIDER_ADMIN_TOKEN", "RUNPOD_API_KEY", "VASTAI_API_KEY"} & set(seen)
    assert seen["MYCLOUD_API_KEY"] == "this-plugins-key" and seen["PLUGIN_MODE"] == "test"
    assert seen["PATH"] == os.environ["PATH"] and seen["LC_ALL"] == "C.UTF-8"
    assert seen[ADDRESS_ENV].startswith("unix:")  # what the host gives it on purpose


async def test_sidecar_address_is_dialled_and_health_checked(closing: list[PluginSupervisor]) -> None:
    server = await serve_adapter(TinyProvider("t", TinyProvider.Settings(url="u")), "127.0.0.1:0")
    try:
        sup = PluginSupervisor("side", GrpcPluginConfig(address=server.address))
        closing.append(sup)
        await sup.start()
        assert (await GrpcProvider("side", sup).info()).adapter == "tiny"
    finally:
        await server.stop(0)
    with pytest.raises(Transient, match="not SERVING"):
        dead = PluginSupervisor("side", GrpcPluginConfig(address=server.address), start_timeout=0.5)
        closing.append(dead)
        await dead.start()


# ---- output that is not polite text: long lines, no newline, binary (issue 22, defect 2) ----

#: What a noisy plugin writes: two 1 MiB lines, binary with control bytes, a line with no end.
NOISE = """
    import os
    def noise(fd):
        os.write(fd, b"x" * (1 << 20) + b"\\n")
        os.write(fd, bytes(range(256)) + b"\\x1b[31mred\\n")
        os.write(fd, b"y" * (1 << 20) + b"\\n")
        os.write(fd, b"\\xff\\xfe no newline" * 1000)
"""


def noisy_plugin(tmp_path: Path, *, before: str = "", after: str = "") -> list[str]:
    """A TinyProvider plugin that runs ``before`` ahead of its handshake and ``after`` behind it."""
    return python(
        NOISE
        + f"""
    import asyncio
    from plugin_fixtures import TinyProvider
    from vkprovider.plugins.grpc.server import serve_adapter
    async def main():
        server = await serve_adapter(TinyProvider("t", TinyProvider.Settings(url="u")), "unix:{tmp_path}/s.sock")
        {before}
        os.write(1, b"\\nvkprovider-plugin|1|" + server.address.encode() + b"\\n")
        {after}
        await asyncio.sleep(600)
    asyncio.run(main())
    """
    )


def plugin_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("plugin plug: ")]


async def test_noise_before_the_handshake_neither_stops_the_start_nor_floods_the_log(
    closing: list[PluginSupervisor], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vkprovider.plugins.grpc.supervisor")
    command = noisy_plugin(tmp_path, before="noise(1); noise(2)")
    sup = supervisor(closing, command, backoff_initial=0.05)
    async with asyncio.timeout(30):
        assert (await GrpcProvider("plug", sup, call_timeout=30).info()).adapter == "tiny"
    assert sup.restarts == 0
    lines = plugin_lines(caplog)
    assert max(len(line) for line in lines) < 4 * MAX_LINE_BYTES + 100  # bounded (escapes are 4 chars)
    assert sum("[line truncated]" in line for line in lines) >= 4  # 2 long lines x stdout, stderr
    assert any(r"\x00\x01\x02" in line for line in lines)  # binary is escaped, not logged raw
    assert any(r"\x1b[31mred" in line for line in lines)  # a terminal escape too


async def test_plugin_killed_after_flooding_its_pipes_is_restarted(
    closing: list[PluginSupervisor], tmp_path: Path
) -> None:
    written = tmp_path / "written"
    after = f"noise(1); noise(2); noise(2); open({str(written)!r}, 'w').close()"
    sup = supervisor(closing, noisy_plugin(tmp_path, after=after), backoff_initial=0.05)
    provider = GrpcProvider("plug", sup, call_timeout=30)
    async with asyncio.timeout(30):
        await provider.info()
        while not written.exists():  # the plugin is never blocked on a full pipe
            await asyncio.sleep(0.05)
        first = sup.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        while True:  # the supervisor sees the exit and restarts it
            try:
                await provider.info()
            except Transient:
                await asyncio.sleep(0.05)
                continue
            if sup.pid != first:
                break
            await asyncio.sleep(0.05)
    assert sup.restarts == 1 and sup.pid is not None


async def test_an_unexpected_error_before_the_handshake_is_a_restart_not_the_end(
    closing: list[PluginSupervisor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, calls = supervisor_module.open_channel, []

    def failing_once(address: str) -> grpc.aio.Channel:
        calls.append(address)
        if len(calls) == 1:
            raise RuntimeError("injected")
        return real(address)

    monkeypatch.setattr(supervisor_module, "open_channel", failing_once)
    sup = supervisor(closing, noisy_plugin(tmp_path), backoff_initial=0.05)
    provider = GrpcProvider("plug", sup, call_timeout=30)
    async with asyncio.timeout(30):
        while True:
            try:
                assert (await provider.info()).adapter == "tiny"
                break
            except Transient as exc:
                assert "RuntimeError: injected" in str(exc)
                await asyncio.sleep(0.05)
    assert sup.restarts == 1 and len(calls) == 2
