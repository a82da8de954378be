"""The Event recorder: aggregation, and the background mode a reconcile never waits for."""

from __future__ import annotations

import asyncio
from typing import Any

from vkprovider.kube.errors import KubeUnavailable
from vkprovider.kube.events import EventRecorder

POD = {"metadata": {"namespace": "ns", "name": "p", "uid": "u1", "resourceVersion": "7"}}


class Api:
    """Records Event writes; ``gate`` holds every write until it is set."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        await self.gate.wait()
        if self.fail:
            raise KubeUnavailable(0, "connection refused")
        self.calls.append((method, path, kwargs.get("body")))
        return None


async def test_the_same_event_again_bumps_the_count_on_the_first() -> None:
    api = Api()
    recorder = EventRecorder(api, component="vk", host="node")  # type: ignore[arg-type]
    await recorder.pod(POD, "Warning", "NoCandidates", "no offer fits")
    await recorder.pod(POD, "Warning", "NoCandidates", "no offer fits")
    (create, bump) = api.calls
    assert create[0] == "POST" and create[2]["count"] == 1 and create[2]["involvedObject"]["uid"] == "u1"
    assert bump[0] == "PATCH" and bump[1].endswith("/" + create[2]["metadata"]["name"])
    assert bump[2]["count"] == 2


async def test_background_recording_returns_before_the_write_and_keeps_order() -> None:
    api = Api()
    api.gate.clear()  # the apiserver is slow
    recorder = EventRecorder(api, component="vk", host="node", background=True)  # type: ignore[arg-type]
    async with asyncio.timeout(1):
        await recorder.pod(POD, "Normal", "ProviderCreateSuccess", "deployed")
        await recorder.pod(POD, "Warning", "Flapping", "again")
        await recorder.pod(POD, "Warning", "Flapping", "again")
    assert api.calls == []  # nothing written yet, and nobody waited for it
    api.gate.set()
    await recorder.flush()
    assert [(m, (b or {}).get("reason"), (b or {}).get("count")) for m, _, b in api.calls] == [
        ("POST", "ProviderCreateSuccess", 1),
        ("POST", "Flapping", 1),
        ("PATCH", None, 2),  # aggregated onto the Event created just before, in order
    ]
    await recorder.close()


async def test_background_failures_and_a_full_queue_never_raise() -> None:
    api = Api()
    api.fail = True
    recorder = EventRecorder(  # type: ignore[arg-type]
        api, component="vk", host="node", background=True, senders=1, max_queued=2
    )
    api.gate.clear()
    for i in range(4):
        await recorder.pod(POD, "Normal", "R", f"m{i}")
    assert recorder.dropped >= 1  # bounded: the rest is dropped with a log line
    api.gate.set()
    await recorder.close()
    assert recorder.recorded == 0 and api.calls == []
    api.fail = False
    await recorder.pod(POD, "Normal", "R", "after")  # senders start again after close
    await recorder.close()
    assert recorder.recorded == 1
