"""Endpoint publication latency on the real data path: external pod Ready → its address in
kube-proxy's nftables rules in the node namespace, for many replicas behind 10 Services, and the
EndpointSlice writes that cost on the real apiserver (issue 25, Benchmark).

    .venv/bin/python bench/endpoint_latency.py [--replicas 200] [--services 10]

A dev cluster with its data path (kube-proxy v1.36.3, nftables mode), one fakecloud provider
serving every deployment in the backends namespace, ``--services`` Services each over a
Deployment of ``replicas / services`` external replicas, all created at once. Ready is when a
pod watch delivers the pod Ready; visible is the end of the first ``nft list table ip
kube-proxy`` (polled every 0.1 s in the node namespace) naming the replica's address (the
provider's range appears there only in endpoint rules) — so a figure includes the publisher's queue, the apiserver, kube-proxy's watch
and its sync, and up to one listing (its duration is printed). Writes: the publisher's own
counter and, independently, the apiserver's audit log (EndpointSlice create/update/patch/delete
by the service's user; nothing else writes slices as that user here). Needs root (network
namespaces); prints figures, asserts nothing; not in ``make bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import re
import statistics
import time
from typing import Any

from vkprovider.devcluster import Cluster, audit
from vkprovider.devcluster.datapath import provider_range, why_unavailable
from vkprovider.kube.informer import Informer
from vkprovider.sim.local import cloud_config, inference_deployment, start_virtual_node

NS = "default"
USER = "admin"  #: the dev cluster's admin client: what the in-process virtual node connects as
ADDRESS = re.compile(r"\b\d+\.\d+\.\d+\.\d+\b")
POLL_SECONDS = 0.1
SLICE_WRITES = {"create", "update", "patch", "delete"}


def deployment(name: str, node: str, replicas: int) -> dict[str, Any]:
    manifest = inference_deployment(name, node, replicas, grace_seconds=0)
    template = manifest["spec"]["template"]
    template["metadata"]["annotations"] = {"vkprovider.io/providers": "routed"}
    template["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8000}]
    return manifest


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def slice_writes(cluster: Cluster) -> tuple[int, int]:
    """(EndpointSlice writes the apiserver accepted, ones refused with 409 Conflict) by USER."""
    assert cluster.audit_log is not None
    codes = [
        (e.get("responseStatus") or {}).get("code", 0)
        for e in audit.read_events(cluster.audit_log)
        if e.get("stage") == "ResponseComplete"
        and (e.get("user") or {}).get("username") == USER
        and (e.get("objectRef") or {}).get("resource") == "endpointslices"
        and e.get("verb") in SLICE_WRITES
    ]
    return sum(1 for c in codes if c < 300), sum(1 for c in codes if c == 409)


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p90 = statistics.quantiles(ordered, n=10, method="inclusive")[8] if len(ordered) > 1 else ordered[0]
    return f"p50 {p50 * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"


async def main(replicas: int, services: int) -> None:
    reason = why_unavailable()
    if reason:
        print(f"skipped: {reason}")
        return
    cluster = await Cluster.start(f"bench-epl-{os.getpid()}", gpu_nodes=1, datapath=True, audit_users=(USER,))
    assert cluster.datapath is not None
    net = cluster.datapath
    config = cloud_config("routed", 1.0, capacity=replicas).model_copy(
        update={"ip_range": provider_range(0), "serve_netns": net.backends}
    )
    net.route(provider_range(0))
    vnode = await start_virtual_node(cluster, {"routed": config})
    kube = vnode.kube
    assert kube is not None and vnode.controller is not None
    ready: dict[str, float] = {}
    visible: dict[str, float] = {}
    listings: list[float] = []

    def on_pod(kind: str, old: Any, new: dict[str, Any]) -> None:
        if kind != "DELETED" and is_ready(new):
            ready.setdefault(new["metadata"]["uid"], time.monotonic())

    routed = ipaddress.IPv4Network(provider_range(0))

    async def poll_nft() -> None:
        command = ["ip", "netns", "exec", net.node, "nft", "list", "table", "ip", "kube-proxy"]
        while True:
            started = time.monotonic()
            proc = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
            )
            out, _ = await proc.communicate()
            now = time.monotonic()
            listings.append(now - started)
            for address in ADDRESS.findall(out.decode()):
                if ipaddress.IPv4Address(address) in routed:
                    visible.setdefault(address, now)
            await asyncio.sleep(POLL_SECONDS)  # a shared machine: no back-to-back listings

    pods = Informer(kube, f"/api/v1/namespaces/{NS}/pods", handler=on_pod)
    tasks = [asyncio.create_task(pods.run()), asyncio.create_task(poll_nft())]
    try:
        for s in range(services):
            service = {
                "metadata": {"name": f"svc{s}"},
                "spec": {"selector": {"app": f"app{s}"}, "ports": [{"port": 80, "targetPort": "http"}]},
            }
            await kube.request("POST", f"/api/v1/namespaces/{NS}/services", body=service)
        await pods.synced.wait()
        publisher = vnode.controller.term.publisher
        assert publisher is not None
        writes_before, (audited_before, conflicts_before) = publisher.writes, slice_writes(cluster)
        created = time.monotonic()
        per_service = replicas // services
        for s in range(services):
            manifest = deployment(f"app{s}", vnode.name, per_service)
            await kube.request("POST", f"/apis/apps/v1/namespaces/{NS}/deployments", body=manifest)
        total = per_service * services
        store = vnode.clouds["routed"].store
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            address = {d.uid: d.ip for d in store.deployments.values() if d.ip}
            if len(ready) >= total and all(address.get(u) in visible for u in ready):
                break
            await asyncio.sleep(0.5)
        address = {d.uid: d.ip for d in store.deployments.values() if d.ip}
        gaps = [visible[address[u]] - at for u, at in ready.items() if address.get(u) in visible]
        last = max(visible.values(), default=created)
        await asyncio.sleep(5)  # a quiet spell: steady state should write nothing more
        writes, (audited, conflicts) = publisher.writes - writes_before, slice_writes(cluster)
        audited, conflicts = audited - audited_before, conflicts - conflicts_before
        print(f"{total} external replicas behind {services} Services (one provider, shared port mapping)")
        print(f"pods Ready: {len(ready)}, addresses in kube-proxy's rules: {len(gaps)}")
        if gaps:
            print(f"pod Ready -> address in kube-proxy's nftables rules: {quantiles(gaps)}")
        print(f"all {total} created -> the last one visible: {last - created:.1f} s")
        print(
            f"nft listing (+ {POLL_SECONDS * 1000:.0f} ms between: the probe's resolution): {quantiles(listings)}"
        )
        print(
            f"EndpointSlice writes for {total} endpoints added (and 5 s quiet after): publisher {writes}, "
            f"apiserver audit log {audited} accepted ({audited / max(total, 1):.2f} per endpoint added) "
            f"+ {conflicts} refused with 409 Conflict (retried)"
        )
        print(f"slices now: {sum(1 for _ in await slices(kube))}")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await vnode.stop()
        await cluster.stop(remove=True)


async def slices(kube: Any) -> list[Any]:
    body = await kube.request(
        "GET",
        f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices",
        query={"labelSelector": "endpointslice.kubernetes.io/managed-by=vkprovider.io"},
    )
    return list(body["items"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=200)
    parser.add_argument("--services", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.replicas, args.services))
