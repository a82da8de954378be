"""The long chaos run, behind ``make chaos`` (skipped unless ``VKPROVIDER_CHAOS_LONG=1``): every
fault kind, each injected at least twice, with two replicas under leader election.

Adds to the small run: timeouts longer than the adapter's deadline, a provider unreachable for a
minute, kube-apiserver SIGKILLed and restarted, etcd restarted, and leadership moved between the
replicas by partitioning the leader from the apiserver (so each replica loses and regains terms).
Length: ``VKPROVIDER_CHAOS_SECONDS`` (default 900) of faults, then settling and the invariants;
``VKPROVIDER_CHAOS_FAULTS=a,b`` restricts the fault kinds.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from tests.chaos.conftest import chaos_seed
from tests.chaos.faults import FAULTS
from tests.chaos.invariant_checks import Invariants
from tests.chaos.report import Report
from tests.chaos.rig import Plan
from tests.chaos.runs import chaos_run
from vkprovider.devcluster import Cluster

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.chaos,
    pytest.mark.skipif(not os.environ.get("VKPROVIDER_CHAOS_LONG"), reason="long chaos run: make chaos"),
]


def _faults() -> list[str]:
    """``VKPROVIDER_CHAOS_FAULTS=a,b`` narrows a run (e.g. to replay one fault kind)."""
    raw = os.environ.get("VKPROVIDER_CHAOS_FAULTS")
    chosen = [f.strip() for f in raw.split(",") if f.strip()] if raw else sorted(FAULTS)
    unknown = sorted(set(chosen) - set(FAULTS))
    if unknown:
        raise pytest.UsageError(f"VKPROVIDER_CHAOS_FAULTS: unknown {unknown}; known: {sorted(FAULTS)}")
    return chosen


PLAN = Plan(
    faults=_faults(),
    seconds=float(os.environ.get("VKPROVIDER_CHAOS_SECONDS", "900")),
    replicas=2,
    deployments=4,
    max_replicas=3,
    window=(12.0, 25.0),
    outage_seconds=60.0,
    settle_timeout=300.0,
)


@pytest.fixture(scope="module")
async def run(cluster: Cluster) -> AsyncIterator[Report]:
    yield await chaos_run(cluster, "long", chaos_seed(), PLAN)


class TestLongRun(Invariants):
    """The run above, held to every invariant."""
