"""Refusals to one peer are paced once its free ones are spent; other peers and time restore
them; the peer table is bounded. A fake clock: nothing waits for real."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.unit.http.test_review_budget import HeldReviews, bearer, ok
from vkprovider.http.auth import Authenticator, AuthMiddleware
from vkprovider.http.pacing import RefusalPacer
from vkprovider.http.server import AsgiServer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def test_free_refusals_then_paced_up_to_the_cap_and_restored_by_time() -> None:
    clock = Clock()
    pacer = RefusalPacer(free=3, refill=2.0, max_delay=5.0, clock=clock)
    assert [pacer.delay("10.0.0.1") for _ in range(3)] == [0.0, 0.0, 0.0]
    delays = [pacer.delay("10.0.0.1") for _ in range(20)]
    assert delays[0] == 0.5 and delays == sorted(delays) and max(delays) == 5.0
    assert pacer.delay("10.0.0.2") == 0.0  # another peer has its own credit
    clock.now += 60  # time earns the credit back (up to ``free``)
    assert [pacer.delay("10.0.0.1") for _ in range(3)] == [0.0, 0.0, 0.0]


def test_the_peer_table_is_bounded() -> None:
    pacer = RefusalPacer(free=1, peers=100, clock=Clock())
    for i in range(1000):
        pacer.delay(f"10.0.{i // 256}.{i % 256}")
    assert len(pacer._credit) == 100


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, Clock, Authenticator]]:
    reviews = HeldReviews()
    reviews.release.set()
    clock = Clock()
    auth = Authenticator(reviews, "vk", pacer=RefusalPacer(free=5, clock=clock, sleep=clock.sleep))
    server = AsgiServer(AuthMiddleware(ok, auth), "127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", clock, auth
    finally:
        await server.stop()


async def test_a_peer_that_keeps_sending_bad_tokens_gets_paced_answers(
    served: tuple[str, Clock, Authenticator],
) -> None:
    url, clock, auth = served
    async with httpx.AsyncClient(base_url=url) as http:
        for _ in range(15):
            resp = await http.get("/stats", headers=bearer(secrets.token_hex(16)))
            assert resp.status_code == 401
    assert auth.pacer.paced == 10 and len(clock.slept) == 10 and all(s > 0 for s in clock.slept)
