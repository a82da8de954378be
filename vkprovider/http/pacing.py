"""Pace the answers to a peer that keeps being refused (401, 429), as a login form does.

A client without credentials on a keep-alive connection sends its next random token the moment
it has the answer, so the answers' speed sets the flood's rate, and with it the CPU the process
spends refusing. Each peer address gets ``free`` refusals at full speed, earning one more back
every ``1/refill`` seconds; past them, each refusal is answered only after the time it would take
to earn one back (at most ``max_delay``). A caller with valid credentials is never slowed (only
refusals wait), and the apiserver authenticates with its client certificate, which is never
refused here. The table of peers is bounded: the least recently refused are forgotten first.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable

from vkprovider.retry import Sleep


class RefusalPacer:
    """``await pacer.refused(peer)`` before answering a refusal to ``peer``."""

    def __init__(
        self,
        *,
        free: float = 20.0,
        refill: float = 2.0,
        max_delay: float = 5.0,
        peers: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.free, self.refill, self.max_delay, self.peers = free, refill, max_delay, peers
        self._clock, self._sleep = clock, sleep
        #: peer → (credit, stamp): refusals it may still get at full speed (negative: in debt)
        self._credit: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self.paced = 0  #: refusals that waited (figures, tests)

    def delay(self, peer: str) -> float:
        """Charge one refusal to ``peer``; the seconds its answer should wait (0: none)."""
        now = self._clock()
        credit, stamp = self._credit.pop(peer, (self.free, now))
        credit = min(self.free, credit + (now - stamp) * self.refill) - 1.0
        # A peer in debt past max_delay stays there: waiting is all it gets, not a growing bill.
        credit = max(credit, -self.max_delay * self.refill)
        self._credit[peer] = (credit, now)
        while len(self._credit) > self.peers:
            self._credit.popitem(last=False)
        return 0.0 if credit >= 0 else min(self.max_delay, -credit / self.refill)

    async def refused(self, peer: str) -> None:
        wait = self.delay(peer)
        if wait > 0:
            self.paced += 1
            await self._sleep(wait)
