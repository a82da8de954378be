"""A watch cut mid-read becomes ``KubeUnavailable`` (never a raw aiohttp error), and the
informer survives it: it re-opens the watch from the last resourceVersion it saw."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support import eventually
from tests.unit.kube.fake_apiserver import Answer, FakeApiserver, pod
from vkprovider.kube.errors import KubeUnavailable
from vkprovider.kube.informer import Informer


async def test_a_stream_cut_mid_read_raises_kube_unavailable() -> None:
    def answer(target: str) -> Answer:
        return None, [{"type": "ADDED", "object": pod("a", "5")}], True

    server = FakeApiserver(answer)
    async with server.serving() as kube:
        seen: list[dict[str, Any]] = []
        with pytest.raises(KubeUnavailable):
            async for event in kube.stream("/api/v1/pods"):
                seen.append(event)
        assert [e["object"]["metadata"]["name"] for e in seen] == ["a"]


async def test_a_request_to_a_closed_port_raises_kube_unavailable() -> None:
    server = FakeApiserver(lambda target: ({}, [], False))
    async with server.serving() as kube:
        assert server._server is not None
        server._server.close()
        await server._server.wait_closed()
        with pytest.raises(KubeUnavailable):
            await kube.request("GET", "/api/v1/pods", timeout=5)


async def test_the_informer_resumes_a_cut_watch_from_the_last_resource_version() -> None:
    watches = 0

    def answer(target: str) -> Answer:
        nonlocal watches
        if "watch=true" not in target:
            return {"metadata": {"resourceVersion": "10"}, "items": [pod("a", "10")]}, [], False
        watches += 1
        if watches == 1:
            return None, [{"type": "ADDED", "object": pod("b", "11")}], True  # cut: apiserver restart
        if watches == 2:
            return None, [{"type": "MODIFIED", "object": pod("b", "12")}], False
        return None, [], False

    seen: list[tuple[str, str]] = []
    server = FakeApiserver(answer)
    async with server.serving() as kube:
        informer = Informer(
            kube,
            "/api/v1/pods",
            handler=lambda kind, old, new: seen.append((kind, new["metadata"]["name"])),
            retry_seconds=0.01,
        )
        task = asyncio.create_task(informer.run())
        try:

            async def resumed() -> bool:
                return ("MODIFIED", "b") in seen

            await eventually(resumed, timeout=10, interval=0.02)
            assert not task.done()  # the cut did not escape the informer
            assert informer.relists == 1 and informer.reconnects >= 1
            watch_targets = [t for t in server.requests if "watch=true" in t]
            assert "resourceVersion=10" in watch_targets[0]
            assert "resourceVersion=11" in watch_targets[1]  # resumed after the last event seen
            assert informer.cache["ns/b"]["metadata"]["resourceVersion"] == "12"
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


async def test_the_label_selector_goes_on_the_list_and_every_watch() -> None:
    def answer(target: str) -> Answer:
        if "watch=true" not in target:
            return {"metadata": {"resourceVersion": "10"}, "items": [pod("a", "10")]}, [], False
        return None, [], False

    server = FakeApiserver(answer)
    async with server.serving() as kube:
        informer = Informer(kube, "/apis/x/v1/things", label_selector="owner=me,app", handler=lambda *_: None)
        task = asyncio.create_task(informer.run())
        try:

            async def watched() -> bool:
                return any("watch=true" in t for t in server.requests)

            await eventually(watched, timeout=10, interval=0.02)
            # the list (lean pool) and the watch (aiohttp) may escape "," differently: compare decoded
            selectors = [parse_qs(urlsplit(t).query).get("labelSelector") for t in server.requests]
            assert selectors and all(s == ["owner=me,app"] for s in selectors), server.requests
            assert all("fieldSelector" not in t for t in server.requests)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
