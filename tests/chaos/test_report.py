"""The chaos report's own parsing: supervised-loop crashes read from a service log."""

from __future__ import annotations

import calendar
import time

from tests.chaos.report import loop_crashes

LOG = """\
2026-12-01 09:30:58,000 INFO    vkprovider.pods.controller: synced
2026-12-01 09:30:59,056 ERROR   vkprovider.tasks: task pod-controller crashed; restarting in 1.0s
  + Exception Group Traceback (most recent call last):
  |   File "/x/tasks.py", line 36, in supervise
  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)
  +-+---------------- 1 ----------------
    | Traceback (most recent call last):
    |   File "/x/client.py", line 84, in stream
    | aiohttp.client_exceptions.ClientPayloadError: Response payload is not completed
    +------------------------------------
2026-12-01 09:31:00,697 ERROR   vkprovider.tasks: task node-agent crashed; restarting in 2.0s
Traceback (most recent call last):
  File "/x/agent.py", line 1, in run
vkprovider.errors.Transient: plugin is down
2026-12-01 09:31:01,000 INFO    vkprovider.pods.controller: synced
"""


def test_loop_crashes_are_read_with_time_and_cause() -> None:
    found = loop_crashes("replica-a", LOG)
    assert [f.text for f in found] == [
        "replica-a: pod-controller crashed: aiohttp.client_exceptions.ClientPayloadError: "
        "Response payload is not completed",
        "replica-a: node-agent crashed: vkprovider.errors.Transient: plugin is down",
    ]
    expected = calendar.timegm(time.strptime("2026-12-01 09:30:59", "%Y-%m-%d %H:%M:%S")) + 0.056
    assert abs(found[0].at - expected) < 1e-6
    assert loop_crashes("b", "2026-12-01 09:30:58,000 INFO all fine\n") == []
