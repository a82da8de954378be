"""The invariants every chaos run is checked against, once per run module: a test module
subclasses ``Invariants`` as ``Test…`` and provides a module-scoped ``run`` fixture (its Report)."""

from __future__ import annotations

from tests.chaos import invariants
from tests.chaos.report import Report


class Invariants:
    async def test_every_deployment_has_its_replicas_running(self, run: Report) -> None:
        invariants.replicas_running(run)

    async def test_no_pod_is_lost(self, run: Report) -> None:
        invariants.no_pod_lost(run)

    async def test_no_deployment_is_orphaned(self, run: Report) -> None:
        invariants.no_orphan(run)

    async def test_no_uid_has_two_live_deployments(self, run: Report) -> None:
        invariants.no_twin(run)

    async def test_no_key_is_stuck_in_the_queue(self, run: Report) -> None:
        invariants.no_stuck_key(run)

    async def test_no_secret_value_in_logs_or_events(self, run: Report) -> None:
        invariants.no_secret_leak(run)

    async def test_the_service_never_exited_by_itself(self, run: Report) -> None:
        invariants.no_crash(run)

    async def test_no_supervised_loop_of_the_service_crashed(self, run: Report) -> None:
        invariants.no_loop_crash(run)

    async def test_no_interrupted_pod_is_counted_as_a_job_completion(self, run: Report) -> None:
        invariants.no_interrupted_completion(run)
