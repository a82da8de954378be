"""The harness interface: how an adapter plugs into the contract suite.

An author writes a factory::

    @asynccontextmanager
    async def harness(tmp_path: Path) -> AsyncIterator[Harness]: ...

which starts the adapter's backend (fake server, respx router, second cluster, ...) and yields a
:class:`Harness`, and names it with ``--vkprovider-harness=module:harness``. The suite builds the
provider itself from ``adapter`` + ``settings()`` in three variants: in-process, over gRPC
through ``serve_adapter`` on a unix socket, and through the real plugin supervisor running
:meth:`Harness.plugin_command` as a subprocess. Knobs act on the *backend*, never on the adapter
object, so they work for every variant. A knob that an adapter cannot offer raises
``NotImplementedError`` (the default) and the tests that need it are skipped.

A backend that patches the test process itself (a respx router patches httpx for every client
in the process) must not be left started for the session: the harness is session-scoped, and a
router with a catch-all route would answer, or pass to the real network, every other test's
requests. Such a harness starts it in :meth:`Harness.active`, which the suite enters around each
test that uses the harness, instead of in its factory.

A plugin in another language (Go, Rust, Node, ...) sets ``adapter = ""`` and overrides
:meth:`Harness.plugin_command` to return its own ``[binary, args...]``: only the subprocess
variant runs, through the same supervisor the service uses, against the same tests.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vkprovider.plugins.api import Container, DeploymentRequest, Phase, ProviderError

Op = Literal["probe", "offers", "deploy", "get", "list", "delete"]


@dataclass(frozen=True)
class DelayStats:
    """Calls that hit a ``delay`` knob: how many started waiting, how many were cancelled."""

    started: int
    cancelled: int | None  # None: the backend cannot tell


class Harness:
    """Base class for harnesses; override ``adapter``, ``settings`` and the knobs you can offer."""

    #: Entry-point name (``fakecloud``) or ``module:Class`` importable in a subprocess too; empty
    #: for a plugin that is not a Python adapter (then only the subprocess variant runs).
    adapter: str = ""
    #: True if the backend lives outside the adapter's process (a server, files), so knobs reach a
    #: plugin subprocess as well; otherwise the subprocess variant is skipped for this adapter.
    shared_backend: bool = False
    #: Extra PYTHONPATH entries the plugin subprocess needs to import ``adapter``.
    pythonpath: tuple[str, ...] = ()

    def settings(self) -> dict[str, Any]:
        """Settings for one provider instance talking to the started backend."""
        raise NotImplementedError

    def plugin_command(self, name: str, config_file: Path) -> list[str]:
        """The plugin process for the subprocess variant: ``[binary, args...]``.

        ``config_file`` holds ``settings()`` as JSON; ``name`` is the provider instance name the
        plugin must report (``ProviderInfo.name``) and put on its errors. The process speaks the
        plugin protocol (docs/plugin-guide.md): handshake line on stdout, health service,
        graceful stop on SIGTERM. The default serves the Python ``adapter``.
        """
        if not self.adapter:
            raise NotImplementedError("set adapter or override plugin_command")
        serve = ["plugin", "serve", self.adapter, "--config", str(config_file), "--name", name]
        return [sys.executable, "-m", "vkprovider", *serve]

    def active(self) -> contextlib.AbstractContextManager[object]:
        """Process-wide state the backend needs only while a test runs (e.g. a started respx
        router), entered around each test that uses the harness. Default: nothing."""
        return contextlib.nullcontext()

    def plugin_env(self) -> dict[str, str]:
        """Extra environment for the plugin process (it does not inherit the test's environment)."""
        return {}

    def request(self, uid: str, node_name: str) -> DeploymentRequest:
        """A request this backend can satisfy (override to pick a GPU type/offer it has)."""
        return DeploymentRequest(
            uid=uid,
            namespace="default",
            name=f"pod-{uid[:8]}",
            node_name=node_name,
            containers=[Container(name="main", image="ghcr.io/example/infer:1")],
            gpu_count=1,
        )

    async def fail_next(self, op: Op, error: ProviderError) -> None:
        """Make the next ``op`` call fail with ``error`` (class, message, ``retry_after``)."""
        raise NotImplementedError

    async def delay(self, op: Op, seconds: float) -> None:
        """Make every ``op`` call take ``seconds`` before doing anything (0 turns it off)."""
        raise NotImplementedError

    async def delay_stats(self, op: Op) -> DelayStats:
        """Counters for calls held by ``delay``."""
        raise NotImplementedError

    async def advance(self, uid: str, phase: Phase) -> None:
        """Move the deployment to ``phase`` in the backend (as the cloud would by itself)."""
        raise NotImplementedError
