"""Running fakecloud: in-process for tests (``running_fakecloud``) and as the CLI's server.

uvicorn binds a socket we create, so ``port=0`` picks a free port and the URL is known before the
first request. The in-process server never touches signal handlers (the test runner owns them) and
shuts down with a short grace period so hanging requests and open streams cannot stall a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Generator

import uvicorn

from .app import create_app
from .config import FakeCloudConfig, load_config
from .replicas import ReplicaServers, replica_servers
from .state import Store

__all__ = ["FakeCloudServer", "create_app", "load_config", "running_fakecloud", "serve"]


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this; without it Nagle + delayed ACK add ~40 ms per response.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


class FakeCloudServer:
    """One fakecloud instance on 127.0.0.1; ``store`` gives tests direct access to its state."""

    def __init__(
        self,
        config: FakeCloudConfig,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Callable[[], float] | None = None,
        graceful_shutdown_seconds: int = 1,
    ) -> None:
        self._socket = _bind(host, port)
        self.port: int = self._socket.getsockname()[1]
        self.store = Store(config, clock, port=self.port) if clock else Store(config, port=self.port)
        self.app = create_app(config, store=self.store)
        self.url = f"http://{host}:{self.port}"
        uv_config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=max(1, graceful_shutdown_seconds),
        )
        self._server = _QuietServer(uv_config)
        self._task: asyncio.Task[None] | None = None
        self._replicas = contextlib.AsyncExitStack()
        #: the deployments' listeners, when the config names ``serve_netns`` (replicas.py)
        self.replicas: ReplicaServers | None = None

    async def start(self, timeout: float = 10.0) -> str:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        async with asyncio.timeout(timeout):
            while not self._server.started:
                if self._task.done():
                    self._task.result()
                    raise RuntimeError("fakecloud server exited during startup")
                await asyncio.sleep(0.01)
        self.replicas = await self._replicas.enter_async_context(replica_servers(self.store))
        return self.url

    async def stop(self, timeout: float = 10.0) -> None:
        await self._replicas.aclose()
        if self._task is None:
            return
        self._server.should_exit = True
        try:
            async with asyncio.timeout(timeout):
                await self._task
        except TimeoutError:
            self._server.force_exit = True
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        finally:
            self._task = None
            self._socket.close()


@contextlib.asynccontextmanager
async def running_fakecloud(
    config: FakeCloudConfig, *, clock: Callable[[], float] | None = None, port: int = 0
) -> AsyncIterator[FakeCloudServer]:
    """``async with running_fakecloud(cfg) as server: httpx.get(server.url + "/v1/offers")``."""
    server = FakeCloudServer(config, clock=clock, port=port)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def serve(config: FakeCloudConfig, *, host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve until SIGINT/SIGTERM (for the CLI); prints the listening line scripts parse."""
    sock = _bind(host, port)
    actual = sock.getsockname()[1]
    store = Store(config, port=actual)
    app = create_app(config, store=store)
    uv_config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(uv_config)

    async def main() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if server.started:
            print(f"fakecloud listening on http://{host}:{actual}", flush=True)
        async with replica_servers(store):
            await task

    try:
        asyncio.run(main())
    finally:
        sock.close()
