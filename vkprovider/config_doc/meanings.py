"""Meanings of the settings keys whose field has no ``description`` (keyed by dotted path, or by
``Model.field`` for a model used in several places), for docs/configuration.md. Prefer a
``Field(description=...)`` in the model; a test fails on a key with neither."""

from __future__ import annotations

_TOLERATION = {
    "Toleration.key": "taint key it tolerates (empty with `Exists`: every taint)",
    "Toleration.operator": "`Equal` (key and value match) or `Exists` (any value)",
    "Toleration.value": "taint value, for `Equal`",
    "Toleration.effect": "taint effect it tolerates (empty: every effect)",
}

MEANINGS: dict[str, str] = {
    **_TOLERATION,
    "node": "the virtual Node: its name, address, heartbeat and what it advertises",
    "node.name": "the Node's name; also in the RBAC's resourceNames and the election Lease's name "
    "(docs/deploy.md, Renaming the node)",
    "node.internal_ip": "the Node's InternalIP: where the apiserver and metrics-server reach the kubelet API; "
    "must be reachable from the apiserver (never loopback: the apiserver refuses to proxy there). In a "
    "cluster the Deployment sets the pod IP",
    "node.kubelet_port": "the kubelet API's port, advertised as the Node's kubelet endpoint",
    "node.lease_duration_seconds": "the node heartbeat Lease's duration (kube-node-lease)",
    "node.lease_renew_seconds": "how often the heartbeat Lease is renewed; less than lease_duration_seconds",
    "node.status_update_seconds": "how often the Node's status is written even when nothing changed",
    "node.probe_seconds": "how often each provider is probed (ProvidersReachable, capacity)",
    "node.max_pods": "the Node's `pods` capacity",
    "node.cpu": "the Node's `cpu` capacity (a Kubernetes quantity)",
    "node.memory": "the Node's `memory` capacity (a Kubernetes quantity)",
    "node.labels": "extra labels on the Node",
    "kube": "the Kubernetes API client",
    "kube.qps": "requests per second to the apiserver (client-side limiter)",
    "kube.burst": "burst of the apiserver limiter",
    "pods": "the pod controller: workers, status polling, deletion",
    "traffic": "external replicas as Service endpoints: EndpointSlices at the addresses and ports the "
    "providers report, never the unreachable pod IP (docs/virtual-node.md, Services and traffic)",
    "pods.status_poll_seconds": "how often deployments' statuses are read from the providers",
    "pods.orphan_gc_seconds": "how often deployments with no pod are looked for (and deleted)",
    "pods.lost_grace_seconds": "how long a deployment a reachable provider no longer lists may be missing "
    "before its pod is marked ProviderLost",
    "pods.backoff_base_seconds": "first retry delay of a failed reconcile (doubles each time)",
    "pods.backoff_max_seconds": "longest retry delay of a failed reconcile",
    "pods.drain_timeout_seconds": "on SIGTERM, how long the queue drains before the Lease is released; "
    "keep it below the pod's terminationGracePeriodSeconds",
    "http.admin_host": "address of the admin API (`/healthz`, `/readyz`, `/metrics`, `/state`, "
    "`/placement`, `/explain`); off loopback the last three need a token (docs/operations.md)",
    "http.admin_port": "port of the admin API",
    "http.tls_cert_file": "serving certificate of the admin API (with tls_key_file: it serves HTTPS and "
    "accepts bearer tokens from other hosts)",
    "http.tls_key_file": "key of http.tls_cert_file",
    "AdminServerLimits.tls_handshake_timeout_seconds": "a connection that has not finished its TLS "
    "handshake by then is aborted",
    "AdminServerLimits.max_body_bytes": "largest request body (413 beyond)",
    "ServerLimits.tls_handshake_timeout_seconds": "a connection that has not finished its TLS handshake "
    "by then is aborted",
    "ServerLimits.max_body_bytes": "largest request body (413 beyond)",
    "kubelet.tls_cert_file": "serving certificate of the kubelet API (node name and internal_ip as SANs); "
    "with tls_key_file it turns the kubelet API on",
    "kubelet.tls_key_file": "key of kubelet.tls_cert_file",
    "kubelet.token_cache_seconds": "how long a TokenReview's answer is cached",
    "kubelet.authorized_cache_seconds": "how long an allowed SubjectAccessReview is cached",
    "kubelet.unauthorized_cache_seconds": "how long a denied SubjectAccessReview is cached",
    "kubelet.review_burst": "burst of the reviews' limiter",
    "providers": "the GPU clouds pods may run at; one entry per provider instance",
    "providers[].name": "the provider's name (DNS label): in pod annotations, metrics, placement settings",
    "providers[].settings": "the adapter's own settings (keys, URLs, regions…): docs/providers.md; validated "
    "by the adapter's model at start",
    "providers[].grpc": "an out-of-process plugin instead of `adapter` (docs/plugin-guide.md)",
    "providers[].grpc.command": "the plugin's command line: launched and supervised by the service",
    "providers[].grpc.address": "a running plugin's address: a unix socket or loopback TCP",
    "providers[].grpc.call_timeout_seconds": "deadline of each call to the plugin",
    "providers[].grpc.shutdown_grace_seconds": "how long a launched plugin gets to exit after SIGTERM",
    "placement": "which provider and offer each pod goes to (docs/placement.md)",
    "placement.offer_refresh_seconds": "how often every provider's offers are fetched",
    "placement.offer_timeout_seconds": "deadline of one offers fetch",
    "placement.blocklist_ttl_seconds": "how long an offer that answered NoCapacity is skipped",
    "placement.deploy_timeout_seconds": "deadline of one deploy call",
    "placement.transient_backoff_seconds": "first wait before retrying a Transient failure on a candidate",
    "placement.providers_deny": "providers never used",
    "placement.regions_allow": "only offers in these regions (empty: every region)",
    "placement.regions_deny": "offers in these regions are never used",
    "placement.max_price_per_hour": "offers above this price per hour are never used",
    "placement.allow_spot": "whether spot/interruptible offers may be used",
    "placement.providers": "per provider name: discount, weight, expected start-up (docs/placement.md)",
    "placement.failure_window_seconds": "the window of recent failures/preemptions that scoring counts",
    "placement.default_startup_seconds": "expected start-up latency of a provider that sets none",
    "placement.default_namespace_budget": "max spend per hour of a namespace not in namespace_budgets "
    "(null: no cap)",
    "placement.rate_limit": "the limiter of provider API calls, per provider",
    "placement.rate_limit.per_second": "provider API calls per second, per provider",
    "placement.rate_limit.burst": "burst of the provider API limiter",
    "leader_election.enabled": "run two replicas safely: only the Lease holder acts",
    "leader_election.namespace": "namespace of the election Lease (`vkprovider-system` in deploy/; the "
    "identity running `serve` needs get/create/update on Leases there)",
    "leader_election.identity": "this replica's name in the Lease's holderIdentity; default "
    "`<hostname>-<pid>`, the pod name in deploy/ (`vkprovider status` names the leader by it)",
    "gate": "the capacity gate: taint the node while local GPUs are free (docs/gate.md); off when absent",
    "gate.signal": "where the free local GPU count comes from",
    "gate.signal.kind": "`kube` (the apiserver's nodes and pods) or `prometheus` (a PromQL query)",
    "gate.signal.kube": "the kube signal's settings",
    "gate.signal.kube.node_selector": "label selector of the local GPU nodes (must match at least one)",
    "gate.signal.kube.gpu_resource": "the extended resource counted as GPUs",
    "gate.signal.prometheus": "the Prometheus signal's settings",
    "gate.signal.prometheus.url": "Prometheus's base URL",
    "gate.signal.prometheus.query": "PromQL giving the number of free local GPUs",
    "gate.signal.prometheus.timeout_seconds": "deadline of one query",
    "gate.taint": "the one taint the gate owns",
    "gate.taint.key": "the taint's key",
    "gate.taint.value": "the taint's value",
    "gate.taint.effect": "`NoSchedule` or `PreferNoSchedule` (`NoExecute` is refused)",
    "gate.taint_at_free_gpus": "taint when at least this many local GPUs are free",
    "gate.untaint_below_free_gpus": "remove the taint when fewer than this many are free",
    "gate.dwell_seconds": "a reading must hold this long before the taint flips",
    "gate.min_flip_interval_seconds": "at least this long between two flips",
    "gate.interval_seconds": "how often the signal is read",
    "gate.signal_timeout_seconds": "with no good reading this long, the taint is removed (fail open)",
    "gate.dry_run": "log and count the flips without touching the taint",
    "quota": "the Kueue quota sync: ClusterQueue nominalQuota follows the providers' offers "
    "(docs/kueue.md); off when absent",
    "quota.node_selector": "labels of the local nodes behind the flavor (short form)",
    "quota.resources": "the resources synced (short form)",
    "quota.flavors[].resources": "the resources synced for this flavor",
    "quota.flavors[].queues": "the ClusterQueues that share this flavor's offer, with their weights",
    "log_json": "one JSON object per log line",
    "log_level": "`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`",
    "event_loop": "`auto` (uvloop where installed), `asyncio` or `uvloop` (vkprovider/eventloop.py)",
}
