"""The provider contract (DESIGN.md §3), checked for every adapter in every transport variant.

Collected by the ``vkprovider`` pytest plugin when a harness is named, or imported into a test
module with ``from vkprovider.contract.suite import *``. Every test runs on the session loop
(the ``harness`` and ``provider`` fixtures are session-scoped).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from vkprovider.contract.harness import DelayStats, Harness
from vkprovider.contract.support import eventually, knob, new_uid, plugin_supervisor
from vkprovider.plugins.api import (
    DeploymentRequest,
    DeploymentStatus,
    InvalidRequest,
    LogOptions,
    NoCapacity,
    NotFound,
    Phase,
    Port,
    Provider,
    ProviderError,
    QuotaOrBilling,
    SupportsEndpoints,
    SupportsLogs,
    SupportsMetrics,
    SupportsWatch,
    Transient,
)
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.guard import guard

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_info_and_probe(provider: Provider) -> None:
    info = await provider.info()
    assert info.name == provider.name
    assert info.adapter and info.version
    if info.capabilities.watch:
        assert isinstance(provider, SupportsWatch)
    if info.capabilities.logs:
        assert isinstance(provider, SupportsLogs)
    if info.capabilities.metrics:
        assert isinstance(provider, SupportsMetrics)
    if info.capabilities.endpoints:
        assert isinstance(provider, SupportsEndpoints)
    await provider.probe()


async def test_offers_are_normalised(provider: Provider) -> None:
    for offer in await provider.offers():
        assert offer.gpu_type and offer.gpu_type == offer.gpu_type.strip()
        assert offer.capacity >= 0 and offer.price_per_hour >= 0


async def test_same_uid_deployed_twice_is_one_deployment(
    provider: Provider, harness: Harness, node: str
) -> None:
    request = harness.request(new_uid(), node)
    first = await provider.deploy(request)
    second = await provider.deploy(request)
    concurrent = await asyncio.gather(provider.deploy(request), provider.deploy(request))
    assert first.uid == request.uid
    assert {s.provider_id for s in (first, second, *concurrent)} == {first.provider_id}
    listed = [s for s in await provider.list(node) if s.uid == request.uid]
    assert len(listed) == 1
    await provider.delete(request.uid)


async def test_delete_unknown_uid_succeeds(provider: Provider) -> None:
    await provider.delete(new_uid())


async def test_get_unknown_uid_is_not_found(provider: Provider) -> None:
    uid = new_uid()
    with pytest.raises(NotFound) as caught:
        await provider.get(uid)
    assert caught.value.provider == provider.name


async def test_delete_is_idempotent_and_final(provider: Provider, harness: Harness, node: str) -> None:
    request = harness.request(new_uid(), node)
    await provider.deploy(request)
    await provider.delete(request.uid)
    await provider.delete(request.uid)
    try:
        status = await provider.get(request.uid)
    except NotFound:
        pass
    else:
        assert status.phase.terminal, f"deleted deployment still {status.phase}"
    remaining = [s for s in await provider.list(node) if s.uid == request.uid]
    assert all(s.phase.terminal for s in remaining)


async def test_delete_answers_gone_only_when_it_is_gone(
    provider: Provider, harness: Harness, node: str
) -> None:
    """``delete`` returns True (the host then asks no ``get``) only when the deployment is gone:
    ``get`` answers NotFound and ``list`` leaves it out. Anything else it returns is None."""
    request = harness.request(new_uid(), node)
    await provider.deploy(request)
    gone = await provider.delete(request.uid)
    assert gone is True or gone is None, f"delete returned {gone!r}: True (gone) or None"
    if gone:
        with pytest.raises(NotFound):
            await provider.get(request.uid)
        assert request.uid not in {s.uid for s in await provider.list(node)}


async def test_list_is_scoped_to_the_node(provider: Provider, harness: Harness, node: str) -> None:
    other = f"{node}-other"
    mine, theirs = harness.request(new_uid(), node), harness.request(new_uid(), other)
    await provider.deploy(mine)
    await provider.deploy(theirs)
    try:
        assert {s.uid for s in await provider.list(node)} == {mine.uid}
        assert {s.uid for s in await provider.list(other)} == {theirs.uid}
        assert await provider.list(f"{node}-empty") == []
        assert all(s.node_name in ("", node) for s in await provider.list(node))
    finally:
        await provider.delete(mine.uid)
        await provider.delete(theirs.uid)


ERRORS: list[ProviderError] = [
    InvalidRequest("image name is invalid: 'Bad Image'"),
    NoCapacity("no H100 left in eu-west"),
    Transient("backend returned 503", retry_after=7.5),
    QuotaOrBilling("account balance is negative"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: e.code)
async def test_errors_round_trip_with_class_and_message(
    provider: Provider, harness: Harness, node: str, error: ProviderError
) -> None:
    await knob(harness.fail_next("deploy", error))
    with pytest.raises(ProviderError) as caught:
        await provider.deploy(harness.request(new_uid(), node))
    assert type(caught.value) is type(error)
    assert error.message in caught.value.message
    assert caught.value.provider == provider.name
    if isinstance(error, Transient):
        assert isinstance(caught.value, Transient) and caught.value.retry_after == error.retry_after


async def test_errors_round_trip_on_every_operation(provider: Provider, harness: Harness, node: str) -> None:
    await knob(harness.fail_next("list", Transient("listing is down")))
    with pytest.raises(Transient, match="listing is down"):
        await provider.list(node)
    await knob(harness.fail_next("probe", QuotaOrBilling("card declined")))
    with pytest.raises(QuotaOrBilling, match="card declined"):
        await provider.probe()
    await provider.probe()


async def test_watch_delivers_every_transition_up_to_terminal(
    provider: Provider, harness: Harness, node: str
) -> None:
    if not (await provider.info()).capabilities.watch:
        pytest.skip("adapter has no watch capability")
    assert isinstance(provider, SupportsWatch)
    request = harness.request(new_uid(), node)
    seen: list[DeploymentStatus] = []
    stream = provider.watch(node)

    async def until(phase: Phase) -> None:
        async with asyncio.timeout(10):
            while not seen or seen[-1].phase != phase:
                status = await anext(stream)
                assert status.node_name in ("", node)
                if status.uid == request.uid:
                    seen.append(status)

    try:
        await provider.deploy(request)
        await until(Phase.PENDING)
        await knob(harness.advance(request.uid, Phase.RUNNING))
        await until(Phase.RUNNING)
        await knob(harness.advance(request.uid, Phase.SUCCEEDED))
        await until(Phase.SUCCEEDED)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await provider.delete(request.uid)
    phases = [s.phase for s in seen]
    assert [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p] == [
        Phase.PENDING,
        Phase.RUNNING,
        Phase.SUCCEEDED,
    ]
    assert seen[1].ready


async def test_logs_of_a_deployment(provider: Provider, harness: Harness, node: str) -> None:
    if not (await provider.info()).capabilities.logs:
        pytest.skip("adapter has no logs capability")
    assert isinstance(provider, SupportsLogs)
    request = harness.request(new_uid(), node)
    await provider.deploy(request)
    try:
        async with asyncio.timeout(10):
            chunks = [chunk async for chunk in provider.logs(request.uid, LogOptions())]
        assert all(isinstance(c, bytes) for c in chunks)
        with pytest.raises(NotFound):
            async with asyncio.timeout(10):
                _ = [chunk async for chunk in provider.logs(new_uid(), LogOptions())]
    finally:
        await provider.delete(request.uid)


async def test_usage_covers_running_deployments_of_the_node_only(
    provider: Provider, harness: Harness, node: str
) -> None:
    """Declaring ``metrics`` means ``usage(node)`` reports this node's running deployments (one
    entry per UID, each with figures) and never another node's. A plugin without ``metrics``
    answers Usage UNIMPLEMENTED (read as ``Unsupported``, an ``InvalidRequest``)."""
    if not (await provider.info()).capabilities.metrics:
        if isinstance(getattr(provider, "inner", provider), GrpcProvider):
            assert isinstance(provider, SupportsMetrics)
            with pytest.raises(InvalidRequest):
                await provider.usage(node)
            return
        pytest.skip("adapter has no metrics capability")
    assert isinstance(provider, SupportsMetrics)
    request = harness.request(new_uid(), node)
    await provider.deploy(request)
    try:
        await knob(harness.advance(request.uid, Phase.RUNNING))

        async def reported() -> bool:
            return any(u.uid == request.uid for u in await provider.usage(node))

        await eventually(reported)
        usage = await provider.usage(node)
        uids = [u.uid for u in usage]
        assert len(uids) == len(set(uids))
        assert set(uids) <= {s.uid for s in await provider.list(node)}
        mine = next(u for u in usage if u.uid == request.uid)
        assert mine.timestamp.tzinfo is not None and mine.containers
        assert request.uid not in {u.uid for u in await provider.usage(f"{node}-other")}
    finally:
        await provider.delete(request.uid)


def _with_a_port(request: DeploymentRequest) -> DeploymentRequest:
    """``request`` with a TCP container port on its first container if it declares none."""
    if any(c.ports for c in request.containers):
        return request
    first = request.containers[0].model_copy(update={"ports": [Port(container_port=8000)]})
    return request.model_copy(update={"containers": [first, *request.containers[1:]]})


async def test_endpoints_say_how_a_running_deployment_is_reached(
    provider: Provider, harness: Harness, node: str
) -> None:
    """Declaring ``endpoints`` means: NotFound for an unknown UID; for a running deployment, an
    answer for its UID with at least one address, and port mappings only for ports the request
    declared (each once, every port in range). A plugin without ``endpoints`` answers Endpoints
    UNIMPLEMENTED (read as ``Unsupported``, an ``InvalidRequest``)."""
    if not (await provider.info()).capabilities.endpoints:
        if isinstance(getattr(provider, "inner", provider), GrpcProvider):
            assert isinstance(provider, SupportsEndpoints)
            with pytest.raises(InvalidRequest):
                await provider.endpoints(new_uid())
            return
        pytest.skip("adapter has no endpoints capability")
    assert isinstance(provider, SupportsEndpoints)
    with pytest.raises(NotFound):
        await provider.endpoints(new_uid())
    request = _with_a_port(harness.request(new_uid(), node))
    await provider.deploy(request)
    try:
        await knob(harness.advance(request.uid, Phase.RUNNING))

        async def routed() -> bool:
            return bool((await provider.endpoints(request.uid)).addresses)

        await eventually(routed)
        found = await provider.endpoints(request.uid)
        assert found.uid == request.uid
        assert all(a and a == a.strip() for a in found.addresses)
        declared = {(p.container_port, p.protocol) for c in request.containers for p in c.ports}
        mapped = [(m.container_port, m.protocol) for m in found.ports]
        assert len(mapped) == len(set(mapped)), f"a container port mapped twice: {mapped}"
        assert set(mapped) <= declared, f"mappings {mapped} for ports never declared ({declared})"
    finally:
        await provider.delete(request.uid)


async def test_endpoints_carried_by_a_status_are_what_endpoints_answers(
    provider: Provider, harness: Harness, node: str
) -> None:
    """A status MAY carry ``endpoints`` (the host then does not call ``endpoints``): if a running
    deployment's does, they are its own, and the same as ``endpoints`` answers when declared."""
    request = _with_a_port(harness.request(new_uid(), node))
    await provider.deploy(request)
    try:
        await knob(harness.advance(request.uid, Phase.RUNNING))

        async def running() -> bool:
            return (await provider.get(request.uid)).phase is Phase.RUNNING

        await eventually(running)
        status = await provider.get(request.uid)
        listed = [s for s in await provider.list(node) if s.uid == request.uid]
        carried = [s.endpoints for s in (status, *listed) if s.endpoints is not None]
        if not carried:
            pytest.skip("the adapter's statuses carry no endpoints")
        assert all(e.uid == request.uid for e in carried), f"endpoints of another UID: {carried}"
        if (await provider.info()).capabilities.endpoints:
            assert isinstance(provider, SupportsEndpoints)
            answered = await provider.endpoints(request.uid)
            assert all(e == answered for e in carried), f"carried {carried}, endpoints says {answered}"
    finally:
        await provider.delete(request.uid)


async def test_deadline_is_honoured(provider: Provider, harness: Harness, node: str, variant: str) -> None:
    """In-process the caller's deadline cancels the adapter; over gRPC the call deadline fires as
    ``Transient`` and reaches the plugin, which cancels the adapter too."""
    before = await knob(harness.delay_stats("deploy"))
    await knob(harness.delay("deploy", 60))
    try:
        if variant == "inprocess":
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    await provider.deploy(harness.request(new_uid(), node))
        else:
            async with asyncio.timeout(30):  # only a safety net: the call deadline is 3 s
                with pytest.raises(Transient, match=r"deadline|within"):
                    await provider.deploy(harness.request(new_uid(), node))
        await adapter_cancelled_since(harness, before)
    finally:
        await harness.delay("deploy", 0)


async def adapter_cancelled_since(harness: Harness, before: DelayStats) -> None:
    """Wait until the adapter saw one more held deploy cancelled (when its backend can tell)."""
    if before.cancelled is None:
        return
    cancelled = before.cancelled

    async def adapter_was_cancelled() -> bool:
        return ((await harness.delay_stats("deploy")).cancelled or 0) > cancelled

    await eventually(adapter_was_cancelled)


async def test_cancellation_propagates_to_the_adapter(
    provider: Provider, harness: Harness, node: str
) -> None:
    before = await knob(harness.delay_stats("deploy"))
    await knob(harness.delay("deploy", 60))
    request = harness.request(new_uid(), node)
    try:
        task = asyncio.create_task(provider.deploy(request))

        async def call_arrived() -> bool:
            return (await harness.delay_stats("deploy")).started > before.started

        await eventually(call_arrived)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(10):
                await task
        await adapter_cancelled_since(harness, before)
    finally:
        await harness.delay("deploy", 0)
    status = await provider.deploy(request)  # the provider still works afterwards
    assert status.uid == request.uid
    await provider.delete(request.uid)


async def test_plugin_killed_mid_call_is_transient_then_restarted(harness: Harness, tmp_path: Path) -> None:
    if not harness.shared_backend:
        pytest.skip("harness knobs do not reach a plugin subprocess")
    supervisor = plugin_supervisor(harness, "contract-killed", tmp_path, backoff_initial=0.1)
    provider = guard(GrpcProvider("contract-killed", supervisor, call_timeout=20))
    request = harness.request(new_uid(), "node-killed")
    try:
        async with asyncio.timeout(60):
            await provider.probe()
            old_pid = supervisor.pid
            assert old_pid is not None
            before = await knob(harness.delay_stats("deploy"))
            await harness.delay("deploy", 60)
            task = asyncio.create_task(provider.deploy(request))

            async def call_arrived() -> bool:
                return (await harness.delay_stats("deploy")).started > before.started

            await eventually(call_arrived)
            watching = (await provider.info()).capabilities.watch and isinstance(provider, SupportsWatch)
            if watching:
                assert isinstance(provider, SupportsWatch)
                stream = provider.watch("node-killed")
                first: asyncio.Task[DeploymentStatus] = asyncio.ensure_future(anext(stream))
                await asyncio.sleep(0.2)  # let the stream open; it may or may not have sent a snapshot
            os.kill(old_pid, signal.SIGKILL)
            with pytest.raises(Transient):
                async with asyncio.timeout(10):  # far below the 20 s call deadline: no waiting it out
                    await task
            if watching:
                with pytest.raises(Transient):  # an open stream ends with Transient too, never hangs
                    async with asyncio.timeout(10):
                        await first
                        while True:
                            await anext(stream)
            await harness.delay("deploy", 0)
            while True:
                try:
                    status = await provider.deploy(request)
                    break
                except Transient:
                    await asyncio.sleep(0.05)
            assert status.uid == request.uid
            assert supervisor.pid not in (None, old_pid)
            assert supervisor.restarts >= 1
            await provider.delete(request.uid)
    finally:
        await harness.delay("deploy", 0)
        await provider.close()
    assert supervisor.pid is None
    assert supervisor.process is not None and supervisor.process.returncode is not None


async def test_delete_with_a_grace_period_ends_the_deployment(
    provider: Provider, harness: Harness, node: str
) -> None:
    request = harness.request(new_uid(), node)
    await provider.deploy(request)
    await provider.delete(request.uid, grace_period_seconds=1.0)

    async def ended() -> bool:
        try:
            status = await provider.get(request.uid)
        except NotFound:
            return True
        return status.phase.terminal

    await eventually(ended, timeout=60)
