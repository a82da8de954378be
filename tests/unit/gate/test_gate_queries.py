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


def evaluate(tmp_path: Path, query: str, series: list[tuple[str, str]], expected: float) -> None:
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
                    {"expr": query, "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": expected}]}
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
