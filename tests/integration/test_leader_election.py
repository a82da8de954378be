"""Lease-based leader election against the real API server: one leader at a time, hand-over on
release, takeover after a crash once the lease expires, step-down when the lease is stolen."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from tests.integration.test_node_fakes import eventually, kube_client
from vkprovider.devcluster import Cluster
from vkprovider.kube import resources
from vkprovider.kube.client import KubeClient
from vkprovider.kube.leader import LeaderElector

pytestmark = pytest.mark.cluster

TIMINGS = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.25}


class Replica:
    """One service replica: an elector whose lead() marks it active until cancelled."""

    def __init__(self, kube: KubeClient, namespace: str, identity: str, *, release: bool = True) -> None:
        self.elector = LeaderElector(
            kube, namespace, "vkprovider", identity, **TIMINGS, release_on_cancel=release
        )
        self.identity = identity
        self.active = False
        self.terms = 0
        self.task: asyncio.Task[None] | None = None

    async def lead(self) -> None:
        self.active = True
        self.terms += 1
        try:
            await asyncio.sleep(3600)
        finally:
            self.active = False

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self.lead))

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(10):
                await self.task


@contextlib.asynccontextmanager
async def replicas(cluster: Cluster, namespace: str, *, release: bool = True) -> AsyncIterator[list[Replica]]:
    async with kube_client(cluster) as kube:
        pair = [Replica(kube, namespace, f"replica-{i}", release=release) for i in range(2)]
        for replica in pair:
            replica.start()
        try:
            yield pair
        finally:
            for replica in pair:
                if replica.task is not None and not replica.task.done():
                    await replica.stop()


async def _one_leader(pair: list[Replica]) -> Replica:
    async def someone_leads() -> bool:
        assert sum(r.active for r in pair) <= 1, "two leaders at once"
        return any(r.active for r in pair)

    await eventually(someone_leads, timeout=30, interval=0.05)
    # Watch a few renewal periods: the other replica must never start leading meanwhile.
    for _ in range(40):
        assert sum(r.active for r in pair) == 1, "leadership must stay with exactly one replica"
        await asyncio.sleep(0.05)
    return next(r for r in pair if r.active)


async def _holder(cluster: Cluster, namespace: str) -> str:
    async with kube_client(cluster) as kube:
        lease = await resources.get_lease(kube, namespace, "vkprovider")
    assert lease is not None
    return str(lease["spec"].get("holderIdentity") or "")


async def test_exactly_one_leads_and_a_stopped_leader_hands_over(cluster: Cluster, namespace: str) -> None:
    async with replicas(cluster, namespace) as pair:
        leader = await _one_leader(pair)
        other = next(r for r in pair if r is not leader)
        assert leader.elector.is_leader and not other.elector.is_leader
        assert await _holder(cluster, namespace) == leader.identity

        await leader.stop()  # graceful: releases the lease
        assert await _holder(cluster, namespace) in ("", other.identity)  # released, no expiry wait

        async def other_leads() -> bool:
            return other.active

        await eventually(other_leads, timeout=30, interval=0.05)
        assert not leader.active
        assert await _holder(cluster, namespace) == other.identity


async def test_a_crashed_leader_is_replaced_after_the_lease_expires(cluster: Cluster, namespace: str) -> None:
    async with replicas(cluster, namespace, release=False) as pair:
        leader = await _one_leader(pair)
        other = next(r for r in pair if r is not leader)
        await leader.stop()  # no release, as if the process died
        assert await _holder(cluster, namespace) == leader.identity

        async def other_leads() -> bool:
            return other.active

        await eventually(other_leads, timeout=30, interval=0.05)
        assert await _holder(cluster, namespace) == other.identity


async def test_leader_steps_down_when_another_holder_takes_the_lease(
    cluster: Cluster, namespace: str
) -> None:
    async with kube_client(cluster) as kube:
        solo = Replica(kube, namespace, "solo")
        solo.start()
        try:

            async def leads() -> bool:
                return solo.active

            await eventually(leads, timeout=30, interval=0.05)
            lease = await resources.get_lease(kube, namespace, "vkprovider")
            assert lease is not None
            lease["spec"]["holderIdentity"] = "intruder"
            await resources.replace_lease(kube, lease)

            async def stepped_down() -> bool:
                return not solo.active and not solo.elector.is_leader

            await eventually(stepped_down, timeout=30, interval=0.05)
            # The intruder never renews, so once its lease expires the replica leads again.
            await eventually(leads, timeout=30, interval=0.05)
            assert solo.terms == 2
        finally:
            await solo.stop()


async def test_a_leader_whose_copy_of_the_lease_is_stale_still_releases_it(
    cluster: Cluster, namespace: str
) -> None:
    """A renewal cancelled mid-flight can land after the leader's last read: its release then
    meets a 409 and must read the Lease again, not leave it to expire."""
    async with kube_client(cluster) as kube, replicas(cluster, namespace) as pair:
        leader = await _one_leader(pair)
        other = next(r for r in pair if r is not leader)
        await other.stop()  # nobody else may take the Lease meanwhile
        leader.elector.retry_period = 3600  # no renewal refreshes its copy from here on
        await asyncio.sleep(0.5)  # a renewal already sleeping ends; the next waits an hour
        lease = await resources.get_lease(kube, namespace, "vkprovider")
        assert lease is not None and lease["spec"]["holderIdentity"] == leader.identity
        # Another write the leader has not seen (it stays the holder): its copy is now stale.
        lease["metadata"].setdefault("labels", {})["touched"] = "yes"
        await resources.replace_lease(kube, lease)
        await leader.stop()
        assert await _holder(cluster, namespace) == ""  # released anyway, no expiry wait
