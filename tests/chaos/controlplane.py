"""Watch the control plane while a chaos run goes: a component that dies when no fault is
restarting it is named, its log kept, and it is started again.

The session cluster runs on a machine shared with other jobs, so a component can die of
something the run did not do (a stray signal, an OOM kill, a crash). The service cannot be
blamed for that, yet without the apiserver it cannot converge, and the rig reads an apiserver
that does not answer as "no pods": every deployment would look orphaned. (Seed 889513 failed
so: the kube-apiserver stopped taking connections 9 s after a serve-sigkill, with no fault on
it, and never came back; the proxy refused every connection for 5 minutes.) The death is
recorded with how the process ended (a signal, an exit code) and the tail of its log, which is
copied into the run's workdir because the session cluster's directory is removed at the end.
A SIGTERMed apiserver refuses new connections at once but exits only after its ~60 s graceful
shutdown, so the death is recorded at the exit; the proxies' refusal count (in the summary)
shows when the outage began.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from vkprovider.devcluster import Cluster
from vkprovider.devcluster import process as processes

#: faults that stop a component on purpose (the rig restarts it itself)
RESTARTS = {"apiserver-killed": "kube-apiserver", "etcd-restarted": "etcd"}
LOG_TAIL_LINES = 200


@dataclass
class Death:
    component: str
    pid: int
    at: float
    how: str  #: "was killed by SIGKILL", "exited with code 0 (...)", "is gone (...)"
    log_copy: Path
    restarted_at: float | None = None
    restart_error: str = ""

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.at))
        if self.restarted_at is not None:
            after = f"restarted by the rig after {self.restarted_at - self.at:.0f}s"
        else:
            after = f"restart failed: {self.restart_error}"
        return f"{self.component} (pid {self.pid}) {self.how} at {when}, no fault on it; {after}; log tail in {self.log_copy}"


def how_it_ended(pid: int) -> str:
    """How a dead component ended, if it is this process's child (the session cluster's are)."""
    child = processes._CHILDREN.get(pid)
    code = child.poll() if child is not None else None
    if code is None:
        return "is gone (not a child of this process)"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    if code == 0:  # the Go components exit 0 after a graceful stop
        return "exited with code 0 (stopped gracefully: someone sent it SIGTERM or SIGINT)"
    return f"exited with code {code}"


async def check(cluster: Cluster, workdir: Path, restarting: Collection[str] = ()) -> list[Death]:
    """Every component of ``cluster`` that is dead (except those in ``restarting``, which a
    fault stopped on purpose): record it, keep its log tail, start it again with its arguments."""
    deaths = []
    for proc in list(cluster.processes):
        if proc.name in restarting or proc.name not in cluster.argv or proc.alive():
            continue
        at = time.time()
        copy = workdir / f"{proc.name}-{proc.pid}-died.log"
        tail = processes.log_tail(proc.log, LOG_TAIL_LINES)
        copy.write_text(tail + "\n")
        death = Death(proc.name, proc.pid, at, how_it_ended(proc.pid), copy)
        try:
            await cluster.start_component(proc.name)
            death.restarted_at = time.time()
        except Exception as exc:
            death.restart_error = f"{type(exc).__name__}: {exc}"
        deaths.append(death)
    return deaths
