"""The day's traffic, from the load generator's own records (pure): who answered each request,
how fast, and which failed.

Each workload's Service gets ``requests_per_second`` all day (:meth:`Run.start_traffic`); every
request is a :class:`RequestRecord` in ``Recording.traffic``. From those alone come the traffic
chart's series (requests per second answered locally and by each provider, failures marked),
the report's traffic table (requests, failed, p50/p99 latency local vs external) and the
verdict's traffic invariant: **no request fails**, through every burst and every return.
A recording whose answers name no known place (a provider the scenario does not have) is
refused rather than drawn.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from vkprovider.devcluster.loadgen import RequestRecord
from vkprovider.sim.record import Recording
from vkprovider.sim.scenario import Scenario
from vkprovider.sim.timeline import sim_clock

LOCAL = "local"
#: a request not answered within this many real seconds counts as failed
REQUEST_TIMEOUT_SECONDS = 10.0
#: the chart aims at about this many buckets over the day (each at least one real second)
TARGET_BUCKETS = 150


class NoTraffic(ValueError):
    """No request was recorded: there is no traffic to draw or tabulate."""


class BadTraffic(ValueError):
    """The records do not fit the scenario (an unknown workload or answerer, an answer without
    an answerer): drawing them would show something that did not happen."""


def where(s: Scenario, record: RequestRecord) -> str:
    """``local`` or the provider that answered; :class:`BadTraffic` for anything else."""
    if record.failed:
        raise BadTraffic(f"request at {record.t:.3f} failed: it has no answerer")
    place = record.answerer.split("/", 1)[0]
    if place != LOCAL and place not in {p.name for p in s.providers}:
        raise BadTraffic(
            f"request at {record.t:.3f} answered by {record.answerer!r}: not local nor a provider"
        )
    return place


def _checked(s: Scenario, rec: Recording) -> dict[str, list[RequestRecord]]:
    if not rec.traffic or not any(rec.traffic.values()):
        raise NoTraffic("no request was recorded")
    known = {w.name for w in s.workloads}
    for name, records in rec.traffic.items():
        if name not in known:
            raise BadTraffic(f"traffic recorded for {name!r}, which is not a workload of the scenario")
        for r in records:
            if not r.failed:
                where(s, r)
    return rec.traffic


@dataclass
class TrafficSeries:
    """Requests per real second over the day, one value per bucket (all workloads together)."""

    bucket_seconds: float  #: real seconds per bucket
    hours: list[float] = field(default_factory=list)  #: bucket start, simulated clock
    local: list[float] = field(default_factory=list)  #: answered by a local replica, per second
    external: dict[str, list[float]] = field(default_factory=dict)  #: provider -> answered, per second
    failed: list[int] = field(default_factory=list)  #: failed requests started in the bucket


def traffic_series(s: Scenario, rec: Recording) -> TrafficSeries:
    traffic = _checked(s, rec)
    end = max(rec.day_end, rec.day_start + s.clock.real_seconds)
    span = end - rec.day_start
    width = max(1.0, span / TARGET_BUCKETS)
    count = max(1, int(span // width) + (1 if span % width else 0))
    out = TrafficSeries(width)
    out.hours = [s.sim(i * width) / 3600.0 for i in range(count)]
    out.local = [0.0] * count
    out.external = {p.name: [0.0] * count for p in s.providers}
    out.failed = [0] * count
    for records in traffic.values():
        for r in records:
            i = int((r.t - rec.day_start) // width)
            if not 0 <= i < count:
                continue  # before the day or after it (a late start): not on the day's clock
            if r.failed:
                out.failed[i] += 1
                continue
            place = where(s, r)
            column = out.local if place == LOCAL else out.external[place]
            column[i] += 1.0 / width
    return out


def _percentile_ms(values: list[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0] * 1000
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000


@dataclass
class TrafficRow:
    """One workload's requests over the whole run."""

    workload: str
    requests: int
    failed: int
    answered: dict[str, int]  #: local or provider -> answers
    local_p50_ms: float | None
    local_p99_ms: float | None
    external_p50_ms: float | None
    external_p99_ms: float | None
    errors: dict[str, int]  #: why requests failed -> how many


def traffic_table(s: Scenario, rec: Recording) -> list[TrafficRow]:
    """A row per workload of the scenario (in its order), from every recorded request."""
    traffic = _checked(s, rec)
    rows = []
    for w in s.workloads:
        records = traffic.get(w.name, [])
        local = [r.latency for r in records if r.latency is not None and where(s, r) == LOCAL]
        external = [r.latency for r in records if r.latency is not None and where(s, r) != LOCAL]
        answered = Counter(where(s, r) for r in records if not r.failed)
        rows.append(
            TrafficRow(
                w.name,
                len(records),
                sum(1 for r in records if r.failed),
                dict(sorted(answered.items())),
                _percentile_ms(local, 50),
                _percentile_ms(local, 99),
                _percentile_ms(external, 50),
                _percentile_ms(external, 99),
                dict(Counter(r.error for r in records if r.failed).most_common()),
            )
        )
    return rows


def traffic_broken(
    s: Scenario, traffic: dict[str, list[RequestRecord]] | None, day_start: float
) -> list[str]:
    """The verdict's traffic invariant: every workload's Service got requests and none failed.
    ``None`` (no data path on this machine) checks nothing; the report says traffic was not
    measured."""
    if traffic is None:
        return []
    out = []
    for w in s.workloads:
        records = traffic.get(w.name, [])
        failed = [r for r in records if r.failed]
        if not records:
            out.append(f"{w.name}: no request was recorded (the load generator did not run)")
        elif failed:
            first = min(r.t for r in failed)
            why = Counter(r.error for r in failed).most_common(1)[0][0]
            out.append(
                f"{w.name}: {len(failed)} of {len(records)} requests failed "
                f"(first at {sim_clock(s, day_start, first)}, e.g. {why})"
            )
    return out
