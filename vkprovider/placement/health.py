"""Provider health: reachability, recent failure rate, billing disablement, circuit breaker.

Three separate signals, because they drive different behaviour:

* reachability (probes every 10 s from the node agent, and catalog refreshes): a provider whose
  last ``unreachable_after_failures`` probes/refreshes all failed is unreachable and gets no new
  pods (one failed call among successes is a flaky API, which the failure rate prices: with one
  failure enough, a provider failing 2 % of its calls was unusable for a probe period now and
  then, and a burst that came then went to a dearer provider and stayed there); when *every* provider has been unreachable or disabled for
  ``breaker_seconds`` the breaker opens and the node advertises zero GPUs plus the taint
  ``vkprovider.io/unavailable=true:NoSchedule``, instead of churning pods through failures;
* failure rate (deploy outcomes and preemptions in a sliding window): a score penalty only,
  so a flaky-but-cheap provider still wins if it is cheap enough;
* disablement after ``QuotaOrBilling``: until an operator calls :meth:`enable` or a probe
  succeeds at least ``quota_reenable_seconds`` after the disablement (an immediate probe
  success says nothing about the bill).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

TAINT_UNAVAILABLE = "vkprovider.io/unavailable"


@dataclass(slots=True)
class ProviderState:
    name: str
    failing_since: float | None = None  # None: last probe/refresh succeeded (or none yet)
    failed_in_a_row: int = 0  #: probes/refreshes failed since the last success
    last_error: str = ""
    last_ok: float | None = None
    disabled_since: float | None = None
    disabled_reason: str = ""
    events: deque[tuple[float, bool]] = field(default_factory=deque)  # (time, failed)
    failures: int = 0  #: how many of ``events`` failed (kept with it: a rate is O(1), not O(events))
    startup_ewma: float | None = None


class ProviderHealth:
    def __init__(
        self,
        names: Iterable[str] = (),
        *,
        breaker_seconds: float = 120.0,
        failure_window_seconds: float = 600.0,
        quota_reenable_seconds: float = 300.0,
        unreachable_after_failures: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.breaker_seconds = breaker_seconds
        self.unreachable_after_failures = unreachable_after_failures
        self.failure_window_seconds = failure_window_seconds
        self.quota_reenable_seconds = quota_reenable_seconds
        self._clock = clock
        self._states: dict[str, ProviderState] = {}
        #: Bumped on every change that can alter a score, so callers can cache derived terms.
        self.version = 0
        self._listeners: list[Callable[[str, bool], None]] = []
        for name in names:
            self.state(name)

    def state(self, name: str) -> ProviderState:
        state = self._states.get(name)
        if state is None:
            state = self._states[name] = ProviderState(name)
        return state

    @property
    def names(self) -> list[str]:
        return sorted(self._states)

    # Reachability -------------------------------------------------------------------------
    def subscribe(self, listener: Callable[[str, bool], None]) -> Callable[[], None]:
        """Call ``listener(name, reachable)`` when a provider's reachability flips; returns the
        unsubscribe function (a leadership term subscribes for its own lifetime only)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def record_probe(self, name: str, ok: bool, error: str | BaseException | None = None) -> None:
        """Called by the node agent every probe interval and by catalog refreshes."""
        now = self._clock()
        state = self.state(name)
        self.version += 1
        was_unreachable = self._unreachable(state)
        if ok:
            state.failing_since = None
            state.failed_in_a_row = 0
            state.last_ok = now
            if state.disabled_since is not None and now - state.disabled_since >= self.quota_reenable_seconds:
                self.enable(name)
        else:
            if state.failing_since is None:
                state.failing_since = now
            state.failed_in_a_row += 1
            state.last_error = str(error) if error is not None else "probe failed"
        if was_unreachable != self._unreachable(state):  # flipped
            for listener in list(self._listeners):
                listener(name, ok)

    def unreachable(self, name: str) -> bool:
        """Whether placement gives the provider no new pods for unreachability now (the node's
        ProvidersReachable condition says the same, so an operator and a test read one verdict)."""
        state = self._states.get(name)
        return state is not None and self._unreachable(state)

    def _unreachable(self, state: ProviderState) -> bool:
        return state.failed_in_a_row >= self.unreachable_after_failures

    # Disablement ---------------------------------------------------------------------------
    def disable(self, name: str, reason: str) -> None:
        self.version += 1
        state = self.state(name)
        if state.disabled_since is None:
            state.disabled_since = self._clock()
        state.disabled_reason = reason

    def enable(self, name: str) -> None:
        """Operator action (or a late probe success): use the provider again."""
        self.version += 1
        state = self.state(name)
        state.disabled_since = None
        state.disabled_reason = ""

    def disabled(self, name: str) -> bool:
        state = self._states.get(name)
        return state is not None and state.disabled_since is not None

    def unusable_reason(self, name: str) -> tuple[str, str] | None:
        """``(code, reason)`` if the provider must get no new pods now, else ``None``."""
        state = self._states.get(name)
        if state is None:
            return None
        if state.disabled_since is not None:
            return ("disabled", f"provider disabled: {state.disabled_reason}")
        if self._unreachable(state):
            return ("unhealthy", f"provider unreachable: {state.last_error}")
        return None

    # Failure rate ------------------------------------------------------------------------
    def record_call(self, name: str, ok: bool) -> None:
        """A deploy outcome; failures raise the provider's score penalty for a while."""
        self._event(name, not ok)

    def record_preemption(self, name: str) -> None:
        """A running deployment was preempted or lost (reported by the pod controller)."""
        self._event(name, True)

    def record_startup(self, name: str, seconds: float) -> None:
        """Observed time from deploy to Running; smooths into the start-up latency estimate."""
        self.version += 1
        state = self.state(name)
        prev = state.startup_ewma
        state.startup_ewma = seconds if prev is None else 0.7 * prev + 0.3 * seconds

    def _event(self, name: str, failed: bool) -> None:
        self.version += 1
        state = self.state(name)
        now = self._clock()
        state.events.append((now, failed))
        state.failures += failed
        self._trim(state, now)

    def _trim(self, state: ProviderState, now: float) -> None:
        horizon = now - self.failure_window_seconds
        while state.events and state.events[0][0] < horizon:
            state.failures -= state.events.popleft()[1]

    def failure_rate(self, name: str) -> float:
        state = self._states.get(name)
        if state is None or not state.events:
            return 0.0
        self._trim(state, self._clock())
        if not state.events:
            return 0.0
        return state.failures / len(state.events)

    def startup_seconds(self, name: str) -> float | None:
        state = self._states.get(name)
        return None if state is None else state.startup_ewma

    # Circuit breaker ---------------------------------------------------------------------
    def breaker_open(self, now: float | None = None) -> bool:
        """True when every known provider has been failing or disabled for ``breaker_seconds``."""
        if not self._states:
            return False
        now = self._clock() if now is None else now
        for state in self._states.values():
            since = state.failing_since
            if state.disabled_since is not None:
                since = state.disabled_since if since is None else min(since, state.disabled_since)
            if since is None or now - since < self.breaker_seconds:
                return False
        return True

    def summary(self) -> dict[str, dict[str, object]]:
        """A JSON-able view for the admin API and explain output."""
        return {
            name: {
                "reachable": not self._unreachable(s),
                "disabled": s.disabled_since is not None,
                "disabled_reason": s.disabled_reason,
                "last_error": s.last_error,
                "failure_rate": round(self.failure_rate(name), 3),
            }
            for name, s in sorted(self._states.items())
        }
