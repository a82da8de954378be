"""The capacity signal: one small interface, two implementations (``kube``, ``prometheus``).

A reading is the number of free local GPUs. A signal that cannot give a trustworthy number
raises :class:`SignalUnavailable` with a ``kind`` (for the error metric) and a message naming
what failed; the decision fails toward serving after ``signal_timeout_seconds``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class SignalUnavailable(Exception):
    """No trustworthy reading right now; ``kind`` labels the error metric."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Reading:
    free_gpus: float
    #: pods Pending with a nominated node: a preemption in progress (never taint meanwhile)
    preempting: int = 0
    detail: dict[str, float] = field(default_factory=dict)  #: e.g. free GPUs per node


class Signal(Protocol):
    kind: str

    async def start(self) -> None:
        """Validate at start-up (raise ``ConfigError`` naming the bad field or query)."""

    async def read(self) -> Reading: ...

    async def close(self) -> None: ...
