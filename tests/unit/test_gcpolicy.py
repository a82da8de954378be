"""The collector settings of a long-running command: start-up frozen, young collections spaced
out, and cyclic garbage made afterwards still collected without anyone calling ``gc.collect``."""

from __future__ import annotations

import gc
import weakref

import pytest

from vkprovider import eventloop, gcpolicy

pytestmark = pytest.mark.usefixtures("restored_gc")


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_start_up_objects_are_frozen_and_the_young_threshold_raised() -> None:
    before = gc.get_freeze_count()
    _, middle_before, old_before = gc.get_threshold()
    gcpolicy.settle_after_start_up()
    assert gc.get_freeze_count() > before
    young, middle, old = gc.get_threshold()
    assert young == gcpolicy.YOUNG_THRESHOLD
    assert (middle, old) == (middle_before, old_before)  # the older generations' ratios kept


def test_a_cycle_made_after_settling_is_still_collected_by_the_automatic_collector() -> None:
    gcpolicy.settle_after_start_up()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # only the cyclic collector can free it
    kept = [[] for _ in range(3 * gcpolicy.YOUNG_THRESHOLD)]  # net container allocations
    assert gone() is None
    del kept


def test_the_long_running_commands_settle_the_collector_before_their_loop() -> None:
    async def threshold() -> int:
        return gc.get_threshold()[0]

    assert eventloop.run(threshold(), "asyncio") == gcpolicy.YOUNG_THRESHOLD
