"""The prometheus signal's built-in PromQL: free local GPUs, and how fresh its inputs are.

``ksm_query()`` reads kube-state-metrics (started with ``--metric-labels-allowlist=nodes=[pool]``
and scraped with ``honor_labels: true``, as kube-prometheus does, so ``namespace``/``pod`` are
the pods', not the exporter's). A node's GPUs count only while it is in the pool, schedulable
(``kube_node_spec_unschedulable``), Ready (``kube_node_status_condition``) and carries no
``NoSchedule``/``NoExecute`` taint except ``tolerated_taint_keys`` (``kube_node_spec_taint``);
the GPU requests of Pending/Running pods on those nodes are subtracted. Every input is first
reduced with ``max by`` its identity, so two kube-state-metrics replicas (the same series from
two targets) count once. ``or vector(0)``: no healthy node is 0 GPUs, no GPU pod is 0 requested;
an exporter that is gone shows up in the freshness query (no sample at all), not here.

An instant query stamps its result with the evaluation time, so the result's timestamp says
nothing about the data. The freshness query does: ``timestamp()`` of a selector is the time of
the sample it found (up to five minutes back), so ``time() - max(timestamp(...))`` is how old
the newest input sample is. It grows when the data stops moving but stays queryable — a
federated or remote-read source that stopped updating, or an exporter that sets its own
timestamps (Prometheus writes no staleness markers for those).
"""

from __future__ import annotations

from collections.abc import Sequence


def _node_filter(tolerated_taint_keys: Sequence[str]) -> str:
    """``unless`` clauses dropping nodes that are cordoned, not Ready, or repel with a taint."""
    taint = 'effect=~"NoSchedule|NoExecute"'
    if tolerated_taint_keys:  # a regex in a PromQL string: the dot escaped, the backslash too
        taint += ', key!~"' + "|".join(k.replace(".", "\\\\.") for k in tolerated_taint_keys) + '"'
    return (
        " unless on(node) max by (node) (kube_node_spec_unschedulable == 1)"
        ' unless on(node) max by (node) (kube_node_status_condition{condition="Ready",status="true"} == 0)'
        f" unless on(node) max by (node) (kube_node_spec_taint{{{taint}}})"
    )


def ksm_query(
    pool: str = "pool=local-gpu", resource: str = "nvidia_com_gpu", tolerated_taint_keys: Sequence[str] = ()
) -> str:
    """Free GPUs of the healthy pool nodes. ``pool`` is ``label=value`` of the node label (as
    kube-state-metrics exports it: ``label_<label>``); ``resource`` as it names it
    (``nvidia.com/gpu`` -> ``nvidia_com_gpu``)."""
    label, value = pool.split("=", 1)
    in_pool = (
        f'max by (node) (kube_node_labels{{label_{label.replace(".", "_").replace("/", "_")}="{value}"}})'
    )
    healthy = _node_filter(tolerated_taint_keys)
    allocatable = (
        f'max by (node) (kube_node_status_allocatable{{resource="{resource}"}})'
        f" * on(node) group_left() {in_pool}{healthy}"
    )
    requested = (
        f'max by (namespace, pod, container, node) (kube_pod_container_resource_requests{{resource="{resource}"}})'
        ' * on(namespace, pod) group_left() max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"} == 1)'
        f" * on(node) group_left() {in_pool}{healthy}"
    )
    return f"(sum({allocatable}) or vector(0)) - (sum({requested}) or vector(0))"


def ksm_freshness_query(resource: str = "nvidia_com_gpu") -> str:
    """Seconds since the newest ``kube_node_status_allocatable`` sample (any replica)."""
    return f'time() - max(timestamp(kube_node_status_allocatable{{resource="{resource}"}}))'


#: The default query and its freshness query.
KSM_QUERY = ksm_query()
KSM_FRESHNESS_QUERY = ksm_freshness_query()
#: Free GPUs from the DCGM exporter (with its Kubernetes pod mapping): GPUs on local nodes that
#: no pod holds. Document-only alternative; set it as ``gate.signal.prometheus.query``.
DCGM_QUERY = 'count(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu-.*", pod=""}) or vector(0)'
DCGM_FRESHNESS_QUERY = 'time() - max(timestamp(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu-.*"}))'
#: query -> its freshness query, used when ``freshness_query`` is not set
FRESHNESS_OF = {KSM_QUERY: KSM_FRESHNESS_QUERY, DCGM_QUERY: DCGM_FRESHNESS_QUERY}
