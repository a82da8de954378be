"""Run an out-of-process plugin: launch, handshake, health, restart with backoff, graceful stop.

Command mode: start ``config.command``, read the handshake line (``handshake.py``) from its
stdout, dial the address, wait for the standard health service to report SERVING. If the process
exits (or stops answering health checks) it is restarted after an exponential backoff; the backoff
resets once a plugin has stayed up for ``stable_seconds``. Callers never hang on a dead plugin:
an RPC in flight fails with UNAVAILABLE as the socket closes (``Transient``), and ``channel()``
waits for a restart only within the caller's deadline, or fails at once while in backoff.
Shutdown sends SIGTERM, waits ``shutdown_grace_seconds``, then SIGKILL, always to the PID we
started, never by name. Address mode: dial ``config.address`` (a sidecar someone else runs).

The plugin's output can never stop supervision: stdout and stderr are pipes of our own read by
``output.py`` (any bytes, bounded log lines; the process's exit never waits on them), and any
error in a launch, before or after the handshake, ends only that launch: the process is stopped
and restarted after the backoff.

The plugin does not inherit the host's environment, which holds every other provider's API key:
it gets only what a process needs to run (:data:`BASE_ENV`, ``LC_*``, ``PYTHON*``), the host
variables its config names in ``pass_env``, and the explicit ``env`` the host passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import grpc

from vkprovider.errors import Transient
from vkprovider.plugins.grpc.channel import AddressChannel, check_health, open_channel
from vkprovider.plugins.grpc.handshake import ADDRESS_ENV, HandshakeError, is_handshake, parse_handshake
from vkprovider.plugins.grpc.output import OutputPipe, Throttle, open_output
from vkprovider.retry import Backoff

log = logging.getLogger(__name__)

#: Host variables every plugin gets: enough to find programs, decode text and write temp files.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "VIRTUAL_ENV")
BASE_PREFIXES = ("LC_", "PYTHON")
#: How long the output of a plugin that exited is still read (its last words, e.g. a traceback).
DRAIN_SECONDS = 1.0


def plugin_environment(
    host: Mapping[str, str], pass_env: list[str] | tuple[str, ...], extra: Mapping[str, str]
) -> dict[str, str]:
    """The plugin's environment: the base set and ``pass_env`` names from ``host``, then ``extra``."""
    wanted = set(BASE_ENV) | set(pass_env)
    env = {k: v for k, v in host.items() if k in wanted or k.startswith(BASE_PREFIXES)}
    return {**env, **extra}


class PluginSpec(Protocol):
    """What the supervisor reads from ``vkprovider.config.GrpcPluginConfig``.

    A structural type, because ``vkprovider.config`` sits above this layer (it imports placement).
    """

    @property
    def command(self) -> list[str] | None: ...
    @property
    def address(self) -> str | None: ...
    @property
    def call_timeout_seconds(self) -> float: ...
    @property
    def shutdown_grace_seconds(self) -> float: ...
    @property
    def pass_env(self) -> list[str]: ...


class PluginStartError(Exception):
    """The plugin did not print a valid handshake or never became healthy."""


class PluginSupervisor:
    """A :class:`~vkprovider.plugins.grpc.channel.ChannelSource` that owns the plugin process."""

    def __init__(
        self,
        name: str,
        config: PluginSpec,
        *,
        start_timeout: float = 15.0,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
        stable_seconds: float = 30.0,
        health_interval: float = 10.0,
        health_failures: int = 3,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.start_timeout = start_timeout
        self.backoff = Backoff(backoff_initial, backoff_max)
        self.stable_seconds = stable_seconds
        self.health_interval = health_interval
        self.health_failures = health_failures
        self.env = dict(env or {})
        self.restarts = 0
        self.process: asyncio.subprocess.Process | None = None
        self._address_channel = AddressChannel(config.address) if config.address else None
        self._channel: grpc.aio.Channel | None = None
        self._serving = False
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.backoff_until = 0.0
        self._last_error = ""
        #: the command itself could not be executed (e.g. no such binary) on the last try
        self._cannot_run = False
        self._sockdir: str | None = None
        self._pipes: list[OutputPipe] = []

    @property
    def pid(self) -> int | None:
        proc = self.process
        return proc.pid if proc is not None and proc.returncode is None else None

    async def start(self) -> None:
        """Start supervising (idempotent) and wait until the plugin is healthy or start fails."""
        if self._address_channel is not None:
            channel = await self._address_channel.channel()
            if not await check_health(channel, self.start_timeout):
                raise Transient(f"plugin at {self.config.address} is not SERVING", provider=self.name)
            return
        await self.channel()

    async def channel(self) -> grpc.aio.Channel:
        if self._address_channel is not None:
            return await self._address_channel.channel()
        if self._task is None and not self._stopping:
            self._task = asyncio.create_task(self._supervise(), name=f"plugin-supervisor-{self.name}")
        loop = asyncio.get_running_loop()
        while True:
            changed = self._changed
            if self._stopping:
                raise Transient("plugin is shutting down", provider=self.name)
            if self._channel is not None and self._serving:
                return self._channel
            if self._cannot_run:  # a missing binary stays missing: no restart to promise
                raise Transient(f"plugin cannot start: {self._last_error}", provider=self.name)
            if loop.time() < self.backoff_until:
                wait = self.backoff_until - loop.time()
                raise Transient(
                    f"plugin is down ({self._last_error}); restarting in {wait:.1f}s", provider=self.name
                )
            await changed.wait()

    def _notify(self) -> None:
        """Wake every ``channel()`` waiter to re-read the state."""
        self._changed.set()
        self._changed = asyncio.Event()

    # ---- the supervision loop --------------------------------------------------------------

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        self._sockdir = tempfile.mkdtemp(prefix="vkp-")
        while not self._stopping:
            started = loop.time()
            try:
                await self._launch()
                await self._run_until_exit()
            except PluginStartError as exc:
                self._last_error = str(exc)
                log.error("plugin %s failed to start: %s", self.name, exc, extra={"provider": self.name})
            except Exception as exc:  # a bug or an OS error must not end supervision: restart
                self._last_error = f"{type(exc).__name__}: {exc}"
                log.exception("plugin %s: supervision error", self.name, extra={"provider": self.name})
            finally:
                self._serving = False
                await self._drop_channel()
                await self._terminate()
                await self._close_pipes()
            if self._stopping:
                break
            if loop.time() - started >= self.stable_seconds:
                self.backoff.reset()
            delay = self.backoff.next()
            self.restarts += 1
            self.backoff_until = loop.time() + delay
            self._notify()
            log.warning(
                "plugin %s is down (%s); restart %d in %.1fs",
                self.name,
                self._last_error,
                self.restarts,
                delay,
                extra={"provider": self.name},
            )
            await asyncio.sleep(delay)

    async def _launch(self) -> None:
        assert self.config.command and self._sockdir is not None
        suggested = f"unix:{Path(self._sockdir) / f'plugin-{self.restarts}.sock'}"
        env = plugin_environment(
            os.environ, self.config.pass_env, {**self.env, ADDRESS_ENV: suggested, "PYTHONUNBUFFERED": "1"}
        )
        handshake: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        info = Throttle(
            lambda line: log.info("plugin %s: %s", self.name, line, extra={"provider": self.name})
        )
        warning = Throttle(
            lambda line: log.warning("plugin %s: %s", self.name, line, extra={"provider": self.name})
        )

        def on_stdout(line: str) -> None:
            if not handshake.done() and is_handshake(line):  # never throttled away
                handshake.set_result(line)
            else:
                info(line)

        out_fd, stdout = await open_output(on_stdout)
        self._pipes.append(stdout)
        try:
            err_fd, stderr = await open_output(warning)
        except BaseException:
            os.close(out_fd)
            raise
        self._pipes.append(stderr)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.config.command, stdin=asyncio.subprocess.DEVNULL, stdout=out_fd, stderr=err_fd, env=env
            )
        except OSError as exc:
            self._cannot_run = True
            raise PluginStartError(f"cannot run {self.config.command[0]!r}: {exc}") from None
        finally:  # the child has its copies; ours would keep the pipes open after it exits
            os.close(out_fd)
            os.close(err_fd)
        self._cannot_run = False
        self.process = proc
        try:
            async with asyncio.timeout(self.start_timeout):
                address = await self._read_handshake(handshake, stdout)
                channel = open_channel(address)
                self._channel = channel
                while not await check_health(channel, timeout=1.0):
                    if proc.returncode is not None:
                        raise PluginStartError(f"plugin exited with code {proc.returncode}")
        except TimeoutError:
            raise PluginStartError(
                f"no handshake and healthy server within {self.start_timeout:g}s"
            ) from None
        log.info(
            "plugin %s serving at %s (pid %d)", self.name, address, proc.pid, extra={"provider": self.name}
        )
        self._serving = True
        self._notify()

    async def _read_handshake(self, handshake: asyncio.Future[str], stdout: OutputPipe) -> str:
        """The address from the handshake line; earlier stdout lines are logged by ``on_stdout``."""
        either: list[asyncio.Future[Any]] = [handshake, stdout.closed]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not handshake.done():  # stdout closed first: the plugin exited (or closed it)
            code = await self.process.wait() if self.process else None
            raise PluginStartError(f"plugin exited (code {code}) before printing its handshake")
        try:
            return parse_handshake(handshake.result()).address
        except HandshakeError as exc:
            raise PluginStartError(str(exc)) from None

    async def _run_until_exit(self) -> None:
        """Wait for the process to exit; kill it if it stops answering health checks."""
        proc, channel = self.process, self._channel
        assert proc is not None and channel is not None
        exited = asyncio.ensure_future(proc.wait())
        failures = 0
        try:
            while True:
                done, _ = await asyncio.wait({exited}, timeout=self.health_interval)
                if done:
                    self._last_error = f"exited with code {proc.returncode}"
                    return
                healthy = await check_health(channel, timeout=min(self.health_interval, 5.0))
                failures = 0 if healthy else failures + 1
                if failures >= self.health_failures:
                    self._last_error = f"failed {failures} health checks"
                    log.error("plugin %s is unhealthy; killing pid %d", self.name, proc.pid)
                    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                        proc.kill()
        finally:
            exited.cancel()

    async def _close_pipes(self, drain_seconds: float = DRAIN_SECONDS) -> None:
        """Close the output pipes of the last launch, after reading what the plugin left in them."""
        pipes, self._pipes = self._pipes, []
        for pipe in pipes:
            await pipe.aclose(drain_seconds)

    async def _drop_channel(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close(None)

    async def _terminate(self) -> None:
        """SIGTERM, wait the grace period, SIGKILL: always by our own PID."""
        proc = self.process
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            async with asyncio.timeout(self.config.shutdown_grace_seconds):
                await proc.wait()
                return
        except TimeoutError:
            log.warning("plugin %s ignored SIGTERM; killing pid %d", self.name, proc.pid)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()

    async def close(self) -> None:
        """Stop the plugin (graceful, then forced) and stop supervising."""
        self._stopping = True
        self._notify()
        if self._address_channel is not None:
            await self._address_channel.close()
            return
        await self._terminate()
        if self._task is not None:
            self._task.cancel()  # it may be waiting out a backoff or a handshake
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            await self._terminate()
        await self._close_pipes(drain_seconds=0)
        if self._sockdir is not None:
            shutil.rmtree(self._sockdir, ignore_errors=True)
