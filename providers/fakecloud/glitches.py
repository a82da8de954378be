"""API glitches that are not failures: the workloads are fine, the API misreports them.

Real clouds do this: an eventually consistent list that leaves out a live deployment once, a
status that flaps to ``Unknown`` while an agent reconnects, a delete that is only accepted (a
remote Kubernetes: the pod terminates for a while, still listed), a watch that simply ends. A
client must not kill live work on one such answer (issue 22). ``get`` is never glitched by the
list knobs: it is how a client confirms what a list seemed to say.

Deleted-but-still-listed deployments live in ``Store.deleting`` (not in ``deployments``): they
no longer bill and are no longer live for the ledger, they are only still *reported*.
"""

from __future__ import annotations

from typing import Any

from vkprovider.models import Phase

from .deployment import Deployment
from .state import Store


def glitch_list(store: Store, statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Apply ``list_omit_rate`` and ``unknown_rate`` to one list answer (one draw per entry)."""
    knobs = store.knobs
    if knobs.list_omit_rate <= 0 and knobs.unknown_rate <= 0:
        return statuses
    answer = []
    for status in statuses:
        if status.get("phase") in (Phase.SUCCEEDED.value, Phase.FAILED.value):
            answer.append(status)  # only live deployments glitch
            continue
        if knobs.list_omit_rate > 0 and store.rng.random() < knobs.list_omit_rate:
            store.glitches["omitted"] = store.glitches.get("omitted", 0) + 1
            continue
        if knobs.unknown_rate > 0 and store.rng.random() < knobs.unknown_rate:
            store.glitches["unknown"] = store.glitches.get("unknown", 0) + 1
            status = {**status, "phase": Phase.UNKNOWN.value, "ready": False, "reason": "AgentReconnecting"}
        answer.append(status)
    return answer


def still_deleting(store: Store, selector: dict[str, str] | None = None) -> list[Deployment]:
    """Deployments whose asynchronous delete has not finished (and whose UID was not created
    again meanwhile); finished ones are dropped here."""
    now = store.clock()
    for uid in [u for u, (_, due) in store.deleting.items() if due <= now]:
        del store.deleting[uid]
    return [
        d
        for d, _ in store.deleting.values()
        if d.uid not in store.deployments and all(d.labels.get(k) == v for k, v in (selector or {}).items())
    ]
