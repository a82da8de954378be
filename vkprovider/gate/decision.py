"""The gate's decision, pure and clock-injected so hysteresis is unit-tested with a fake clock.

* taint when free ≥ ``taint_at`` has held for ``dwell_seconds``, no preemption is in progress
  and no burstable pod is stuck Pending, and ``min_flip_interval_seconds`` has passed;
* untaint when free < ``untaint_below`` (after the minimum interval), and **at once** when pods
  that would run on the virtual node are Pending unschedulable (local capacity is gone, and
  they are what the taint keeps out);
* signal unavailable for longer than ``signal_timeout_seconds`` → untaint at once: fail toward
  keeping production serving.

``untaint_below ≤ taint_at`` makes a band: a reading between the two changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from vkprovider.gate.config import GateConfig


class Action(Enum):
    HOLD = "hold"
    TAINT = "taint"
    UNTAINT = "untaint"


@dataclass(frozen=True)
class Observation:
    now: float  #: monotonic seconds
    free_gpus: float | None  #: None: the signal is unavailable
    error: str = ""  #: why the signal is unavailable
    preempting: int = 0  #: pods Pending with a nominated local node
    pending_unschedulable: int = 0  #: pods that tolerate the virtual node, stuck Pending
    #: what ``free_gpus`` counts, for messages: raw free GPUs, or (while replicas are out) the GPUs
    #: of the return wave that fits locally (``gate.wave.Plan.units``), which is not the same figure
    measure: str = "free local GPUs"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str  #: Event reason / log keyword
    message: str


class Decider:
    """Remembers the state the hysteresis needs; ``tainted`` mirrors the node (set by the loop)."""

    def __init__(self, config: GateConfig) -> None:
        self.config = config
        self.tainted: bool | None = None
        self.last_flip_at: float | None = None
        self.above_since: float | None = None
        self.failing_since: float | None = None

    def _thresholds(self) -> str:
        c = self.config
        return f"taint at >= {c.taint_at_free_gpus}, untaint below {c.untaint_below_free_gpus}"

    def _interval_ok(self, now: float) -> bool:
        last = self.last_flip_at
        return last is None or now - last >= self.config.min_flip_interval_seconds

    def decide(self, obs: Observation) -> Decision:
        c = self.config
        if obs.free_gpus is None:
            self.above_since = None
            if self.failing_since is None:
                self.failing_since = obs.now
            down = obs.now - self.failing_since
            if self.tainted and down >= c.signal_timeout_seconds:
                return Decision(
                    Action.UNTAINT,
                    "SignalUnavailable",
                    f"capacity signal unavailable for {down:.0f}s (timeout {c.signal_timeout_seconds:.0f}s): "
                    f"{obs.error}; removing the taint so pods may burst out",
                )
            return Decision(
                Action.HOLD, "SignalUnavailable", f"signal unavailable for {down:.0f}s: {obs.error}"
            )
        self.failing_since = None
        free = obs.free_gpus
        reading = f"{free:g} {obs.measure} ({self._thresholds()})"
        if self.tainted:
            self.above_since = None
            if c.untaint_on_pending and obs.pending_unschedulable:
                return Decision(
                    Action.UNTAINT,
                    "LocalCapacityExhausted",
                    f"{obs.pending_unschedulable} pod(s) that tolerate the virtual node are Pending "
                    f"unschedulable; {reading}",
                )
            if free < c.untaint_below_free_gpus and self._interval_ok(obs.now):
                return Decision(Action.UNTAINT, "LocalCapacityExhausted", reading)
            return Decision(Action.HOLD, "Tainted", reading)
        blocked = ""
        if obs.preempting:
            blocked = f"{obs.preempting} pod(s) preempting on local nodes"
        elif obs.pending_unschedulable and c.untaint_on_pending:
            blocked = f"{obs.pending_unschedulable} pod(s) Pending unschedulable"
        if free < c.taint_at_free_gpus or blocked:
            self.above_since = None
            return Decision(Action.HOLD, "Untainted", f"{reading}{'; ' + blocked if blocked else ''}")
        if self.above_since is None:
            self.above_since = obs.now
        held = obs.now - self.above_since
        if held >= c.dwell_seconds and self._interval_ok(obs.now):
            return Decision(Action.TAINT, "LocalCapacityAvailable", f"{reading}, held for {held:.0f}s")
        return Decision(
            Action.HOLD, "Untainted", f"{reading}, held for {held:.0f}s of {c.dwell_seconds:.0f}s"
        )

    def flipped(self, tainted: bool, now: float) -> None:
        """Record a write (or, in dry-run, what would have been written)."""
        self.tainted = tainted
        self.last_flip_at = now
        self.above_since = None
