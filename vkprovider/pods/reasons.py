"""Event and pod-status reasons, spelled as the kubelet and the Go virtual-kubelet library spell
them, so existing tooling and runbooks understand them."""

PROVIDER_CREATE_SUCCESS = "ProviderCreateSuccess"
PROVIDER_CREATE_FAILED = "ProviderCreateFailed"
PROVIDER_UPDATE_SUCCESS = "ProviderUpdateSuccess"
PROVIDER_UPDATE_FAILED = "ProviderUpdateFailed"
PROVIDER_DELETE_SUCCESS = "ProviderDeleteSuccess"
PROVIDER_DELETE_FAILED = "ProviderDeleteFailed"

#: Pod status reasons for failures the workload controller must replace.
PROVIDER_FAILED = "ProviderFailed"
PROVIDER_LOST = "ProviderLost"

#: The kubelet's container reason for a container whose end it could not observe (exit code 137).
CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"

ORPHAN_DELETED = "OrphanDeploymentDeleted"
#: Ours: a deleted external replica's endpoint is terminating; its deployment stops later (pods/drain.py).
DRAINING = "Draining"

#: Deployment reasons that mean "the container exited" (restartPolicy applies), as opposed to a
#: failure the provider names (GPUFault, Preempted, ...), which fails the pod.
CONTAINER_EXIT_REASONS = frozenset({"", "Error", "Completed", "ContainerExited"})
