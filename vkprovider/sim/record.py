"""What a run records: one sample per second of what the apiserver showed, the runner's own
actions, and the providers' billing ledgers. The report is a pure function of this recording
(saved as ``recording.json`` next to the report, so it can be regenerated or re-plotted).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vkprovider.devcluster.loadgen import RequestRecord


@dataclass
class WorkloadSample:
    desired: int = 0
    local: int = 0  #: non-terminating pods bound to local nodes
    external: int = 0  #: non-terminating pods bound to the virtual node
    pending: int = 0  #: not yet scheduled
    ready_local: int = 0
    ready_external: int = 0
    #: UIDs of the Ready external pods, to check them against the ledgers' serving entries
    ready_external_uids: list[str] = field(default_factory=list)

    @property
    def ready(self) -> int:
        return self.ready_local + self.ready_external


@dataclass
class TrainingSample:
    running: int = 0  #: pods bound to a node and not finished
    pending: int = 0
    gpus: int = 0  #: GPUs those bound pods hold
    state: str = ""  #: through Kueue: queued, admitted or finished ("" for plain Jobs)


@dataclass
class NodeSample:
    """One local node: what the ideal baseline packs replicas into (fragmentation included)."""

    gpus: int = 0  #: allocatable
    ready: bool = True
    cordoned: bool = False  #: unschedulable (or hard-tainted): running pods stay, none are added
    training_gpus: int = 0  #: GPUs of training pods bound to it


@dataclass
class Sample:
    t: float  #: unix seconds
    workloads: dict[str, WorkloadSample] = field(default_factory=dict)
    training: dict[str, TrainingSample] = field(default_factory=dict)
    local_gpus: int = 0  #: allocatable GPUs of Ready, schedulable local nodes
    local_gpus_used: int = 0  #: GPUs requested by pods bound to local nodes
    cordoned: list[str] = field(default_factory=list)
    gate_tainted: bool | None = None  #: the gate's taint on the virtual node (None: no node)
    external_by_provider: dict[str, int] = field(default_factory=dict)
    spend_rate: float = 0.0  #: $/h of the providers' open ledger entries at ``t`` (live view)
    service_spend_rate: float | None = None  #: $/h vkprovider itself accounts (admin /state budgets)
    queue_gpus: int | None = None  #: the ClusterQueue's local GPU quota (training via Kueue)
    nodes: dict[str, NodeSample] = field(default_factory=dict)  #: local nodes
    #: UIDs of every pod bound to the virtual node (terminating ones too): a ledger entry billing
    #: for a UID not here is an orphan at ``t``
    virtual_pod_uids: list[str] | None = None
    #: unix seconds the pod list was requested (``t`` is taken after every read): a pod's state is
    #: from between the two, so a ledger entry ending in between did not make its pod a ghost
    pods_at: float | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Sample:
        return cls(
            t=float(data["t"]),
            workloads={k: WorkloadSample(**v) for k, v in data.get("workloads", {}).items()},
            training={k: TrainingSample(**v) for k, v in data.get("training", {}).items()},
            local_gpus=int(data.get("local_gpus", 0)),
            local_gpus_used=int(data.get("local_gpus_used", 0)),
            cordoned=list(data.get("cordoned", [])),
            gate_tainted=data.get("gate_tainted"),
            external_by_provider=dict(data.get("external_by_provider", {})),
            spend_rate=float(data.get("spend_rate", 0.0)),
            service_spend_rate=data.get("service_spend_rate"),
            queue_gpus=data.get("queue_gpus"),
            nodes={k: NodeSample(**v) for k, v in data.get("nodes", {}).items()},
            virtual_pod_uids=data.get("virtual_pod_uids"),
            pods_at=data.get("pods_at"),
        )


@dataclass
class Action:
    """Something the runner did to the world (a timeline event or its end)."""

    t: float
    kind: str  #: training-start, training-end, capacity, outage-start, outage-end, cordon, uncordon, scale
    subject: str
    detail: str = ""
    value: float | None = None  #: the number the action set (capacity, replicas), if any


@dataclass
class Admission:
    """One training Job's way through Kueue, from the apiserver's own timestamps (unix seconds,
    one-second resolution): the earliest reading of each step is kept."""

    job: str
    gpus: int = 0
    created: float | None = None  #: the Job's creationTimestamp
    admitted: float | None = None  #: its Workload's Admitted=True
    first_pod: float | None = None  #: the earliest creationTimestamp of its pods
    finished: float | None = None  #: its Workload's Finished=True


@dataclass
class LedgerEntry:
    """One billed deployment, as a provider's ledger reports it (unix seconds)."""

    provider: str
    uid: str
    offer_id: str
    gpus: int
    price_per_hour: float
    started_at: float
    ended_at: float | None = None
    deployment_id: str = ""
    gpu_type: str = ""
    end_reason: str | None = None

    @classmethod
    def from_wire(cls, provider: str, data: dict[str, Any]) -> LedgerEntry:
        ended = data.get("ended_at")
        return cls(
            provider=provider,
            uid=str(data["uid"]),
            offer_id=str(data.get("offer_id", "")),
            gpus=int(data.get("gpus", 1)),
            price_per_hour=float(data["price_per_hour"]),
            started_at=float(data["started_at"]),
            ended_at=None if ended is None else float(ended),
            deployment_id=str(data.get("deployment_id") or data.get("provider_id") or ""),
            gpu_type=str(data.get("gpu_type", "")),
            end_reason=data.get("end_reason"),
        )

    def seconds(self, until: float) -> float:
        """Billed seconds up to ``until`` (an open entry is billed until then)."""
        end = until if self.ended_at is None else min(self.ended_at, until)
        return max(0.0, end - self.started_at)

    def open_at(self, t: float) -> bool:
        return self.started_at <= t and (self.ended_at is None or t < self.ended_at)


@dataclass
class Recording:
    scenario: dict[str, Any]  #: the validated scenario, as data
    day_start: float  #: unix seconds of simulated 00:00
    day_end: float  #: unix seconds the last timeline step ran (simulated end of day)
    end: float  #: unix seconds the recording stopped (after settling); ledgers billed until here
    samples: list[Sample] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    ledgers: dict[str, list[LedgerEntry]] = field(default_factory=dict)
    ledger_source: str = "fakecloud /admin/ledger"
    components: dict[str, bool] = field(default_factory=dict)  #: gate, descheduler: were they running
    orphans: list[str] = field(default_factory=list)  #: provider/uid without a pod at the end
    notes: list[str] = field(default_factory=list)
    admissions: list[Admission] = field(default_factory=list)  #: training via Kueue, in timeline order
    #: workload -> every request the load generator sent to its Service (None: no load was driven)
    traffic: dict[str, list[RequestRecord]] | None = None

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> Recording:
        data = json.loads(path.read_text())
        return cls(
            scenario=data["scenario"],
            day_start=float(data["day_start"]),
            day_end=float(data["day_end"]),
            end=float(data["end"]),
            samples=[Sample.from_json(s) for s in data["samples"]],
            actions=[Action(**a) for a in data["actions"]],
            ledgers={p: [LedgerEntry(**e) for e in es] for p, es in data["ledgers"].items()},
            ledger_source=data.get("ledger_source", ""),
            components=dict(data.get("components", {})),
            orphans=list(data.get("orphans", [])),
            notes=list(data.get("notes", [])),
            admissions=[Admission(**a) for a in data.get("admissions", [])],
            traffic=None
            if data.get("traffic") is None
            else {w: [RequestRecord(**r) for r in rs] for w, rs in data["traffic"].items()},
        )
