"""The invariant checks of a chaos run, shared by the small and the long run: each raises
``AssertionError`` listing the violations. Each run's module wraps them in its own tests, so a
known defect can be marked on the run where it shows."""

from __future__ import annotations

from tests.chaos.report import Report


def replicas_running(run: Report) -> None:
    assert run.converged, "\n".join(run.unconverged)


def no_pod_lost(run: Report) -> None:
    assert not run.lost, "\n".join(f.text for f in run.lost)


def no_orphan(run: Report) -> None:
    assert not run.orphans, "\n".join(f.text for f in run.orphans)


def no_twin(run: Report) -> None:
    assert run.ledger_entries > 0, "the ledgers recorded nothing: the run deployed nothing"
    assert not run.duplicates, "\n".join(f.text for f in run.duplicates)


def no_stuck_key(run: Report) -> None:
    assert not run.stuck_queue, run.stuck_queue


def no_secret_leak(run: Report) -> None:
    assert not run.secret_leaks, run.secret_leaks


def no_crash(run: Report) -> None:
    assert not run.crashes, run.crashes


def no_loop_crash(run: Report) -> None:
    assert not run.loop_crashes, "\n".join(f.text for f in run.loop_crashes)


def no_interrupted_completion(run: Report) -> None:
    """No interrupted pod is ever counted as a Job completion (issue 22): every Succeeded pod
    has a provider-reported exit 0."""
    assert not run.miscounted, "\n".join(f.text for f in run.miscounted)
