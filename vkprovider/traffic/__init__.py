"""Traffic follows the replicas: external replicas as endpoints of the Services that select them.

``route`` is what the pod records about how its deployment is reached, ``slices`` computes the
EndpointSlices a Service should have, ``publisher`` keeps the cluster's slices equal to that,
``config`` is the ``traffic:`` config section (docs/virtual-node.md, *Services and traffic*).
"""
