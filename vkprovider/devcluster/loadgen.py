"""A bounded load generator: a fixed rate for a fixed time, to one Service's ClusterIP, from the
node namespace — so every request goes through kube-proxy's rules, as a client pod's would.

Requests start on a fixed schedule (request *k* at ``k / rate`` seconds), each on a new
connection, whatever earlier ones are doing (an open-loop load: a slow replica does not slow the
offered rate down); each has ``timeout`` seconds to answer. The report counts requests and
failures, gives p50/p99 latency, and who answered: a local pod by name or a provider by name
(the replicas' answers say, see :mod:`pod_listeners` and fakecloud's replica server). The
target must be in the Service range, so the generator can never be pointed elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from vkprovider.devcluster.datapath import SERVICE_CIDR
from vkprovider.devcluster.netns_socket import NetnsSockets
from vkprovider.devcluster.replica_http import get

MAX_RATE = 1000.0
MAX_DURATION = 3600.0


def _percentile(values: list[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 2)


@dataclass
class RequestRecord:
    """One request as the generator saw it: when it started (unix seconds), who answered
    (``local/<pod>`` or ``<provider>/<deployment>``; empty when it failed), how long the answer
    took (None when it failed) and why it failed."""

    t: float
    answerer: str = ""
    latency: float | None = None
    error: str = ""

    @property
    def failed(self) -> bool:
        return self.latency is None


@dataclass
class LoadReport:
    requests: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    #: ``local/<pod>`` or ``<provider>/<deployment>`` → answers
    answered_by: Counter[str] = field(default_factory=Counter)
    #: ``local`` or a provider name → latencies of its answers
    latencies_by_where: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    #: every request in start order (the simulated day's traffic chart and table come from these)
    records: list[RequestRecord] = field(default_factory=list)

    def add(self, answerer: str, latency: float) -> None:
        self.latencies.append(latency)
        self.answered_by[answerer] += 1
        self.latencies_by_where.setdefault(answerer.split("/", 1)[0], []).append(latency)

    def percentile(self, q: int) -> float | None:
        return _percentile(self.latencies, q)

    def by_where(self) -> Counter[str]:
        """Answers per ``local`` or provider name."""
        return Counter({where: len(values) for where, values in self.latencies_by_where.items()})

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "failed": self.failed,
            "p50_ms": _ms(self.percentile(50)),
            "p99_ms": _ms(self.percentile(99)),
            "by_where": {
                where: {
                    "answers": len(values),
                    "p50_ms": _ms(_percentile(values, 50)),
                    "p99_ms": _ms(_percentile(values, 99)),
                }
                for where, values in sorted(self.latencies_by_where.items())
            },
            "answered_by": dict(sorted(self.answered_by.items())),
            "errors": dict(self.errors),
        }


def who(answer: dict[str, Any]) -> str:
    if answer.get("where") == "local":
        return f"local/{answer.get('pod', '?')}"
    return f"{answer.get('provider', '?')}/{answer.get('deployment', '?')}"


def check_target(address: str, rate: float, duration: float) -> None:
    """Refuse anything but a ClusterIP and a bounded load (ValueError naming the field)."""
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        raise ValueError(f"target: {address!r} is not an IPv4 address") from None
    if ip not in ipaddress.IPv4Network(SERVICE_CIDR):
        raise ValueError(f"target: {address} is not a ClusterIP (the Service range is {SERVICE_CIDR})")
    if not 0 < rate <= MAX_RATE:
        raise ValueError(f"rate: {rate} requests/s is outside (0, {MAX_RATE:.0f}]")
    if not 0 < duration <= MAX_DURATION:
        raise ValueError(f"duration: {duration} s is outside (0, {MAX_DURATION:.0f}]")


async def run_load(
    node_netns: str,
    cluster_ip: str,
    port: int,
    *,
    rate: float,
    duration: float,
    timeout: float = 10.0,
    path: str = "/",
    report: LoadReport | None = None,
    stop: asyncio.Event | None = None,
) -> LoadReport:
    """``report``: fill this one (a caller can read its records while the load runs); ``stop``:
    start no further request once it is set (the ones in flight still finish and count), for a
    caller whose scenario ends when it ends rather than at a fixed time."""
    check_target(cluster_ip, rate, duration)
    node = NetnsSockets(node_netns)
    report = LoadReport() if report is None else report

    async def one() -> None:
        record = RequestRecord(time.time())
        report.records.append(record)
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                answer = await get(await node.client(), cluster_ip, port, path)
        except (OSError, TimeoutError) as exc:
            report.failed += 1
            record.error = f"{type(exc).__name__}: {exc}"[:120]
            report.errors[record.error] += 1
            return
        record.answerer, record.latency = who(answer), time.monotonic() - started
        report.add(record.answerer, record.latency)

    try:
        async with asyncio.TaskGroup() as group:
            start = time.monotonic()
            total = max(1, int(rate * duration))
            for k in range(total):
                if stop is not None and stop.is_set():
                    break
                delay = start + k / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                report.requests += 1
                group.create_task(one())
    finally:
        node.close()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vkprovider.devcluster.loadgen",
        description="fixed-rate, fixed-duration HTTP load to a Service's ClusterIP from the node namespace",
    )
    parser.add_argument("--netns", required=True, help="the dev cluster's node namespace")
    parser.add_argument("--target", required=True, help="CLUSTER_IP:PORT")
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    try:
        if not port.isdigit():
            raise ValueError(f"target: {args.target!r} is not CLUSTER_IP:PORT")
        report = asyncio.run(run_load(args.netns, host, int(port), rate=args.rate, duration=args.duration))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_json(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
