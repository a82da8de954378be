"""Reviews in flight are bounded (429 with Retry-After at once past the bound), concurrent
reviews of one token hash are one apiserver call, and a failed review tells an unauthenticated
caller nothing about the apiserver. Through a real server (``AsgiServer`` on 127.0.0.1) and the
real middleware; only the apiserver's review API is played (``HeldReviews``)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from vkprovider.http.auth import Authenticator, AuthMiddleware
from vkprovider.http.reviews import Busy, ReviewBudget
from vkprovider.http.server import AsgiServer
from vkprovider.kube.errors import KubeUnavailable

LIMIT = 4


class HeldReviews:
    """A review API that holds every TokenReview until ``release`` is set (a slow apiserver)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.token_reviews = 0
        self.fail: Exception | None = None

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        if body["kind"] == "TokenReview":
            self.token_reviews += 1
            await self.release.wait()
            if self.fail is not None:
                raise self.fail
            return {"status": {"authenticated": False}}
        return {"status": {"allowed": False}}


async def ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, HeldReviews, Authenticator]]:
    reviews = HeldReviews()
    auth = Authenticator(reviews, "vk", budget=ReviewBudget(LIMIT))
    server = AsgiServer(AuthMiddleware(ok, auth), "127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", reviews, auth
    finally:
        reviews.release.set()
        await server.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_past_the_bound_reviews_are_refused_at_once_with_retry_after(
    served: tuple[str, HeldReviews, Authenticator],
) -> None:
    url, reviews, auth = served
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        held = [
            asyncio.create_task(http.get("/stats", headers=bearer(secrets.token_hex(16))))
            for _ in range(LIMIT)
        ]
        while reviews.token_reviews < LIMIT:
            await asyncio.sleep(0.01)
        # Every slot is held by the slow apiserver; more random tokens are answered now, 429.
        for _ in range(20):
            resp = await http.get("/stats", headers=bearer(secrets.token_hex(16)))
            assert resp.status_code == 429 and resp.headers["retry-after"] == "1"
        assert reviews.token_reviews == LIMIT and auth.budget.rejected == 20
        assert not any(task.done() for task in held)
        reviews.release.set()
        assert [r.status_code for r in await asyncio.gather(*held)] == [401] * LIMIT
        assert auth.budget.in_flight == 0
        # Slots are free again: the next unknown token is reviewed (and rejected), not refused.
        assert (await http.get("/stats", headers=bearer(secrets.token_hex(16)))).status_code == 401


async def test_concurrent_reviews_of_one_token_are_one_apiserver_call(
    served: tuple[str, HeldReviews, Authenticator],
) -> None:
    url, reviews, auth = served
    token = secrets.token_hex(16)
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        same = [asyncio.create_task(http.get("/stats", headers=bearer(token))) for _ in range(3 * LIMIT)]
        # The first request's review reaches the held apiserver on its own schedule: wait for both.
        while auth.budget.coalesced < 3 * LIMIT - 1 or reviews.token_reviews < 1:
            await asyncio.sleep(0.01)
        assert reviews.token_reviews == 1 and auth.budget.in_flight == 1
        reviews.release.set()
        assert {r.status_code for r in await asyncio.gather(*same)} == {401}
    assert reviews.token_reviews == 1 and auth.reviews == 1


async def test_a_failed_review_tells_the_caller_nothing_about_the_apiserver(
    served: tuple[str, HeldReviews, Authenticator],
) -> None:
    url, reviews, _ = served
    reviews.fail = KubeUnavailable(0, "POST https://10.96.0.1:6443/apis/...: ClientConnectorError: refused")
    reviews.release.set()
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        resp = await http.get("/stats", headers=bearer(secrets.token_hex(16)))
    assert resp.status_code == 401 and "could not review" in resp.text
    for leak in ("10.96.0.1", "6443", "ClientConnectorError", "refused"):
        assert leak not in resp.text


async def test_a_caller_that_goes_away_does_not_cancel_a_shared_review() -> None:
    budget = ReviewBudget(1)
    release = asyncio.Event()
    calls = 0

    async def review() -> str:
        nonlocal calls
        calls += 1
        await release.wait()
        return "answer"

    first = asyncio.create_task(budget.review("k", review))
    second = asyncio.create_task(budget.review("k", review))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    with pytest.raises(Busy):
        await budget.review("other", review)  # the one slot is taken
    first.cancel()  # e.g. its connection closed
    await asyncio.gather(first, return_exceptions=True)
    release.set()
    assert await second == "answer" and calls == 1
    assert budget.in_flight == 0
