"""The ``traffic:`` config section: how external replicas are reached (docs/virtual-node.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: The well-known node label kube-proxy and the EndpointSlice controller read the zone from.
ZONE_LABEL = "topology.kubernetes.io/zone"


class TrafficConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    publish_endpoints: bool = Field(
        default=True,
        description=(
            "publish each external replica as an endpoint of the Services that select it, at the "
            "address and ports its provider reports (EndpointSlices managed by vkprovider), and "
            "leave status.podIP empty so the cluster's EndpointSlice controller never publishes "
            "the unreachable provider-side IP; false: podIP is the provider's IP, nothing is "
            "published by vkprovider (the behaviour before issue 25)"
        ),
    )
    routable_pod_ip_providers: list[str] = Field(
        default=[],
        description=(
            "providers whose deployment IPs are routable from the cluster (a flat network, a "
            "VPN): their pods show that IP as status.podIP and the cluster's own EndpointSlice "
            "controller publishes them, as for any pod"
        ),
    )
    drain_max_seconds: float = Field(
        default=120.0,
        ge=0,
        le=3600,
        description=(
            "a deleted or evicted external replica with a published endpoint keeps running, its "
            "endpoint terminating, until its grace period (deletionGracePeriodSeconds) is over, "
            "but at most this long after the delete request; only then is its deployment "
            "stopped, so in-flight requests finish (docs/virtual-node.md, Draining). 0 stops it "
            "at once, as before issue 25"
        ),
    )
    max_endpoints_per_slice: int = Field(
        default=100, ge=1, le=1000, description="as kube-controller-manager's --max-endpoints-per-slice"
    )
