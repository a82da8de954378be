"""The fit engine answers like kube-scheduler's filters for the pods the gate brings home."""

from __future__ import annotations

import copy
from typing import Any

from vkprovider.gate.fit import Snapshot
from vkprovider.gate.podspec import pod_requests, replacement

JSON = dict[str, Any]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(
    name: str,
    gpus: int = 8,
    *,
    zone: str = "z1",
    taints: list[JSON] | None = None,
    labels: dict[str, str] | None = None,
) -> JSON:
    return {
        "metadata": {"name": name, "labels": {HOST: name, ZONE: zone, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def vk() -> JSON:
    n = node("vk", 100, zone="cloud")
    n["metadata"]["uid"] = "uid-vk"
    n["metadata"]["labels"]["type"] = "virtual-kubelet"
    n["spec"]["taints"] = [{"key": "virtual-kubelet.io/provider", "effect": "NoSchedule"}]
    return n


def pod(name: str, gpus: int = 1, *, on: str = "", app: str = "inf", **spec: Any) -> JSON:
    body: JSON = {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        **spec,
    }
    if on:
        body["nodeName"] = on
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name, "labels": {"app": app}},
        "spec": body,
        "status": {"phase": "Running"},
    }


def find(snap: Snapshot, p: JSON) -> str | None:
    return snap.find(replacement(p))[0]


def test_requests_count_every_resource_init_sidecars_and_overhead() -> None:
    p = pod("a", 2)
    p["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "500m", "memory": "1Gi"}
    p["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        {"name": "init", "resources": {"requests": {"cpu": "3", "amd.com/gpu": "1"}}},
    ]
    p["spec"]["overhead"] = {"cpu": "100m"}
    got = pod_requests(p)
    # main: 0.5 + sidecar 1 = 1.5; init 3 + sidecar before it 1 = 4 -> 4, plus overhead
    assert float(got["cpu"]) == 4.1 and float(got["nvidia.com/gpu"]) == 2 and float(got["amd.com/gpu"]) == 1
    assert float(got["memory"]) == 2**30 and got["pods"] == 1


def test_gpus_of_every_kind_and_reservation_within_one_plan() -> None:
    snap = Snapshot([node("a", 3), vk()], [pod("busy", 1, on="a")], virtual={"vk"})
    first = replacement(pod("r1", 2))
    assert snap.find(first)[0] == "a"
    snap.place(first, "a")
    # the slot the first one took is gone: the Descheduler's nodeFit would say "fits" again
    name, why = snap.find(replacement(pod("r2", 1)))
    assert name is None and why == {"a": "Insufficient nvidia.com/gpu"}
    amd = pod("amd", 0)
    amd["spec"]["containers"][0]["resources"] = {"limits": {"amd.com/gpu": "1"}}
    assert find(Snapshot([node("a")], [], virtual=set()), amd) is None  # the node has none


def test_taints_count_only_when_tolerated() -> None:
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    nodes = [node("a", taints=[gpu_taint]), vk()]
    assert find(Snapshot(nodes, [], virtual={"vk"}), pod("p")) is None
    tolerant = pod("p", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert find(Snapshot(nodes, [], virtual={"vk"}), tolerant) == "a"
    cordoned = node("b")
    cordoned["spec"]["unschedulable"] = True
    assert find(Snapshot([cordoned], [], virtual=set()), pod("p")) is None


def test_node_selector_affinity_terms_and_match_fields() -> None:
    nodes = [node("a100", labels={"gpu": "a100"}), node("h100", labels={"gpu": "h100"}), vk()]
    snap = Snapshot(nodes, [], virtual={"vk"})
    assert find(snap, pod("p", nodeSelector={"gpu": "h100"})) == "h100"
    assert find(snap, pod("p", nodeSelector={"gpu": "b200"})) is None
    by_field = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vk"]}]}
                ]
            }
        }
    }
    assert find(snap, pod("p", affinity=by_field)) is None  # pinned to the virtual node by name
    empty_term: JSON = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}
    }
    assert find(snap, pod("p", affinity=empty_term)) is None  # an empty term matches nothing
    not_h100 = copy.deepcopy(by_field)
    not_h100["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = [
        {"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["h100"]}]}
    ]
    assert find(snap, pod("p", affinity=not_h100)) == "a100"


def test_a_template_pinned_to_the_virtual_node_never_fits_elsewhere() -> None:
    snap = Snapshot([node("a"), vk()], [], virtual={"vk"})
    p = pod("p", on="vk")
    assert snap.find(replacement(p, pinned_node="vk"))[0] is None
    assert snap.find(replacement(p))[0] == "a"


def test_host_ports_conflict() -> None:
    def with_port(name: str, on: str = "", ip: str = "") -> JSON:
        p = pod(name, 0, on=on)
        p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080, "hostIP": ip}]
        return p

    snap = Snapshot([node("a"), node("b")], [with_port("x", on="a")], virtual=set())
    assert find(snap, with_port("y")) == "b"
    snap.place(replacement(with_port("y")), "b")
    assert find(snap, with_port("z")) is None


def test_required_anti_affinity_both_ways() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "inf"}}}
            ]
        }
    }
    snap = Snapshot([node("a"), node("b"), vk()], [pod("x", on="a", affinity=anti)], virtual={"vk"})
    assert find(snap, pod("y", affinity=anti)) == "b"
    snap.place(replacement(pod("y", affinity=anti)), "b")
    assert find(snap, pod("z", affinity=anti)) is None
    # an existing pod's anti-affinity keeps out a pod without any of its own
    other = Snapshot([node("a")], [pod("x", on="a", affinity=anti)], virtual=set())
    assert find(other, pod("plain")) is None
    assert find(other, pod("plain", app="other")) == "a"


def test_required_pod_affinity_and_the_first_of_a_group() -> None:
    aff = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "cache"}}}
            ]
        }
    }
    nodes = [node("a", zone="z1"), node("b", zone="z2"), vk()]
    assert (
        find(Snapshot(nodes, [pod("c", 0, on="b", app="cache")], virtual={"vk"}), pod("p", affinity=aff))
        == "b"
    )
    assert find(Snapshot(nodes, [], virtual={"vk"}), pod("p", affinity=aff)) is None
    self_aff = copy.deepcopy(aff)
    self_aff["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"] = {
        "matchLabels": {"app": "inf"}
    }
    assert find(Snapshot(nodes, [], virtual={"vk"}), pod("p", affinity=self_aff)) == "a"
    ns_sel = copy.deepcopy(aff)
    ns_sel["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["namespaceSelector"] = {
        "matchLabels": {"team": "x"}
    }
    assert (
        find(Snapshot(nodes, [pod("c", 0, on="b", app="cache")], virtual={"vk"}), pod("p", affinity=ns_sel))
        is None
    )


def spread(key: str = HOST, **extra: Any) -> list[JSON]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "inf"}},
            **extra,
        }
    ]


def test_hostname_spread_counts_the_virtual_node_as_a_domain() -> None:
    c = spread()
    out = [pod(f"r{i}", on="vk", topologySpreadConstraints=c) for i in range(4)]
    snap = Snapshot([node("a"), node("b"), vk()], out, virtual={"vk"})
    placed = []
    for p in out:
        snap.remove(p)
        want = replacement(p)
        where = snap.find(want)[0]
        if where is None:
            snap.place(p, "vk")
            continue
        snap.place(want, where)
        placed.append(where)
    # vk 4 -> a,b get one each; then vk=2,a=1,b=1: a third local one makes a=2 vs min 1 -> fine;
    # the fourth would leave vk=0 (min) against a/b at 2: skew 2 -> it stays out
    assert sorted(placed) == ["a", "a", "b"]
    honour = spread(nodeTaintsPolicy="Honor")  # the tainted virtual node is no domain then
    out = [pod(f"r{i}", on="vk", topologySpreadConstraints=honour) for i in range(4)]
    vk_gated = vk()
    vk_gated["spec"]["taints"].append({"key": "local-capacity", "value": "available", "effect": "NoSchedule"})
    snap = Snapshot([node("a"), node("b"), vk_gated], out, virtual={"vk"})
    count = 0
    for p in out:
        snap.remove(p)
        want = replacement(p)
        where = snap.find(want)[0]
        assert where is not None
        snap.place(want, where)
        count += 1
    assert count == 4


def test_zone_spread_and_a_node_without_the_key() -> None:
    c = spread(ZONE)
    snap = Snapshot(
        [node("a", zone="z1"), node("b", zone="z2")],
        [pod("x", on="a", topologySpreadConstraints=c)],
        virtual=set(),
    )
    assert find(snap, pod("y", topologySpreadConstraints=c)) == "b"
    bare = node("c")
    del bare["metadata"]["labels"][ZONE]
    assert find(Snapshot([bare], [], virtual=set()), pod("y", topologySpreadConstraints=c)) is None


def test_volumes_it_cannot_judge_do_not_fit_and_shm_does() -> None:
    snap = Snapshot([node("a")], [], virtual=set())
    shm = pod(
        "p", volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}}, {"name": "cache", "emptyDir": {}}]
    )
    assert find(snap, shm) == "a"
    pvc = pod("p", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "x"}}])
    name, why = snap.find(replacement(pvc))
    assert name is None and "data" in why["*"]
