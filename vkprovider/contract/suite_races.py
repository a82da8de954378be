"""Idempotency under concurrency: the races the service really produces.

The service deploys a pod's UID again whenever it is unsure a create landed (a timeout, a
restart, a second replica taking over), deletes while a create may still be in flight, and lists
at any moment. An adapter that checks "does it exist?" and then creates, without a per-UID lock
(``UidLocks``) or the backend's "already exists" answer, makes two deployments — one of them
billed and never deleted. These tests catch exactly that adapter.
"""

from __future__ import annotations

import asyncio

import pytest

from vkprovider.contract.harness import Harness
from vkprovider.contract.support import eventually, knob, new_uid
from vkprovider.plugins.api import NotFound, Provider

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: Concurrent first deploys of one UID.
RACERS = 8


async def live_deployment(provider: Provider, node: str, uid: str) -> str | None:
    """The provider id of ``uid``'s live deployment, None if there is none; ``get`` and ``list`` agree."""
    try:
        status = await provider.get(uid)
    except NotFound:
        status = None
    listed = [s for s in await provider.list(node) if s.uid == uid and not s.phase.terminal]
    assert len(listed) <= 1, f"{len(listed)} live deployments for one UID: {listed}"
    if status is None or status.phase.terminal:
        assert not listed, f"get says {status and status.phase} but list has {listed}"
        return None
    assert [s.provider_id for s in listed] == [status.provider_id], f"get {status}, list {listed}"
    return status.provider_id


async def delete_until_ended(provider: Provider, node: str, uid: str) -> None:
    await provider.delete(uid)

    async def ended() -> bool:
        return await live_deployment(provider, node, uid) is None

    await eventually(ended, timeout=60)


async def test_concurrent_first_deploys_make_one_deployment(
    provider: Provider, harness: Harness, node: str
) -> None:
    request = harness.request(new_uid(), node)
    statuses = await asyncio.gather(*(provider.deploy(request) for _ in range(RACERS)))
    try:
        ids = {s.provider_id for s in statuses}
        assert len(ids) == 1, f"{RACERS} concurrent first deploys of one UID made {len(ids)} deployments"
        assert {s.uid for s in statuses} == {request.uid}
        assert await live_deployment(provider, node, request.uid) == statuses[0].provider_id
    finally:
        await delete_until_ended(provider, node, request.uid)


async def test_deploy_racing_delete_ends_consistent(provider: Provider, harness: Harness, node: str) -> None:
    for _ in range(3):
        request = harness.request(new_uid(), node)
        deployed, _deleted = await asyncio.gather(provider.deploy(request), provider.delete(request.uid))
        assert deployed.uid == request.uid
        live = await live_deployment(provider, node, request.uid)
        assert live in (None, deployed.provider_id)
        await delete_until_ended(provider, node, request.uid)


async def _held_deploy(provider: Provider, harness: Harness, node: str) -> tuple[str, asyncio.Task[object]]:
    """Start a deploy the backend holds for a second; return once the backend has it."""
    before = await knob(harness.delay_stats("deploy"))
    await knob(harness.delay("deploy", 1.0))
    request = harness.request(new_uid(), node)
    task: asyncio.Task[object] = asyncio.create_task(provider.deploy(request))

    async def arrived() -> bool:
        return (await harness.delay_stats("deploy")).started > before.started

    await eventually(arrived)
    return request.uid, task


async def test_delete_of_a_uid_being_created(provider: Provider, harness: Harness, node: str) -> None:
    """The delete succeeds at once; whatever the create then makes, one more delete ends it."""
    uid, task = await _held_deploy(provider, harness, node)
    try:
        await provider.delete(uid)
    finally:
        await harness.delay("deploy", 0)
    await task
    assert await live_deployment(provider, node, uid) in (None, getattr(task.result(), "provider_id", None))
    await delete_until_ended(provider, node, uid)


async def test_list_during_a_create(provider: Provider, harness: Harness, node: str) -> None:
    uid, task = await _held_deploy(provider, harness, node)
    try:
        during = [s for s in await provider.list(node) if s.uid == uid]
        assert len(during) <= 1
    finally:
        await harness.delay("deploy", 0)
    await task
    try:
        assert await live_deployment(provider, node, uid) == getattr(task.result(), "provider_id", None)
    finally:
        await delete_until_ended(provider, node, uid)
