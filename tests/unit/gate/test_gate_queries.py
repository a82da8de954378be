"""The documented default queries, evaluated by Prometheus' own engine (``promtool test rules``,
from Debian's prometheus package) over kube-state-metrics / DCGM shaped series."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from vkprovider.gate.config import DCGM_QUERY, KSM_QUERY
from vkprovider.gate.prom_queries import DCGM_FRESHNESS_QUERY, KSM_FRESHNESS_QUERY, ksm_query

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool: run `make prometheus`")

KSM_SERIES = [
    # two local nodes of 8 GPUs, one CPU node
    ('kube_node_status_allocatable{node="gpu-0",resource="nvidia_com_gpu",unit="integer"}', "8+0x10"),
    ('kube_node_status_allocatable{node="gpu-1",resource="nvidia_com_gpu",unit="integer"}', "8+0x10"),
    ('kube_node_status_allocatable{node="cpu-0",resource="nvidia_com_gpu",unit="integer"}', "4+0x10"),
    ('kube_node_labels{node="gpu-0",label_pool="local-gpu"}', "1+0x10"),
    ('kube_node_labels{node="gpu-1",label_pool="local-gpu"}', "1+0x10"),
    ('kube_node_labels{node="cpu-0",label_pool="cpu"}', "1+0x10"),
    # a running 3-GPU pod and a pending 2-GPU pod on local nodes, a finished 8-GPU pod, one elsewhere
    (
        'kube_pod_container_resource_requests{namespace="a",pod="run",container="c",node="gpu-0",resource="nvidia_com_gpu"}',
        "3+0x10",
    ),
    (
        'kube_pod_container_resource_requests{namespace="a",pod="wait",container="c",node="gpu-1",resource="nvidia_com_gpu"}',
        "2+0x10",
    ),
    (
        'kube_pod_container_resource_requests{namespace="a",pod="done",container="c",node="gpu-1",resource="nvidia_com_gpu"}',
        "8+0x10",
    ),
    (
        'kube_pod_container_resource_requests{namespace="a",pod="cpu",container="c",node="cpu-0",resource="nvidia_com_gpu"}',
        "1+0x10",
    ),
    *(
        (f'kube_pod_status_phase{{namespace="a",pod="{pod}",phase="{phase}"}}', f"{int(phase == live)}+0x10")
        for pod, live in (("run", "Running"), ("wait", "Pending"), ("done", "Succeeded"), ("cpu", "Running"))
        for phase in ("Pending", "Running", "Succeeded")
    ),
]


def evaluate(
    tmp_path: Path, query: str, series: list[tuple[str, str]], expected: float, eval_time: str = "5m"
) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": []}))
    test: dict[str, Any] = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": eval_time,
                        "exp_samples": [{"labels": "{}", "value": expected}],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(test))
    result = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ksm_query_is_allocatable_minus_live_requests_on_local_nodes(tmp_path: Path) -> None:
    evaluate(tmp_path, KSM_QUERY, KSM_SERIES, 16 - 3 - 2)


def test_ksm_query_with_no_gpu_pods_is_all_allocatable(tmp_path: Path) -> None:
    evaluate(tmp_path, KSM_QUERY, [s for s in KSM_SERIES if "pod=" not in s[0]], 16)


def node_series(
    node: str, *, schedulable: bool = True, ready: str = "true", taints: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    """A node as kube-state-metrics v2 exports it: allocatable, pool label, schedulable, Ready, taints."""
    out = [
        (f'kube_node_status_allocatable{{node="{node}",resource="nvidia_com_gpu",unit="integer"}}', "8+0x10"),
        (f'kube_node_labels{{node="{node}",label_pool="local-gpu"}}', "1+0x10"),
        (f'kube_node_spec_unschedulable{{node="{node}"}}', f"{int(not schedulable)}+0x10"),
    ]
    for status in ("true", "false", "unknown"):
        out.append(
            (
                f'kube_node_status_condition{{node="{node}",condition="Ready",status="{status}"}}',
                f"{int(status == ready)}+0x10",
            )
        )
    for taint in taints:
        key, effect = taint.split(":")
        out.append(
            (f'kube_node_spec_taint{{node="{node}",key="{key}",value="",effect="{effect}"}}', "1+0x10")
        )
    return out


def pod_series(pod: str, node: str, gpus: int, phase: str = "Running") -> list[tuple[str, str]]:
    out = [
        (
            f'kube_pod_container_resource_requests{{namespace="a",pod="{pod}",container="c",node="{node}",resource="nvidia_com_gpu",unit="integer"}}',
            f"{gpus}+0x10",
        )
    ]
    for p in ("Pending", "Running", "Succeeded"):
        out.append(
            (f'kube_pod_status_phase{{namespace="a",pod="{pod}",phase="{p}"}}', f"{int(p == phase)}+0x10")
        )
    return out


def replicas(series: list[tuple[str, str]], count: int = 2) -> list[tuple[str, str]]:
    """The same series from ``count`` kube-state-metrics replicas (two scrape targets)."""
    return [
        (s.replace("{", f'{{instance="ksm-{i}:8080",job="kube-state-metrics",', 1), v)
        for i in range(count)
        for s, v in series
    ]


#: five pool nodes x 8 GPUs: gpu-0 and gpu-4 healthy (a 3-GPU pod runs on gpu-4, and on the
#: cordoned gpu-1 a 2-GPU pod), gpu-1 cordoned, gpu-2 NotReady, gpu-3 tainted NoExecute,
#: gpu-5 with a PreferNoSchedule taint (still counts). Expected free: 8 + (8 - 3) + 8 = 21.
CLUSTER = [
    *node_series("gpu-0"),
    *node_series("gpu-1", schedulable=False),
    *node_series("gpu-2", ready="unknown"),
    *node_series("gpu-3", taints=("dedicated:NoExecute",)),
    *node_series("gpu-4"),
    *node_series("gpu-5", taints=("soft:PreferNoSchedule",)),
    *pod_series("run", "gpu-4", 3),
    *pod_series("cordoned", "gpu-1", 2),
    *pod_series("done", "gpu-0", 8, "Succeeded"),
]


def test_ksm_query_counts_only_schedulable_ready_untainted_nodes(tmp_path: Path) -> None:
    evaluate(tmp_path, KSM_QUERY, CLUSTER, 8 + (8 - 3) + 8)


def test_ksm_query_counts_two_replicas_once(tmp_path: Path) -> None:
    evaluate(tmp_path, KSM_QUERY, replicas(CLUSTER), 8 + (8 - 3) + 8)


def test_ksm_query_with_every_node_excluded_is_zero_not_empty(tmp_path: Path) -> None:
    evaluate(tmp_path, KSM_QUERY, node_series("gpu-1", schedulable=False), 0)


def test_a_tolerated_taint_key_still_counts(tmp_path: Path) -> None:
    series = [
        *node_series("gpu-0", taints=("nvidia.com/gpu:NoSchedule",)),
        *node_series("gpu-1", taints=("other:NoSchedule",)),
    ]
    evaluate(tmp_path, ksm_query(tolerated_taint_keys=["nvidia.com/gpu"]), series, 8)
    evaluate(tmp_path, KSM_QUERY, series, 0)


def test_freshness_queries_give_the_age_of_the_newest_input_sample(tmp_path: Path) -> None:
    # samples at 0m..2m, then the source stops (a federated source, or exporter timestamps):
    # evaluated at 4m the newest sample is 2 minutes old
    stale = [(s, "8x2") for s, _ in node_series("gpu-0")[:1]]
    evaluate(tmp_path, KSM_FRESHNESS_QUERY, replicas(stale), 120, eval_time="4m")
    dcgm = [('DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-0",gpu="0",pod=""}', "0x1")]
    evaluate(tmp_path, DCGM_FRESHNESS_QUERY, dcgm, 180, eval_time="4m")


def test_dcgm_query_counts_local_gpus_no_pod_holds(tmp_path: Path) -> None:
    series = [
        (
            f'DCGM_FI_DEV_GPU_UTIL{{Hostname="gpu-{n}",gpu="{g}",pod="{"p" if (n, g) < (0, 3) else ""}"}}',
            "0+0x10",
        )
        for n in range(2)
        for g in range(8)
    ]
    evaluate(tmp_path, DCGM_QUERY, series, 13)
