"""Everything the pod controller remembers about one pod, in one record, with one cleanup rule.

A record is created the first time this process sees a pod (keyed by UID, carrying its queue
key) and removed by exactly one rule: the pod object is gone from the API **and** the deletion
of its deployment succeeded. Until both hold, the record is what makes the controller retry the
provider delete (a vanished pod whose deployment still bills is never forgotten) and what tells
the orphan collector the UID is being handled. Nothing else prunes it, so nothing leaks and
nothing is dropped early.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from vkprovider.models import DeploymentStatus


@dataclass
class PodRecord:
    uid: str
    key: str  #: ``namespace/name``: the queue key
    restarts: int = 0  #: redeploys done to honour restartPolicy (the pod's restartCount)
    restarting: bool = False  #: the deployment was deleted on purpose to restart it
    deployed: bool = False  #: this process deployed it once (its bound-to-deployed lag is recorded)
    deployment_deleted: bool = False  #: the provider confirmed the delete; nothing bills any more
    delete_requested: bool = False  #: graceful deletion: the provider was asked to stop it
    update_reported: str | None = None  #: images fingerprint whose in-place update was reported
    unreachable_reported: bool = False  #: the ProviderReachable=False condition and Event are out
    #: providers asked to stop it (deletion) whose delete did not answer "gone": confirmed by ``get``
    stopping: list[str] = field(default_factory=list)
    last_status: DeploymentStatus | None = None  #: last status seen before the deletion began
    #: our annotations decided at deploy time, not yet on the pod: the next status write carries them
    annotations: dict[str, str] | None = None
    removed: bool = False  #: the API object's final delete was sent (it only has to vanish now)
    stopped_on: str = "none"  #: the provider the deletion stopped it on
    ended: bool = True  #: the provider confirmed the deployment ended (else: grace ran out)
    outcome_written: bool = False  #: the terminal status of the deletion is out: never twice
    drain_announced: bool = False  #: the ``Draining`` Event of a graceful deletion is out (pods/drain.py)
    #: (provider, deployment id) whose route was asked for: asked once per deployment (per term)
    route_asked: tuple[str, str] | None = None


class PodStates:
    """The records, indexed by UID and by key (one key can briefly hold an old and a new UID)."""

    def __init__(self) -> None:
        self._by_uid: dict[str, PodRecord] = {}
        self._by_key: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self._by_uid)

    def __iter__(self) -> Iterator[PodRecord]:
        return iter(list(self._by_uid.values()))

    def observe(self, uid: str, key: str) -> tuple[PodRecord, bool]:
        """The record for ``uid``, creating it on first sight; the flag says it is new."""
        record = self._by_uid.get(uid)
        if record is not None:
            return record, False
        record = PodRecord(uid=uid, key=key)
        self._by_uid[uid] = record
        self._by_key.setdefault(key, set()).add(uid)
        return record, True

    def get(self, uid: str) -> PodRecord | None:
        return self._by_uid.get(uid)

    def key_of(self, uid: str) -> str | None:
        """The queue key of ``uid`` (for provider-status events), or None if never seen."""
        record = self._by_uid.get(uid)
        return record.key if record else None

    def uids(self) -> frozenset[str]:
        """Every UID still handled here: the orphan collector must leave these alone."""
        return frozenset(self._by_uid)

    def gone(self, key: str, live_uid: str | None) -> list[PodRecord]:
        """Records of ``key`` whose pod object is gone: not ``live_uid`` (names are unique)."""
        return [self._by_uid[uid] for uid in sorted(self._by_key.get(key, ())) if uid != live_uid]

    def retire(self, record: PodRecord) -> None:
        """The one cleanup rule: only once the pod is gone and its deployment deletion succeeded."""
        if not record.deployment_deleted:
            raise ValueError(f"pod {record.uid}: its deployment is not deleted yet")
        self._by_uid.pop(record.uid, None)
        uids = self._by_key.get(record.key)
        if uids is not None:
            uids.discard(record.uid)
            if not uids:
                del self._by_key[record.key]

    def current_uids(self) -> dict[str, str]:
        """``key -> uid`` of the newest record per key (compatibility view; prefer ``uids``)."""
        result: dict[str, str] = {}
        for record in self._by_uid.values():
            result[record.key] = record.uid
        return result
