"""A provider's delete that answers "gone" settles the deletion without a ``get``; any other
answer is confirmed with ``get`` as before (the pod shows the same outcome either way)."""

from __future__ import annotations

from typing import Any

from pod_sync_fakes import NODE, Cloud, gpu_offer, gpu_pod, world

from vkprovider.models import DeploymentStatus, Phase
from vkprovider.pods.context import Requeue
from vkprovider.pods.sync import SyncSettings

JSON = dict[str, Any]
#: kubelet-like: the terminated states are written before the delete, so the outcome is visible
SHOW_OUTCOME = SyncSettings(node_name=NODE, host_ip="127.0.0.1", status_before_delete=True)
DELETING = {"metadata": {"deletionTimestamp": "2027-01-15T08:00:30Z", "deletionGracePeriodSeconds": 30}}


class AnsweringCloud(Cloud):
    """Its delete answers ``answer``; counts ``get`` calls."""

    def __init__(self, answer: bool | None) -> None:
        super().__init__("cheap", [gpu_offer("cheap")])
        self.answer = answer
        self.gets = 0

    async def get(self, uid: str) -> DeploymentStatus:
        self.gets += 1
        return await super().get(uid)

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> bool | None:  # type: ignore[override]
        await super().delete(uid, grace_period_seconds=grace_period_seconds)
        return self.answer if uid not in self.deployments else None


async def running_then_deleted(w: Any, cloud: AnsweringCloud) -> JSON:
    """The pod deployed, Running and Ready on the cloud, then deleted gracefully (not yet synced)."""
    pod = w.kube.add_pod(gpu_pod())
    await w.run(pod)
    cloud.set_phase("uid-1", Phase.RUNNING, ready=True)
    await w.tracker.poll_once()
    await w.run(pod)
    w.kube.update("ns", "p", DELETING)
    return pod


async def deleted_while_running(answer: bool | None) -> tuple[AnsweringCloud, JSON, Any]:
    """A running pod deleted gracefully; returns the cloud, the last status written and the verdict."""
    cloud = AnsweringCloud(answer)
    w = await world(cloud=cloud, settings=SHOW_OUTCOME)
    written: list[JSON] = []
    send = w.kube.request

    async def recording(method: str, path: str, **kwargs: Any) -> Any:
        if method == "PATCH" and path.endswith("/status"):
            written.append(kwargs["body"])
        return await send(method, path, **kwargs)

    w.kube.request = recording  # type: ignore[method-assign]
    pod = await running_then_deleted(w, cloud)
    verdict = await w.run(pod)
    assert w.kube.pod("ns", "p") is None and w.kube.calls[-1][0] == "DELETE"
    return cloud, written[-1], verdict


async def test_a_delete_answering_gone_ends_the_pod_without_a_get() -> None:
    cloud, _, verdict = await deleted_while_running(True)
    assert verdict is None and cloud.deletes == [("uid-1", 30.0)]
    assert cloud.gets == 0


async def test_a_delete_answering_nothing_is_confirmed_with_get_and_shows_the_same_outcome() -> None:
    confirmed, written, verdict = await deleted_while_running(None)
    assert verdict is None and confirmed.gets == 1
    _, unconfirmed_written, _ = await deleted_while_running(True)
    assert written == unconfirmed_written  # one call fewer, the same terminated states
    assert written["status"]["phase"] == "Failed"  # vanished without an exit code: not a success


async def test_a_delete_accepted_while_the_deployment_still_runs_waits_for_get_to_see_it_end() -> None:
    cloud = AnsweringCloud(None)
    cloud.keep_on_delete = True  # accepted, still draining
    w = await world(cloud=cloud, settings=SHOW_OUTCOME)
    pod = await running_then_deleted(w, cloud)
    verdict = await w.run(pod)
    assert isinstance(verdict, Requeue) and cloud.gets == 1 and w.kube.pod("ns", "p") is not None
    cloud.set_phase("uid-1", Phase.SUCCEEDED)
    assert await w.run(pod) is None and cloud.gets == 2
    assert w.kube.pod("ns", "p") is None
