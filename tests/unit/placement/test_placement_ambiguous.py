"""A UID is live on at most one provider: ambiguous creates are settled before failing over."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from placement_support import MemProvider, offer, placer_for, request

from vkprovider.errors import InvalidRequest, NoCapacity, Transient
from vkprovider.models import DeploymentRequest, DeploymentStatus, Phase
from vkprovider.placement import PlacementConfig, PodContext
from vkprovider.placement.ambiguous import Unsettled
from vkprovider.plugins.memory import InMemoryProvider

CTX = PodContext("ns")


class HangsAfterCreate(MemProvider):
    """Creates the deployment, then never answers (the reply is lost)."""

    hang = True

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        status = await super().deploy(request)
        if self.hang:
            await asyncio.sleep(3600)
        return status


class FailsAfterCreate(MemProvider):
    """Creates the deployment, which fails at once, and answers with a 503."""

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        status = await super().deploy(request)
        self.deployments[request.uid] = status.model_copy(
            update={"phase": Phase.FAILED, "reason": "GPUFault"}
        )
        raise Transient("503 after create")


def holders(uid: str, *providers: MemProvider) -> list[str]:
    return [p.name for p in providers if uid in p.deployments]


def pair(cheap: MemProvider | None = None) -> tuple[MemProvider, MemProvider]:
    cheap = cheap or MemProvider("cheap")
    cheap.catalog = [offer("cheap", "c1", 1.0)]
    return cheap, MemProvider("mid", [offer("mid", "m1", 2.0)])


async def test_created_then_transient_is_adopted_not_twinned() -> None:
    cheap, mid = pair()
    cheap.after_create = [Transient("503")] * 3
    placer: Any = await placer_for(cheap, mid)
    placed = await placer.deploy(request("u1"), CTX)
    assert placed.provider == "cheap" and mid.deploy_calls == []
    assert holders("u1", cheap, mid) == ["cheap"]
    assert placed.decision.attempts[-1].outcome == "ok"
    assert "adopted after Transient" in placed.decision.attempts[-1].message
    assert placer.placed("u1") == ("cheap", "c1") and placer.budgets.spent("ns") == 1.0


async def test_create_that_times_out_after_creating_is_adopted() -> None:
    cheap, mid = pair(HangsAfterCreate("cheap"))
    cfg = PlacementConfig(deploy_timeout_seconds=0.05, transient_attempts=2)
    placer: Any = await placer_for(cheap, mid, config=cfg)
    placed = await placer.deploy(request("u1"), CTX)
    assert placed.provider == "cheap" and holders("u1", cheap, mid) == ["cheap"]


async def test_created_then_failed_deployment_is_deleted_and_confirmed_before_the_next() -> None:
    cheap, mid = pair(FailsAfterCreate("cheap"))
    placer: Any = await placer_for(cheap, mid, config=PlacementConfig(transient_attempts=1))
    placed = await placer.deploy(request("u1"), CTX)
    assert placed.provider == "mid"
    assert cheap.deleted == ["u1"] and holders("u1", cheap, mid) == ["mid"]
    assert cheap.get_calls == 2  # found it, then confirmed it gone


async def test_unconfirmable_create_raises_transient_and_tries_no_other_provider() -> None:
    cheap, mid = pair()
    cheap.failures = [Transient("503")] * 3
    cheap.get_failures = [Transient("get 503")]
    placer: Any = await placer_for(cheap, mid, config=PlacementConfig(namespace_budgets={"ns": 5.0}))
    with pytest.raises(Unsettled) as info:
        await placer.deploy(request("u1"), CTX)
    assert isinstance(info.value, Transient) and "cheap" in info.value.message
    assert placer.summary()["unsettled_creates"] == {"u1": ["cheap"]}  # visible to operators
    assert mid.deploy_calls == []
    # Nothing is held for the pod while it waits.
    assert placer.budgets.spent("ns") == 0.0 and placer.catalog.capacity("cheap", "c1") == 5
    # Later, the provider answers: nothing was created, the pod is placed normally.
    placed = await placer.deploy(request("u1"), CTX)
    assert placed.provider == "cheap" and mid.deploy_calls == []
    assert placer.summary()["unsettled_creates"] == {}


async def test_an_open_question_blocks_every_provider_until_settled() -> None:
    cheap, mid = pair()
    cheap.failures = [Transient("503")] * 3
    cheap.get_failures = [Transient("get 503")] * 2
    placer: Any = await placer_for(cheap, mid, config=PlacementConfig(transient_attempts=3))
    for _ in range(2):  # the first deploy, then a retry while cheap still cannot answer
        with pytest.raises(Unsettled):
            await placer.deploy(request("u1"), CTX)
    assert mid.deploy_calls == [] and len(cheap.deploy_calls) == 3


async def test_cancelled_create_is_settled_and_kept_by_the_next_deploy() -> None:
    cheap, mid = pair(HangsAfterCreate("cheap"))
    placer: Any = await placer_for(cheap, mid)
    task = asyncio.create_task(placer.deploy(request("u1"), CTX))
    while not cheap.deploy_calls:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert holders("u1", cheap, mid) == ["cheap"]
    cheap.hang = False
    cheap.catalog = [offer("cheap", "c1", 5.0)]  # mid is now cheaper, but cheap holds the pod
    await placer.refresh()
    placed = await placer.deploy(request("u1"), CTX)
    assert placed.provider == "cheap" and mid.deploy_calls == []
    assert holders("u1", cheap, mid) == ["cheap"]


async def test_live_stray_whose_offer_no_longer_fits_is_removed_before_choosing_again() -> None:
    cheap, mid = pair(HangsAfterCreate("cheap"))
    placer: Any = await placer_for(cheap, mid)
    task = asyncio.create_task(placer.deploy(request("u1"), CTX))
    while not cheap.deploy_calls:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cheap.catalog = [offer("cheap", "c1", 1.0, gpu="A100-SXM-80GB")]
    await placer.refresh()
    placed = await placer.deploy(request("u1", gpu="H100"), CTX)
    assert placed.provider == "mid" and cheap.deleted == ["u1"]
    assert holders("u1", cheap, mid) == ["mid"]


async def test_definite_refusals_are_not_reconciled() -> None:
    cheap, mid = pair()
    cheap.failures = [NoCapacity("sold out")]
    placer: Any = await placer_for(cheap, mid)
    assert (await placer.deploy(request("u1"), CTX)).provider == "mid"
    assert cheap.get_calls == 0


async def test_release_forgets_open_questions() -> None:
    cheap, mid = pair()
    cheap.failures = [Transient("503")] * 3
    cheap.get_failures = [Transient("get 503")]
    placer: Any = await placer_for(cheap, mid)
    with pytest.raises(Unsettled):
        await placer.deploy(request("u1"), CTX)
    placer.release("u1")  # the pod is gone: a stray is the orphan collector's
    assert len(placer._open) == 0


class Scripted(MemProvider):
    """Each deploy call does the next scripted thing: create then fail, or refuse outright."""

    def __init__(self, name: str, script: list[BaseException | None]) -> None:
        super().__init__(name, [offer(name, "c1", 1.0)])
        self.script = script  # None: create, then raise Transient (the answer is lost)

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        self.deploy_calls.append(request)
        step = self.script.pop(0) if self.script else None
        if step is not None:
            raise step
        await InMemoryProvider.deploy(self, request)
        raise Transient("answer lost")


async def test_a_refusal_after_an_ambiguous_try_still_settles_the_first() -> None:
    cheap = Scripted("cheap", [None, NoCapacity("sold out now")])
    _, mid = pair()
    placer: Any = await placer_for(cheap, mid, config=PlacementConfig(transient_attempts=3))
    placed = await placer.deploy(request("u1"), CTX)
    assert placed.provider == "cheap" and holders("u1", cheap, mid) == ["cheap"]  # the first try made it


async def test_invalid_request_after_an_ambiguous_try_removes_what_it_made() -> None:
    cheap = Scripted("cheap", [None, InvalidRequest("image rejected")])
    _, mid = pair()
    placer: Any = await placer_for(cheap, mid, config=PlacementConfig(transient_attempts=3))
    placed = await placer.deploy(request("u1"), CTX)  # the refusal moves on to the next candidate
    assert placed.provider == "mid"
    assert cheap.deleted == ["u1"] and holders("u1", cheap, mid) == ["mid"]
