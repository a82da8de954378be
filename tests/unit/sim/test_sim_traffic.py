"""The day's traffic from hand-made load-generator records: the chart's series, the report's
table, and the verdict's invariant (no failed request), which a single failure breaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.sim.test_sim_report import T0, recording, scenario
from vkprovider.devcluster.loadgen import RequestRecord
from vkprovider.sim import report, traffic
from vkprovider.sim.invariants import invariants
from vkprovider.sim.record import Recording

REFUSED = "ConnectionRefusedError: [Errno 111] Connection refused"


def answered(t: float, who: str, latency: float) -> RequestRecord:
    return RequestRecord(T0 + t, who, latency)


def day_of_traffic() -> Recording:
    """2 requests per real second: local until the training at 2 s, cheap 2-4 s, dear 4-6 s,
    local again from 6 s (the recording's replicas, as a kube-proxy routing them would)."""
    rec = recording()
    records = []
    for i in range(20):
        t = i * 0.5
        if t < 2 or t >= 6:
            records.append(answered(t, f"local/chat-{i % 4}", 0.002))
        elif t < 4:
            records.append(answered(t, "cheap/c-0", 0.05))
        else:
            records.append(answered(t, "dear/d-2", 0.03))
    rec.traffic = {"chat": records}
    return rec


def test_the_series_counts_each_answer_where_it_was_served_per_second() -> None:
    data = traffic.traffic_series(scenario(), day_of_traffic())
    assert data.bucket_seconds == 1.0
    assert data.hours == [float(i) for i in range(10)]  # a real second is a simulated hour
    assert data.local == [2.0, 2.0, 0, 0, 0, 0, 2.0, 2.0, 2.0, 2.0]
    assert data.external == {
        "cheap": [0, 0, 2.0, 2.0, 0, 0, 0, 0, 0, 0],
        "dear": [0, 0, 0, 0, 2.0, 2.0, 0, 0, 0, 0],
    }
    assert data.failed == [0] * 10


def test_a_failed_request_is_marked_in_its_bucket_and_breaks_the_verdict() -> None:
    s, rec = scenario(), day_of_traffic()
    assert rec.traffic is not None
    rec.traffic["chat"].append(RequestRecord(T0 + 6.2, error=REFUSED))
    data = traffic.traffic_series(s, rec)
    assert data.failed == [0, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    assert data.local[6] == 2.0  # a failure is not counted as served
    inv = invariants(s, rec.samples, rec.actions, rec.ledgers, [], traffic=rec.traffic, day_start=T0)
    assert not inv.ok
    assert inv.broken == [f"chat: 1 of 21 requests failed (first at 06:12, e.g. {REFUSED})"]


def test_a_clean_day_of_traffic_keeps_the_verdict() -> None:
    s, rec = scenario(), day_of_traffic()
    inv = invariants(s, rec.samples, rec.actions, rec.ledgers, [], traffic=rec.traffic, day_start=T0)
    assert inv.ok and inv.traffic == []


def test_a_workload_without_any_request_breaks_the_verdict() -> None:
    s, rec = scenario(), recording()
    rec.traffic = {"chat": []}
    assert traffic.traffic_broken(s, rec.traffic, T0) == [
        "chat: no request was recorded (the load generator did not run)"
    ]
    assert traffic.traffic_broken(s, None, T0) == []  # not driven at all: not measured, the report says so


def test_the_table_splits_latency_local_and_external() -> None:
    s, rec = scenario(), day_of_traffic()
    assert rec.traffic is not None
    rec.traffic["chat"] += [
        RequestRecord(T0 + 9.9, error=REFUSED),
        RequestRecord(T0 + 9.95, error="TimeoutError: "),
    ]
    (row,) = traffic.traffic_table(s, rec)
    assert (row.workload, row.requests, row.failed) == ("chat", 22, 2)
    assert row.answered == {"cheap": 4, "dear": 4, "local": 12}
    assert row.local_p50_ms == pytest.approx(2.0) and row.local_p99_ms == pytest.approx(2.0)
    # external: four at 30 ms, four at 50 ms
    assert row.external_p50_ms == pytest.approx(40.0) and row.external_p99_ms == pytest.approx(50.0)
    assert row.errors == {REFUSED: 1, "TimeoutError: ": 1}


@pytest.mark.parametrize(
    ("traffic_data", "error"),
    [
        (None, traffic.NoTraffic),
        ({}, traffic.NoTraffic),
        ({"chat": []}, traffic.NoTraffic),
        ({"chat": [answered(1.0, "elsewhere/x", 0.01)]}, traffic.BadTraffic),
        ({"chat": [RequestRecord(T0 + 1.0, "", 0.01)]}, traffic.BadTraffic),
        (
            {"chat": [answered(1.0, "local/p", 0.01)], "nope": [answered(1.0, "local/p", 0.01)]},
            traffic.BadTraffic,
        ),
    ],
)
def test_an_empty_or_wrong_recording_is_refused(
    traffic_data: dict[str, list[RequestRecord]] | None, error: type[Exception]
) -> None:
    s, rec = scenario(), recording()
    rec.traffic = traffic_data
    with pytest.raises(error):
        traffic.traffic_series(s, rec)
    with pytest.raises(error):
        traffic.traffic_table(s, rec)


def test_the_report_has_the_traffic_table_and_the_chart_its_panel(tmp_path: Path) -> None:
    rec = day_of_traffic()
    folder = report.write(rec, tmp_path / "r")
    md = (folder / "report.md").read_text()
    assert md.splitlines()[2].startswith("**Verdict: every invariant held**")
    assert "no failed request" in md.splitlines()[2]
    assert "| chat | 5 | 20 | **0** | 12 | 4 | 4 | 2.0 / 2.0 | 40.0 / 50.0 |" in md
    summary = json.loads((folder / "report.json").read_text())
    assert summary["traffic"][0]["requests"] == 20 and summary["traffic"][0]["failed"] == 0
    assert (folder / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert Recording.load(folder / "recording.json").traffic == rec.traffic  # the records round-trip
    assert report.markdown(Recording.load(folder / "recording.json")) == md


def test_failures_lead_the_report_and_are_listed(tmp_path: Path) -> None:
    rec = day_of_traffic()
    assert rec.traffic is not None
    rec.traffic["chat"].append(RequestRecord(T0 + 6.2, error=REFUSED))
    md = (report.write(rec, tmp_path / "r") / "report.md").read_text()
    assert md.splitlines()[2].startswith("**Verdict: BROKEN** — chat: 1 of 21 requests failed")
    assert f"- chat: failed requests: 1x {REFUSED}" in md


def test_without_traffic_the_chart_still_draws_and_the_report_says_not_measured(tmp_path: Path) -> None:
    rec = recording()
    folder = report.write(rec, tmp_path / "r")
    assert "Not measured: the data path did not start" in (folder / "report.md").read_text()
    assert (folder / "timeline.png").exists()
