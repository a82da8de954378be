"""The chaos report's own logic: crashes read from a service log, violations attributed to faults."""

from __future__ import annotations

import calendar
import time
from pathlib import Path

from tests.chaos.controlplane import Death
from tests.chaos.report import Finding, Report, loop_crashes, table
from tests.chaos.rig import Plan, PodTrace, Rig, Window

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


def test_table_attributes_each_violation_to_the_fault_window_around_it(tmp_path: Path) -> None:
    rig = Rig(cluster=None, workdir=tmp_path, seed=1, plan=Plan(faults=["watch-cut"], seconds=1))  # type: ignore[arg-type]
    rig.windows = [Window("watch-cut", 100.0, 110.0), Window("provider-5xx", 300.0, 305.0)]
    rig.pods = {"u1": PodTrace("p1", 90.0, 120.0), "u2": PodTrace("p2", 122.0, 140.0)}
    rig.churn = {"scale": 3}
    report = Report(seed=1)
    report.loop_crashes = [Finding(105.0, "crash"), Finding(124.0, "crash after-effect")]
    report.duplicates = [Finding(200.0, "twin")]
    report.miscounted = [Finding(303.0, "interrupted pod counted as a completion")]
    rows = {line.split()[0]: line.split()[1:] for line in table(rig, report).splitlines()[2:-1]}
    # fault, injected, pods, lost, orphaned, duplicated, miscounted Job completions, loop crashes
    assert rows["watch-cut"] == ["1", "2", "0", "0", "0", "0", "2"]  # p2 seen within 15 s after
    assert rows["provider-5xx"] == ["1", "0", "0", "0", "0", "1", "0"]
    assert rows["churn"] == ["only", "3", "2", "0", "0", "1", "0", "0"]


def test_a_control_plane_death_gets_its_own_row_and_its_aftermath(tmp_path: Path) -> None:
    rig = Rig(cluster=None, workdir=tmp_path, seed=1, plan=Plan(faults=["watch-cut"], seconds=1))  # type: ignore[arg-type]
    rig.windows = [Window("watch-cut", 100.0, 110.0)]
    rig.deaths = [Death("kube-apiserver", 42, 200.0, "exited with code 0", tmp_path / "log", 230.0)]
    rig.pods = {"u1": PodTrace("p1", 190.0, 260.0)}
    report = Report(seed=1)
    report.orphans = [Finding(240.0, "gone while the apiserver was"), Finding(400.0, "later")]
    rows = {line.split()[0]: line.split()[1:] for line in table(rig, report).splitlines()[2:-1]}
    assert rows["control-plane-died"] == ["1", "1", "0", "1", "0", "0", "0"]
    assert rows["churn"][4] == "1"  # ("only", times, pods, lost, orphaned): the later one is churn's
    assert "restarted by the rig after 30s" in rig.deaths[0].describe()
