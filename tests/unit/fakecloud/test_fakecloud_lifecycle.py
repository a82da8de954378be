"""The lifecycle as a pure function of a fake clock: no sleeping, exact transitions."""

from __future__ import annotations

import pytest
from fakecloud_helpers import config, request
from vkprovider_fakecloud.lifecycle import log_lines
from vkprovider_fakecloud.state import ApiError, Store

from vkprovider.plugins.api import ContainerState, EnvVar, Phase


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _store(**lifecycle: float | None) -> tuple[Store, Clock]:
    clock = Clock()
    life = {"provisioning_seconds": 10, "serving_after_seconds": 5, "log_interval_seconds": 2, **lifecycle}
    return Store(config(lifecycle=life), clock), clock


def test_provisioning_running_serving_then_natural_exit() -> None:
    store, clock = _store(run_seconds=30)
    deployment, created = store.create(request("a"), {})
    assert created
    assert store.status(deployment).phase is Phase.PENDING
    clock.now += 10
    running = store.status(deployment)
    assert (running.phase, running.ready, running.containers[0].state) == (
        Phase.RUNNING,
        False,
        ContainerState.RUNNING,
    )
    clock.now += 5
    assert store.status(deployment).ready
    clock.now += 25
    done = store.status(deployment)
    assert (done.phase, done.containers[0].exit_code, done.reason) == (Phase.SUCCEEDED, 0, "Completed")
    texts = [text for _, _, text in log_lines(deployment, store.config, clock.now)]
    assert texts.count("server: heartbeat 1") == 1 and "server: heartbeat 15" in texts
    assert "server: heartbeat 16" not in texts  # no heartbeats after the exit
    assert texts[-1] == "container server exited with code 0"


def test_env_overrides_run_length_and_exit_code() -> None:
    store, clock = _store()
    container = (
        request("b")
        .containers[0]
        .model_copy(
            update={
                "env": [
                    EnvVar(name="FAKECLOUD_RUN_SECONDS", value="1"),
                    EnvVar(name="FAKECLOUD_EXIT_CODE", value="2"),
                ]
            }
        )
    )
    deployment, _ = store.create(request("b", containers=[container]), {})
    clock.now += 11
    status = store.status(deployment)
    assert (status.phase, status.reason, status.containers[0].exit_code) == (Phase.FAILED, "Error", 2)


def test_capacity_is_taken_and_returned_and_cheapest_offer_wins() -> None:
    store, _ = _store()
    assert store.create(request("c", gpu=None), {})[0].offer.id == "a100"  # CPU-only: cheapest offer
    store.create(request("d"), {})
    with pytest.raises(ApiError) as info:
        store.create(request("e"), {})
    assert (info.value.status, info.value.code) == (409, "NoCapacity")
    assert store.remove("d") and not store.remove("d")
    assert store.offers["a100"].capacity == 1


def test_label_uid_must_match_the_request() -> None:
    store, _ = _store()
    with pytest.raises(ApiError) as info:
        store.create(request("f"), {"vkprovider.io/pod-uid": "other"})
    assert info.value.status == 400
