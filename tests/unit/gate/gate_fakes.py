"""Small builders for Node and Pod dicts, shaped like the API's JSON."""

from __future__ import annotations

import copy
from typing import Any

from vkprovider.kube.errors import KubeConflict, KubeNotFound

JSON = dict[str, Any]
VK_TOLERATION = {"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}


def node(
    name: str,
    gpus: int = 8,
    *,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    taints: list[JSON] | None = None,
    unschedulable: bool = False,
) -> JSON:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"pool": "local-gpu", **(labels or {})}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def virtual_node(name: str = "vk", taints: list[JSON] | None = None) -> JSON:
    base = [{"key": "virtual-kubelet.io/provider", "value": "vkprovider", "effect": "NoSchedule"}]
    return {
        "metadata": {"name": name, "uid": "uid-vk", "labels": {"type": "virtual-kubelet"}},
        "spec": {"taints": base + (taints or [])},
        "status": {"allocatable": {"nvidia.com/gpu": "100"}},
    }


def pod(
    name: str,
    gpus: int = 1,
    *,
    node_name: str = "",
    nominated: str = "",
    phase: str = "Running",
    unschedulable: bool = False,
    tolerations: list[JSON] | None = None,
    node_selector: dict[str, str] | None = None,
) -> JSON:
    status: JSON = {"phase": phase}
    if nominated:
        status["nominatedNodeName"] = nominated
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    spec: JSON = {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        "tolerations": tolerations or [],
    }
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": status}


class FakeView:
    """The informer caches, filled by the test."""

    def __init__(self, nodes: list[JSON], pods: list[JSON], synced: bool = True) -> None:
        self.nodes_list = nodes
        self.pods_list = pods
        self.synced = synced
        self.nodes_synced = True
        self.kueue: Any = None  #: a KueueView stand-in (None: no Kueue)

    async def wait_synced(self) -> None:
        return None

    def all_nodes(self) -> list[JSON]:
        return self.nodes_list

    def all_pods(self) -> list[JSON]:
        return self.pods_list


class FakeNodeApi:
    """GET and merge-PATCH of Nodes (annotations and taints), with the API's resourceVersion
    precondition: a stale version is a 409. Shares the node dicts it is given, so a fake view
    built on the same dicts sees every write."""

    def __init__(self, nodes: list[JSON]) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.patches: list[JSON] = []
        for n in nodes:
            n["metadata"].setdefault("resourceVersion", "1")

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> JSON:
        name = path.rsplit("/", 1)[-1]
        node = self.nodes.get(name)
        if node is None:
            raise KubeNotFound(404, f"nodes {name!r} not found")
        meta = node["metadata"]
        if method == "GET":
            return copy.deepcopy(node)
        assert method == "PATCH", method
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != meta["resourceVersion"]:
            raise KubeConflict(409, "the object has been modified")
        for key, value in ((body.get("metadata") or {}).get("annotations") or {}).items():
            notes = meta.setdefault("annotations", {})
            if value is None:
                notes.pop(key, None)
            else:
                notes[key] = value
        if "taints" in (body.get("spec") or {}):
            node.setdefault("spec", {})["taints"] = body["spec"]["taints"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self.patches.append(body)
        return copy.deepcopy(node)
