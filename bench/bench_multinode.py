"""Several virtual nodes, active-active (issue 27): 1 node x 1 replica vs 3 nodes x 3 replicas.

Real control plane; every replica is a real ``vkprovider serve`` process (its own config file,
its own leader-election identity) with the reference memory adapter in ``run_at_once`` mode
(Running and ready the moment it is deployed), so the figures are the service's. In the same
run, on the same apiserver, a raw client doing create + one status write per pod measures the
apiserver's own rate (bench_pods.raw_ceiling, before and after; the mean is the ceiling).

1. **1 x 1**: one replica serving one node; N pods bound to it -> Running+Ready (pods/s).
2. **3 x 3**: three replicas, the same config with three nodes (``leader_election.replicas: 3``,
   so each replica leads one node); N pods spread evenly over the nodes -> Running+Ready.
3. **Takeover**: the replica leading one node is killed (SIGKILL: it releases nothing, as a
   failed pod would not). Timed on the bench's clock from the kill: the node's election Lease
   (``vkprovider-<node>``) held by another replica, and a pod bound to the node then Running
   and Ready (served by the new leader). Measured once the bench's pods are deleted: each
   replica's memory adapter is its own, so a survivor would not find the dead replica's
   deployments (a shared provider, fakecloud or a real cloud, is adopted: the integration test
   test_serve_multinode.py checks that on fakecloud).

Prints figures with the load average (``os.getloadavg``) next to each: the machine is shared.
Asserts nothing.

    .venv/bin/python bench/bench_multinode.py --pods 3000
    .venv/bin/python bench/bench_multinode.py --pods 1000      # on a loaded machine
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from bench_pods import NAMESPACE, Watch, create_all, raw_ceiling
from pods_service import OFFER

from vkprovider.devcluster import Cluster
from vkprovider.devcluster.process import free_port
from vkprovider.devcluster.sizing import ControlPlaneSize
from vkprovider.kube.client import KubeClient

#: seconds: the election Lease (leader_election.lease_duration_seconds's default)
LEASE_SECONDS = 15


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f})"


class Replica:
    """One ``vkprovider serve`` process, its config file and its admin port."""

    def __init__(self, identity: str, process: asyncio.subprocess.Process, admin: int, log: Path) -> None:
        self.identity, self.process, self.admin, self.log = identity, process, admin, log

    @classmethod
    async def start(
        cls, cluster: Cluster, directory: Path, identity: str, nodes: list[str], replicas: int
    ) -> Replica:
        admin = free_port()
        config = {
            "nodes": [{"name": n, "lease_renew_seconds": 2, "max_pods": 20_000} for n in nodes],
            "kube": {"kubeconfig": str(cluster.kubeconfig), "qps": 1000, "burst": 2000},
            "pods": {"workers": 16, "drain_timeout_seconds": 2},
            "http": {"admin_port": admin},
            "providers": [
                {
                    "name": "mem",
                    "adapter": "vkprovider.plugins.memory:InMemoryProvider",
                    "settings": {"offers": [OFFER], "run_at_once": True},
                }
            ],
            "placement": {"rate_limit": {"per_second": 1000, "burst": 1000}},
            "leader_election": {
                "enabled": True,
                "namespace": "default",
                "identity": identity,
                "replicas": replicas,
            },
            "log_level": "WARNING",
        }
        path = directory / f"{identity}.yaml"
        path.write_text(json.dumps(config))  # JSON is YAML
        log = directory / f"{identity}.log"
        with log.open("ab") as out:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "vkprovider", "serve", "--config", str(path), stdout=out, stderr=out
            )
        return cls(identity, process, admin, log)

    async def ready(self, timeout: float = 180) -> None:
        """Until ``/readyz`` says 200 (every node led and synced, or stood by)."""
        async with asyncio.timeout(timeout), httpx.AsyncClient(timeout=2) as http:
            while True:
                if self.process.returncode is not None:
                    raise RuntimeError(f"{self.identity} exited: {self.log.read_text()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"http://127.0.0.1:{self.admin}/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(30):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


async def holders(admin: KubeClient, nodes: list[str]) -> dict[str, str]:
    """node -> the holder of its election Lease ("" when none)."""
    found = {}
    for node in nodes:
        try:
            lease = await admin.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/vkprovider-{node}"
            )
            found[node] = lease["spec"].get("holderIdentity") or ""
        except Exception:
            found[node] = ""
    return found


async def wait_spread(
    admin: KubeClient, nodes: list[str], identities: list[str], timeout: float
) -> dict[str, str]:
    """Until every node has a leader and (with as many replicas as nodes) each replica leads one."""
    async with asyncio.timeout(timeout):
        while True:
            held = await holders(admin, nodes)
            if all(held.values()) and len(set(held.values())) == min(len(nodes), len(identities)):
                return held
            await asyncio.sleep(0.5)


async def bring_up(
    admin: KubeClient, nodes: list[str], pods: int, label: str, timeout: float
) -> tuple[float, int]:
    """Create ``pods`` spread evenly over ``nodes``; pods/s until every one is Ready, failures."""
    watch = Watch(admin, label)
    await watch.start()
    try:
        by_node: dict[str, list[str]] = {n: [] for n in nodes}
        for i in range(pods):
            by_node[nodes[i % len(nodes)]].append(f"{label}-{i:05d}")
        started = time.perf_counter()
        await asyncio.gather(*(create_all(admin, names, node, label) for node, names in by_node.items()))
        await watch.until(lambda: len(watch.ready) + len(watch.failed) >= pods, timeout)
        up_s = max(watch.ready.values(), default=started) - started
        return pods / up_s, len(watch.failed)
    finally:
        await watch.stop()


async def remove_all(admin: KubeClient, label: str) -> None:
    """Delete the bench's pods at once (grace 0: the apiserver removes them; not measured)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    await admin.request(
        "DELETE", path, query={"labelSelector": f"bench={label}"}, body={"gracePeriodSeconds": 0}, timeout=600
    )
    async with asyncio.timeout(600):
        while (await admin.request("GET", path, query={"labelSelector": f"bench={label}", "limit": 1}))[
            "items"
        ]:
            await asyncio.sleep(1)


async def takeover(admin: KubeClient, replicas: dict[str, Replica], nodes: list[str]) -> dict[str, Any]:
    """Kill the leader of one node; time until another replica holds its Lease and serves it."""
    held = await holders(admin, nodes)
    node = nodes[0]
    victim = replicas[held[node]]
    figures_load = load()
    killed = time.perf_counter()
    victim.process.kill()  # SIGKILL: no Lease released, as a failed pod
    await victim.process.wait()
    async with asyncio.timeout(300):
        while (await holders(admin, [node]))[node] in ("", victim.identity):
            await asyncio.sleep(0.1)
    lease_s = time.perf_counter() - killed
    new = (await holders(admin, [node]))[node]
    label = "probe"
    watch = Watch(admin, label)
    await watch.start()
    try:
        await create_all(admin, [f"{label}-0"], node, label)
        await watch.until(lambda: bool(watch.ready), 300)
        ready_s = watch.ready[f"{label}-0"] - killed
    finally:
        await watch.stop()
    others = {n: h for n, h in (await holders(admin, nodes)).items() if n != node}
    return {
        "node": node,
        "from": victim.identity,
        "to": new,
        "lease_s": lease_s,
        "ready_s": ready_s,
        "others_kept": all(h == held[n] for n, h in others.items()),
        "load": figures_load,
    }


async def run(args: argparse.Namespace) -> None:
    pods = args.pods
    large = pods > 2000
    cluster = await Cluster.start(
        "bench-multinode", gpu_nodes=0, size=ControlPlaneSize.large() if large else None
    )
    admin = await KubeClient.connect(str(cluster.kubeconfig), qps=100_000, burst=100_000)
    directory = Path(tempfile.mkdtemp(prefix="bench-multinode-"))
    running: list[Replica] = []
    rows: list[tuple[str, str]] = []
    try:
        await admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})
        raw_before = await raw_ceiling(admin, args.raw_pods or pods)
        rows.append(
            ("raw-client ceiling before (create + 1 status write, pods/s)", f"{raw_before:.1f}  [{load()}]")
        )

        # 1 node x 1 replica
        suffix = uuid.uuid4().hex[:4]
        single = [f"vk-one-{suffix}"]
        replica = await Replica.start(cluster, directory, "solo", single, 1)
        running.append(replica)
        await replica.ready()
        await wait_spread(admin, single, ["solo"], 120)
        rate1, failed1 = await bring_up(admin, single, pods, "one", args.timeout)
        rows.append(
            (f"1 node x 1 replica: pods/s up ({pods} pods)", f"{rate1:.1f}, failed {failed1}  [{load()}]")
        )
        await replica.stop()
        running.remove(replica)
        await remove_all(admin, "one")

        # 3 nodes x 3 replicas, active-active
        nodes = [f"vk-{n}-{suffix}" for n in ("a", "b", "c")]
        identities = ["r1", "r2", "r3"]
        replicas = {i: await Replica.start(cluster, directory, i, nodes, 3) for i in identities}
        running += replicas.values()
        await asyncio.gather(*(r.ready() for r in replicas.values()))
        spread_started = time.perf_counter()
        held = await wait_spread(admin, nodes, identities, 180)
        rows.append(
            (
                "3 x 3: leaders",
                f"{', '.join(f'{n}={h}' for n, h in held.items())} "
                f"(spread {time.perf_counter() - spread_started:.1f}s after all ready)",
            )
        )
        rate3, failed3 = await bring_up(admin, nodes, pods, "three", args.timeout)
        rows.append(
            (f"3 nodes x 3 replicas: pods/s up ({pods} pods)", f"{rate3:.1f}, failed {failed3}  [{load()}]")
        )
        await remove_all(admin, "three")

        moved = await takeover(admin, replicas, nodes)
        rows.append(
            (
                f"takeover of {moved['node']} after SIGKILL of {moved['from']}: Lease held by {moved['to']}",
                f"{moved['lease_s']:.1f}s  [{moved['load']}]",
            )
        )
        rows.append(("  ... a pod bound to it then Running+Ready", f"{moved['ready_s']:.1f}s"))
        rows.append(("  ... the other nodes kept their leaders", str(moved["others_kept"])))

        raw_after = await raw_ceiling(admin, args.raw_pods or pods)
        raw = (raw_before + raw_after) / 2
        rows.append(("raw-client ceiling after (pods/s)", f"{raw_after:.1f}  [{load()}]"))
        rows.append(
            ("ratio up / ceiling (mean of before and after)", f"1x1 {rate1 / raw:.0%}, 3x3 {rate3 / raw:.0%}")
        )
        keep_logs = False
    except BaseException:
        keep_logs = True
        print(f"replica configs and logs kept in {directory}", file=sys.stderr)
        raise
    finally:
        for replica in running:
            await replica.stop()
        await admin.close()
        await cluster.stop(remove=True)
        if not keep_logs:
            shutil.rmtree(directory, ignore_errors=True)
    width = max(len(k) for k, _ in rows)
    print(f"pods {pods}, control plane {'large' if large else 'default'}, memory adapter (run_at_once)")
    print("-" * (width + 40))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print("-" * (width + 40))
    print(f"(election Lease {LEASE_SECONDS}s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--raw-pods", type=int, default=0, help="pods of the raw ceiling (default: --pods)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
