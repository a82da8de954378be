"""kwok-simulated "local GPU" nodes: ordinary nodes whose pods become Running without a kubelet.

kwok manages only nodes carrying the ``kwok.x-k8s.io/node=fake`` annotation, so the
virtual node that vkprovider registers is never touched by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from vkprovider.devcluster.datapath import POD_CIDR
from vkprovider.devcluster.process import last_go_crash

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_POOL_LABEL = "pool"
GPU_POOL_VALUE = "local-gpu"
GPU_POOL_SELECTOR = f"{GPU_POOL_LABEL}={GPU_POOL_VALUE}"
GPUS_PER_NODE = 8


#: Pod annotations that delay kwok's stages (Go durations, e.g. "10s"): a local replica that
#: takes a while to become Ready (a model loading), a Job pod that runs a while before it
#: completes (training, Kueue-admitted or not). Honoured by clusters started with
#: ``pod_delays=True`` or ``kueue=True``; without them a pod moves on at once.
READY_DELAY_ANNOTATION = "pod-ready.stage.kwok.x-k8s.io/delay"
COMPLETE_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"

#: A pod whose container keeps serving through its termination grace period, as a server with
#: a preStop sleep does (any value): kwok deletes it at its ``deletionTimestamp`` (delete time +
#: grace) instead of at once, and the data path's listener keeps answering at its IP until then
#: (:mod:`vkprovider.devcluster.pod_listeners`), so its terminating endpoint really serves.
SERVE_THROUGH_GRACE_ANNOTATION = "devcluster.vkprovider.io/serve-through-grace"

#: The one pod stage set of the dev cluster: kwok v0.7.0's "fast" stages
#: (kustomize/stage/pod/fast: same names, selectors and status, readiness gates and init
#: containers included; tests/unit/devcluster/test_kwok_stages.py compares them) plus a delay
#: read from the annotations above on ``pod-ready`` and ``pod-complete``. ``pod-complete``
#: also drops Ready, as the kubelet does for a finished pod. ``pod-delete`` leaves pods that
#: serve through their grace to ``pod-delete-after-grace``, which deletes them when it is over
#: (as kwok's "general" pod-delete stage does for every pod).
POD_STAGES = (
    """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
    - {key: .status.podIP, operator: DoesNotExist}
  delay:
    durationMilliseconds: 0
    durationFrom: {expressionFrom: '.metadata.annotations["@READY@"]'}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
      {{ range .spec.readinessGates }}
      - {type: {{ .conditionType | Quote }}, status: "True", lastTransitionTime: {{ $now | Quote }}}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        restartCount: 0
        state: {running: {startedAt: {{ $now | Quote }}}}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        restartCount: 0
        {{ if eq .restartPolicy "Always" }}
        started: true
        state: {running: {startedAt: {{ $now | Quote }}}}
        {{ else }}
        state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, \
finishedAt: {{ $now | Quote }}}}
        {{ end }}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-complete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
    - {key: .status.phase, operator: In, values: [Running]}
    - {key: '.metadata.ownerReferences.[].kind', operator: In, values: [Job]}
  delay:
    durationMilliseconds: 0
    durationFrom: {expressionFrom: '.metadata.annotations["@COMPLETE@"]'}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        restartCount: 0
        started: false
        state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, \
finishedAt: {{ $now | Quote }}}}
      {{ end }}
      phase: Succeeded
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-delete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: Exists}
    - {key: '.metadata.annotations["@GRACE@"]', operator: DoesNotExist}
  next:
    finalizers: {empty: true}
    delete: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-delete-after-grace}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: Exists}
    - {key: '.metadata.annotations["@GRACE@"]', operator: Exists}
  delay:
    durationMilliseconds: 0
    durationFrom: {expressionFrom: .metadata.deletionTimestamp}
  next:
    finalizers: {empty: true}
    delete: true
""".replace("@READY@", READY_DELAY_ANNOTATION)
    .replace("@COMPLETE@", COMPLETE_DELAY_ANNOTATION)
    .replace("@GRACE@", SERVE_THROUGH_GRACE_ANNOTATION)
)


def write_pod_stages(workdir: Path) -> Path:
    """Write :data:`POD_STAGES` where kwok's ``--config`` reads it."""
    path = workdir / "kwok-stages.yaml"
    path.write_text(POD_STAGES)
    return path


#: What kwok's known start-up race leaves as its last words (easycel's unsynchronised type
#: cache, written from two goroutines while kwok builds its CEL environments).
START_UP_RACE_SIGNATURE = "fatal error: concurrent map writes"


def died_of_start_up_race(log: Path) -> bool:
    """True if the kwok log at ``log`` ends in the known start-up race, not another failure."""
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return False
    lines = text.splitlines()
    crash_at = last_go_crash(lines)
    return crash_at is not None and lines[crash_at].strip() == START_UP_RACE_SIGNATURE


def args(kubeconfig: Path, server_port: int, config: Path | None = None) -> list[str]:
    extra = [f"--config={config}"] if config is not None else []
    return [
        *extra,
        f"--kubeconfig={kubeconfig}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
        f"--server-address=127.0.0.1:{server_port}",
        "--node-lease-duration-seconds=8",  # renewed every 2 s: well inside the 10 s grace
        f"--cidr={POD_CIDR}",  # the data path's local replica range (devcluster.datapath)
        "--node-ip=127.0.0.2",
    ]


def node_manifest(name: str, gpus: int = GPUS_PER_NODE) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                GPU_POOL_LABEL: GPU_POOL_VALUE,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
                "nvidia.com/gpu.product": "H100-SXM-80GB",
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": resources},
    }


async def create_node(client: httpx.AsyncClient, name: str, gpus: int = GPUS_PER_NODE) -> None:
    resp = await client.post("/api/v1/nodes", json=node_manifest(name, gpus))
    if resp.status_code not in (201, 409):
        raise RuntimeError(f"creating kwok node {name} failed: {resp.status_code} {resp.text[:300]}")
