"""``vkprovider.served_node``: ``LeadShare`` (a replica at its share of the nodes holds back one
lease duration before taking another free node Lease, and attempts are counted one at a time,
so no two slip in at once) and the units built per node."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from vkprovider import served_node
from vkprovider.served_node import LeadShare


@dataclass
class Elector:
    is_leader: bool = False
    lease_duration: float = 15.0


@pytest.fixture
def waits() -> list[float]:
    """The sleeps a slot takes (recorded, not slept)."""
    return []


def share_of(nodes: int, replicas: int, waits: list[float]) -> tuple[LeadShare, list[Elector]]:
    async def sleep(seconds: float) -> None:  # injected: never asyncio.sleep for the whole loop
        waits.append(seconds)

    share = LeadShare(nodes, replicas, sleep=sleep)
    electors = [Elector() for _ in range(nodes)]
    share.electors.extend(electors)  # type: ignore[arg-type]  # only is_leader and lease_duration
    return share, electors


async def test_below_its_share_a_replica_tries_at_once(waits: list[float]) -> None:
    share, electors = share_of(3, 2, waits)
    assert share.share == 2
    electors[0].is_leader = True
    async with share.slot():
        pass
    assert waits == []


async def test_at_its_share_a_replica_waits_one_lease_duration_then_tries(waits: list[float]) -> None:
    share, electors = share_of(3, 2, waits)
    electors[0].is_leader = electors[1].is_leader = True
    entered = False
    async with share.slot():
        entered = True
    assert entered and waits == [15.0]  # once: a replica that failed leaves its nodes to us


async def test_concurrent_attempts_are_counted_one_at_a_time(waits: list[float]) -> None:
    share, electors = share_of(2, 2, waits)  # a share of one node

    async def attempt(elector: Elector) -> None:
        async with share.slot():
            # the Lease write (yields to the loop): another attempt must not slip in here
            written = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(written.set_result, None)
            await written
            elector.is_leader = True

    await asyncio.gather(attempt(electors[0]), attempt(electors[1]))
    assert waits == [15.0]  # the second saw the first's win and held back


def test_one_replica_or_one_node_needs_no_share() -> None:
    from vkprovider.config import Settings

    def units(settings: Settings) -> list[served_node.ServedNode]:
        return [object()] * len(settings.node_list())  # type: ignore[list-item]

    two = {"enabled": True, "replicas": 2}
    assert served_node.lead_share(Settings(leader_election=two), units(Settings())) is None
    several = Settings(nodes=[{"name": "a"}, {"name": "b"}], leader_election=two)
    assert served_node.lead_share(several, units(several)) is not None
    one = Settings(nodes=[{"name": "a"}, {"name": "b"}], leader_election={"enabled": True})
    assert served_node.lead_share(one, units(one)) is None


async def test_nodes_get_their_provider_subsets_and_share_only_rate_limiters_and_catalogs() -> None:
    from kubernetes_asyncio import client

    from vkprovider.config import Settings
    from vkprovider.kube.client import KubeClient
    from vkprovider.plugins.registry import build_providers

    settings = Settings.model_validate(
        {
            "providers": [
                {"name": n, "adapter": "fakecloud", "settings": {"url": "http://127.0.0.1:9"}}
                for n in ("one", "two")
            ],
            "nodes": [{"name": "vk-a", "providers": ["one"]}, {"name": "vk-b"}],
            "quota": {"cluster_queue": "q"},
        }
    )
    adapters = build_providers(settings.providers)
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # never contacted
    kube = KubeClient(api)
    try:
        a, b = served_node.build_nodes(settings, adapters, kube, kube)
        assert (a.name, sorted(a.providers), b.name, sorted(b.providers)) == (
            "vk-a",
            ["one"],
            "vk-b",
            ["one", "two"],
        )
        assert sorted(a.placer.providers) == ["one"] and a.controller.node_name == "vk-a"
        assert a.placer.health is not b.placer.health  # an outage is judged per node
        assert a.placer.limiters is b.placer.limiters  # a provider's rate limit is kept together
        assert a.placer.limiters.bucket("one") is b.placer.limiters.bucket("one")
        # one offer catalog entry (and refresh) per provider, whichever nodes list it
        assert a.placer.catalog.providers["one"] is b.placer.catalog.providers["one"]
        assert (a.runs_quota, b.runs_quota) == (
            True,
            False,
        )  # one ClusterQueue writer: the first node's leader
    finally:
        for adapter in adapters.values():
            await adapter.close()
        await api.close()
