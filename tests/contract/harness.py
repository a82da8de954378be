"""The harness interface: how an adapter plugs into the contract suite.

Each adapter contributes ``tests/contract/harness_<adapter>.py`` defining::

    @asynccontextmanager
    async def harness(tmp_path: Path) -> AsyncIterator[Harness]: ...

which starts the adapter's backend (fake server, respx router, second cluster, ...) and yields a
:class:`Harness`. The suite builds the provider itself from ``adapter`` + ``settings()`` in three
variants: in-process, over gRPC through ``serve_adapter`` on a unix socket, and through the
plugin supervisor running ``vkprovider plugin serve`` as a real subprocess. Knobs act on the
*backend*, never on the adapter object, so they work for every variant. A knob that an adapter
cannot offer raises ``NotImplementedError`` (the default) and the tests that need it are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
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

    #: Entry-point name (``fakecloud``) or ``module:Class`` importable in a subprocess too.
    adapter: str = ""
    #: True if the backend lives outside the adapter's process (a server, files), so knobs reach a
    #: plugin subprocess as well; otherwise the subprocess variant is skipped for this adapter.
    shared_backend: bool = False
    #: Extra PYTHONPATH entries the plugin subprocess needs to import ``adapter``.
    pythonpath: tuple[str, ...] = ()

    def settings(self) -> dict[str, Any]:
        """Settings for one provider instance talking to the started backend."""
        raise NotImplementedError

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
