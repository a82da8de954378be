"""The node's heartbeat Lease in ``kube-node-lease`` (DESIGN §4.2), as the kubelet keeps it.

The node-lifecycle controller treats a Lease whose ``renewTime`` stops moving like a node whose
status stops updating: after its grace period the node goes Unknown and gets the
``node.kubernetes.io/unreachable`` taint. So the *caller* decides whether to renew (not while
every provider is down); this module only makes a renewal succeed: one PUT from the cached copy
in the common case, a re-read on 409, a create when the Lease is missing (first start, or the
garbage collector removed it with a deleted Node). The ownerReference follows the Node's UID,
so a recreated Node re-adopts its Lease.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from vkprovider.kube import resources
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeConflict, KubeNotFound

log = logging.getLogger(__name__)

JSON = dict[str, Any]
NODE_LEASE_NAMESPACE = "kube-node-lease"
_ATTEMPTS = 4


def micro_time(moment: datetime) -> str:
    """``metav1.MicroTime``: UTC with microseconds, e.g. ``2026-01-02T03:04:05.000000Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_owner(node_name: str, node_uid: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}


class NodeLease:
    def __init__(
        self,
        kube: KubeClient,
        node_name: str,
        *,
        duration_seconds: int = 40,
        namespace: str = NODE_LEASE_NAMESPACE,
    ) -> None:
        self._kube = kube
        self.node_name = node_name
        self.namespace = namespace
        self.duration_seconds = duration_seconds
        self.lease: JSON | None = None  #: the Lease as the API last returned it
        self.renewals = 0

    def _stamp(self, lease: JSON, node_uid: str) -> JSON:
        spec = lease.setdefault("spec", {})
        spec["holderIdentity"] = self.node_name
        spec["leaseDurationSeconds"] = self.duration_seconds
        spec["renewTime"] = micro_time(datetime.now(UTC))
        lease["metadata"]["ownerReferences"] = [node_owner(self.node_name, node_uid)]
        return lease

    def _fresh(self, node_uid: str) -> JSON:
        lease: JSON = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.node_name, "namespace": self.namespace},
        }
        return self._stamp(lease, node_uid)

    async def renew(self, node_uid: str) -> None:
        """Move ``renewTime`` to now (creating the Lease if needed), owned by Node ``node_uid``."""
        missing = False
        for _ in range(_ATTEMPTS):
            if self.lease is None and not missing:
                self.lease = await resources.get_lease(self._kube, self.namespace, self.node_name)
                missing = self.lease is None
            if self.lease is None:
                try:
                    self.lease = await resources.create_lease(self._kube, self._fresh(node_uid))
                except KubeConflict:  # created concurrently (e.g. a previous incarnation): re-read
                    missing = False
                    continue
                self.renewals += 1
                log.info("created node lease", extra={"node": self.node_name})
                return
            try:
                self.lease = await resources.replace_lease(self._kube, self._stamp(self.lease, node_uid))
            except KubeConflict:
                self.lease, missing = None, False  # someone else wrote it: re-read and retry
                continue
            except KubeNotFound:
                self.lease, missing = None, True
                continue
            self.renewals += 1
            return
        raise KubeConflict(
            409, f"lease {self.namespace}/{self.node_name}: no renewal after {_ATTEMPTS} tries"
        )
