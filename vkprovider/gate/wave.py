"""The wave planner: which external replicas may come home now, and which slots stay reserved.

The gate decides *which* replicas the Descheduler may evict; the Descheduler still evicts them
(under their PodDisruptionBudgets), because the shipped policy selects only pods carrying the
mark label. Each tick the plan is recomputed from the caches:

1. a :class:`~vkprovider.gate.fit.Snapshot` of every node and the pods bound or nominated to it;
2. capacity first for what is already on its way: pods Kueue admitted (ungated, not bound yet),
   the replacements of replicas that already left (*flights*) but have not bound, and the
   pending gangs Kueue will admit next (:mod:`vkprovider.gate.gangs`: their Jobs are suspended,
   so their pods do not exist yet; phantom pods from their templates, all or nothing per gang);
3. then the eligible external replicas — on the virtual node, owned by a ReplicaSet or
   StatefulSet whose template does not pin ``spec.nodeName``, Running and Ready, not tolerating
   the gate's taint, their workload not backing off — replicas already marked first (a wave is
   not reshuffled), then dearest first (the placement annotation's list price). Each one whose
   replacement fits is marked and its slot reserved before the next is tried.

A flight ends when its replacement is Ready on a local node. It *fails* when the replacement is
re-created on the virtual node, or is not Ready locally ``come_home_seconds`` after the replica
left: its slot is released and its workload is not marked for ``backoff_seconds`` (the runner
records a Warning Event on the owner).

The taint decision reads :attr:`Plan.units` instead of the raw free-GPU count whenever external
replicas exist: the GPUs of the replicas that really fit (each at least 1) plus those of the
flights still holding a slot — free capacity in replica units of the workloads that are out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from vkprovider.gate.affinity import label_selector_matches
from vkprovider.gate.config import TaintConfig
from vkprovider.gate.fit import Snapshot
from vkprovider.gate.gangs import Gang
from vkprovider.gate.podspec import pod_requests, replacement
from vkprovider.gate.selector import tolerates
from vkprovider.gate.wave_config import ReturnHomeConfig
from vkprovider.placement.explain import ANNOTATION_KEY as PLACEMENT_ANNOTATION

JSON = Mapping[str, Any]
REPLICA_OWNERS = ("ReplicaSet", "StatefulSet")
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VIRTUAL_NODE_LABEL = ("type", "virtual-kubelet")


@dataclass(frozen=True)
class Owner:
    kind: str
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def owner_of(pod: JSON) -> Owner | None:
    """The controlling ReplicaSet/StatefulSet (``None`` for Jobs, DaemonSets, bare pods)."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") in REPLICA_OWNERS:
            return Owner(ref["kind"], meta.get("namespace", ""), ref.get("name", ""), ref.get("uid", ""))
    return None


def price(pod: JSON) -> float:
    """List price per hour of the offer the pod runs on (``vkprovider.io/placement``), 0 if unknown."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(PLACEMENT_ANNOTATION)
    try:
        chosen = json.loads(raw)["chosen"] if raw else None
        return float(chosen["price"]) if chosen else 0.0
    except (ValueError, KeyError, TypeError):
        return 0.0


def gpu_units(pod: JSON) -> float:
    """A replica's weight in the taint decision: its GPUs of every kind, at least 1."""
    gpus = sum((v for k, v in pod_requests(pod).items() if k.endswith("/gpu")), Decimal(0))
    return max(1.0, float(gpus))


def _key(pod: JSON) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _uid(pod: JSON) -> str:
    return str((pod.get("metadata") or {}).get("uid", ""))


def is_ready(pod: JSON) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _summary(reasons: Mapping[str, str]) -> str:
    """Why no node took a replica, grouped: ``Insufficient nvidia.com/gpu: 498 node(s); …``."""
    if not reasons:
        return "no local node"
    counts: dict[str, list[str]] = {}
    for node, why in sorted(reasons.items()):
        counts.setdefault(why, []).append(node)
    return "; ".join(
        f"{why}: {nodes[0]}" if len(nodes) == 1 else f"{why}: {len(nodes)} nodes"
        for why, nodes in counts.items()
    )


def reserve_gangs(snap: Snapshot, gangs: Sequence[Gang]) -> list[str]:
    """Place every gang's phantom pods in ``snap``, all or nothing per gang: a gang that does
    not fit the local nodes reserves nothing (Kueue may admit it, but its pods wait or run
    elsewhere, and half a gang's GPUs held would keep replicas out for nothing). Returns the
    gangs held (namespace/name)."""
    held = []
    for gang in gangs:
        placed: list[JSON] = []
        for pod in gang.pods:
            node, _ = snap.find(pod)
            if node is None:
                break
            snap.place(pod, node)
            placed.append(pod)
        else:
            held.append(gang.workload)
            continue
        for undo in placed:
            snap.remove(undo)
    return held


@dataclass
class Flight:
    """A marked replica, from its mark until its replacement is home (or did not come)."""

    pod: JSON  #: the marked pod as last seen
    owner: Owner
    siblings: frozenset[str]  #: the owner's pod UIDs at marking time: a replacement is a new one
    gone_at: float | None = None  #: when the replica left the virtual node (evicted)
    replacement_uid: str = ""

    @property
    def uid(self) -> str:
        return _uid(self.pod)


@dataclass(frozen=True)
class Failure:
    owner: Owner
    pod: str  #: namespace/name of the replica that left
    why: str


@dataclass
class Plan:
    mark: list[JSON] = field(default_factory=list)  #: pods to label
    unmark: list[JSON] = field(default_factory=list)  #: labelled pods no longer in the wave
    wave: list[str] = field(default_factory=list)  #: namespace/name of every marked replica
    stay: dict[str, str] = field(default_factory=dict)  #: eligible replicas that do not fit: why
    in_flight: list[str] = field(default_factory=list)  #: replicas gone, replacement not bound
    failures: list[Failure] = field(default_factory=list)
    units: float = 0.0  #: GPUs of the wave and of the flights holding a slot
    gangs: list[str] = field(default_factory=list)  #: pending Kueue gangs holding local capacity
    applies: bool = False  #: external replicas (or flights) exist: the decision reads ``units``


class WavePlanner:
    """Keeps the flights and back-offs of one leadership term; :meth:`plan` is pure otherwise."""

    def __init__(self, config: ReturnHomeConfig, virtual_node: str, taint: TaintConfig) -> None:
        self.config = config
        self.virtual_node = virtual_node
        self.taint = taint.as_taint()
        self.flights: dict[str, Flight] = {}  #: marked pod UID -> flight
        self.backoff: dict[str, float] = {}  #: owner UID -> not marked until (monotonic)

    def _virtual(self, nodes: Iterable[JSON]) -> set[str]:
        key, value = VIRTUAL_NODE_LABEL
        return {self.virtual_node} | {
            n["metadata"]["name"] for n in nodes if (n["metadata"].get("labels") or {}).get(key) == value
        }

    def eligible(
        self,
        pod: JSON,
        now: float,
        pins: Mapping[str, str | None],
        pdbs: Mapping[str, Sequence[JSON]] | None = None,
    ) -> str:
        """'' when ``pod`` (on the virtual node) may be marked, else why not. ``pdbs``
        (namespace -> its PodDisruptionBudgets; ``None``: not checked): a replica no budget covers
        is never marked, so the Descheduler never evicts it (see ``require_pdb``)."""
        owner = owner_of(pod)
        if owner is None:
            return "not owned by a ReplicaSet or StatefulSet"
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            return "terminating"
        if (pod.get("status") or {}).get("phase") != "Running" or not is_ready(pod):
            return "not Ready yet"
        if tolerates((pod.get("spec") or {}).get("tolerations") or [], self.taint):
            return "tolerates the gate's taint"
        if self.backoff.get(owner.uid, 0.0) > now:
            return "its workload is backing off"
        pin = pins.get(owner.uid)
        if pin is None:
            return f"{owner} not read yet"
        if pin:
            return f"{owner} pins spec.nodeName={pin}"
        if pdbs is not None and self.config.require_pdb:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            budgets = pdbs.get(owner.namespace) or []
            if not any(
                label_selector_matches((b.get("spec") or {}).get("selector"), labels) for b in budgets
            ):
                return "no PodDisruptionBudget covers it"
        return ""

    def plan(
        self,
        nodes: Sequence[JSON],
        pods: Sequence[JSON],
        now: float,
        pins: Mapping[str, str | None],
        pdbs: Mapping[str, Sequence[JSON]] | None = None,
        gangs: Sequence[Gang] = (),
    ) -> Plan:
        """The wave for this tick. ``pins``: owner UID -> the template's ``spec.nodeName``
        (``''`` none, ``None`` not known: such replicas wait); ``pdbs`` see :meth:`eligible`;
        ``gangs``: the pending Kueue gangs admitted next, reserved before any replica."""
        label = self.config.mark_label
        result = Plan()
        by_uid = {_uid(p): p for p in pods}
        snap = Snapshot(nodes, pods, virtual=self._virtual(nodes))
        claimed = {f.replacement_uid for f in self.flights.values() if f.replacement_uid}

        # 1. Kueue-admitted pods (ungated, unbound) take their capacity before any replica
        #    (a flight's own replacement is reserved in step 2, not here)
        flying = {f.owner.uid for f in self.flights.values()}
        for pod in pods:
            spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
            if (owner := owner_of(pod)) is not None and owner.uid in flying:
                continue
            if (
                KUEUE_QUEUE_LABEL in (meta.get("labels") or {})
                and not spec.get("nodeName")
                and not spec.get("schedulingGates")
                and not (pod.get("status") or {}).get("nominatedNodeName")
                and not meta.get("deletionTimestamp")
            ):
                node, _ = snap.find(pod)
                if node:
                    snap.place(pod, node)

        # 2. flights: replicas that left; hold their replacement's slot until it binds
        on_virtual: dict[str, JSON] = {}
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") == self.virtual_node:
                on_virtual[_uid(pod)] = pod
        for uid, flight in list(self.flights.items()):
            current = by_uid.get(uid)
            if current is not None and not (current.get("metadata") or {}).get("deletionTimestamp"):
                flight.pod = current
                continue  # still out: re-planned with the candidates below
            if flight.gone_at is None:
                flight.gone_at = now
            failure = self._follow(flight, pods, by_uid, claimed, snap, now, result)
            if failure:
                result.failures.append(Failure(flight.owner, _key(flight.pod), failure))
                self.backoff[flight.owner.uid] = now + self.config.backoff_seconds
                del self.flights[uid]

        # 2b. gangs Kueue admits next: their GPUs are not free for a replica to come home into
        result.gangs = reserve_gangs(snap, gangs)

        # 3. the candidates: marked ones first, then dearest first
        candidates = []
        for uid, pod in on_virtual.items():
            why = self.eligible(pod, now, pins, pdbs)
            if why:
                if uid in self.flights and not (pod.get("metadata") or {}).get("deletionTimestamp"):
                    del self.flights[uid]
                continue
            marked = label in ((pod.get("metadata") or {}).get("labels") or {})
            candidates.append((not marked, -price(pod), _key(pod), pod))
        candidates.sort(key=lambda c: c[:3])
        wave_uids = set()
        family: dict[str, set[str]] | None = None  #: owner UID -> its pods' UIDs (built on demand)
        refused: dict[str, str] = {}  #: owner UID -> why its replica did not fit (this plan)
        for _, _, key, pod in candidates:
            owner = owner_of(pod)
            assert owner is not None
            if owner.uid in refused:  # its siblings share the template: they do not fit either
                result.stay[key] = refused[owner.uid]
                self.flights.pop(_uid(pod), None)
                continue
            want = replacement(pod, pinned_node=pins.get(owner.uid) or "")
            want["metadata"]["labels"].pop(label, None)
            snap.remove(pod)
            node, reasons = snap.find(want)
            if node is None:
                snap.place(pod, self.virtual_node)  # it stays where it is
                refused[owner.uid] = result.stay[key] = _summary(reasons)
                self.flights.pop(_uid(pod), None)
                continue
            snap.place(want, node)
            wave_uids.add(_uid(pod))
            result.wave.append(key)
            result.units += gpu_units(pod)
            if _uid(pod) not in self.flights:
                if family is None:
                    family = {}
                    for p in pods:
                        if (o := owner_of(p)) is not None:
                            family.setdefault(o.uid, set()).add(_uid(p))
                self.flights[_uid(pod)] = Flight(pod, owner, frozenset(family.get(owner.uid, ())))
            if label not in ((pod.get("metadata") or {}).get("labels") or {}):
                result.mark.append(pod)
        for uid, pod in on_virtual.items():
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if (
                label in labels
                and uid not in wave_uids
                and not (pod.get("metadata") or {}).get("deletionTimestamp")
            ):
                result.unmark.append(pod)
        # a replica leaving (terminating) no longer counts: once the last replacement bound,
        # the raw reading decides again, so a full return does not untaint on its way out
        result.applies = bool(result.in_flight) or any(
            owner_of(p) and not (p.get("metadata") or {}).get("deletionTimestamp")
            for p in on_virtual.values()
        )
        return result

    def _follow(
        self,
        flight: Flight,
        pods: Sequence[JSON],
        by_uid: Mapping[str, JSON],
        claimed: set[str],
        snap: Snapshot,
        now: float,
        result: Plan,
    ) -> str:
        """Advance one flight; returns why it failed ('' while it is fine or done)."""
        if not flight.replacement_uid:
            new = sorted(
                (
                    p
                    for p in pods
                    if owner_of(p) == flight.owner
                    and _uid(p) not in flight.siblings
                    and _uid(p) not in claimed
                    and not (p.get("metadata") or {}).get("deletionTimestamp")
                ),
                key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp", "")),
            )
            if new:
                flight.replacement_uid = _uid(new[0])
                claimed.add(flight.replacement_uid)
        late = flight.gone_at is not None and now - flight.gone_at > self.config.come_home_seconds
        seen = by_uid.get(flight.replacement_uid) if flight.replacement_uid else None
        where = (seen.get("spec") or {}).get("nodeName") if seen else None
        if where == self.virtual_node or (where and where in snap.virtual):
            return f"its replacement was created on the virtual node {where}"
        if where:
            if is_ready(seen or {}):
                del self.flights[flight.uid]  # home
            elif late:
                return f"its replacement on {where} was not Ready within {self.config.come_home_seconds:g}s"
            return ""
        if late:
            if seen:
                return f"its replacement stayed Pending for {self.config.come_home_seconds:g}s"
            return f"no replacement was created within {self.config.come_home_seconds:g}s"
        if seen is None:
            want = replacement(flight.pod, pinned_node="")
            want["metadata"]["labels"].pop(self.config.mark_label, None)
            node, _ = snap.find(want)
            if node:
                snap.place(want, node)
        elif not (seen.get("status") or {}).get("nominatedNodeName"):  # a nominated one is counted
            node, _ = snap.find(seen)
            if node:
                snap.place(seen, node)
        result.in_flight.append(_key(flight.pod))
        result.units += gpu_units(flight.pod)
        return ""
