"""The chaos rig: two real fakecloud servers, ``vkprovider serve`` replicas as real processes
(one provider in-process, one over a gRPC plugin process), Deployments under steady churn, and
the fault loop. Everything is driven by one seed: the fault order, windows, churn actions and
their targets come from per-purpose RNGs derived from it, so a failing run replays the same plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import yaml
from vkprovider_fakecloud.config import parse_config
from vkprovider_fakecloud.server import FakeCloudServer

from tests.chaos import controlplane, jobs
from tests.chaos.faults import FAULTS, GLITCH_KNOBS
from tests.chaos.proxy import TcpProxy
from tests.chaos.serve import Replica, plugin_command, serve_config
from vkprovider.devcluster import Cluster
from vkprovider.devcluster.datapath import provider_range
from vkprovider.sim.local import inference_deployment

JSON = dict[str, Any]

#: name → (price, pod IP range, out-of-process?)
CLOUDS = {"cheap": (1.0, provider_range(0), False), "premium": (2.5, provider_range(1), True)}
CAPACITY = 10
SECRET_KEY = "token"


@dataclass
class Plan:
    faults: list[str]
    seconds: float  #: length of the fault phase
    replicas: int = 1  #: 2 = leader election between two replicas
    deployments: int = 3
    max_replicas: int = 3
    window: tuple[float, float] = (8.0, 14.0)
    outage_seconds: float = 15.0
    settle_timeout: float = 240.0


@dataclass
class Window:
    kind: str
    started: float
    ended: float = 0.0
    detail: str = ""


@dataclass
class PodTrace:
    name: str
    first_seen: float
    last_seen: float
    phase: str = ""
    reason: str = ""
    unexplained_failure_at: float | None = None  #: first sample Failed without a reason
    job: str = ""  #: the Job it belongs to (label ``job-name``), if any
    succeeded_at: float | None = None  #: first sample Succeeded (jobs.py: was it a real exit 0?)


@dataclass
class Rig:
    cluster: Cluster
    workdir: Path
    seed: int
    plan: Plan
    node: str = field(default_factory=lambda: f"vk-chaos-{uuid.uuid4().hex[:6]}")
    namespace: str = field(default_factory=lambda: f"chaos-{uuid.uuid4().hex[:6]}")
    clouds: dict[str, FakeCloudServer] = field(default_factory=dict)
    proxies: dict[str, TcpProxy] = field(default_factory=dict)
    replicas: list[Replica] = field(default_factory=list)
    secret_value: str = ""
    windows: list[Window] = field(default_factory=list)
    pods: dict[str, PodTrace] = field(default_factory=dict)
    sampled_twins: dict[str, float] = field(default_factory=dict)  #: uid → first sample time
    injected_losses: set[str] = field(default_factory=set)
    churn: dict[str, int] = field(default_factory=dict)
    faults_ended: float = 0.0
    #: control-plane components that died with no fault on them (restarted by the rig)
    deaths: list[controlplane.Death] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    _kube: httpx.AsyncClient | None = None
    _http: httpx.AsyncClient | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def cloud_names(self) -> list[str]:
        return sorted(self.clouds)

    def note(self, text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        self.log.append(line)
        print(line, flush=True)

    # --- set-up ---------------------------------------------------------------------------

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._kube = self.cluster.http()
        self._http = httpx.AsyncClient(timeout=10)
        providers: list[JSON] = []
        for name, (price, ip_range, remote) in CLOUDS.items():
            server = FakeCloudServer(_cloud_config(name, price, ip_range, self.seed))
            await server.start()
            self.clouds[name] = server
            if remote:
                settings = self.workdir / f"{name}-plugin.yaml"
                settings.write_text(yaml.safe_dump({"url": server.url}))
                providers.append({"name": name, "grpc": {"command": plugin_command(name, settings)}})
            else:
                providers.append({"name": name, "adapter": "fakecloud", "settings": {"url": server.url}})
        await self._create_namespace()
        target = urlparse(self.cluster.server)
        lease = f"chaos-{self.node}" if self.plan.replicas > 1 else None
        for i in range(self.plan.replicas):
            identity = f"replica-{'ab'[i]}"
            proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 443)
            await proxy.start()
            self.proxies[identity] = proxy
            kubeconfig = self._kubeconfig_via(proxy.port, identity)
            config = serve_config(node=self.node, identity=identity, providers=providers, lease=lease)
            replica = Replica.configured(
                config, self.workdir / f"{identity}.yaml", kubeconfig, identity=identity
            )
            replica.start()
            self.replicas.append(replica)
        await self.wait_for(self._one_ready, timeout=120)
        for i in range(self.plan.deployments):
            await self.kube(
                "POST", f"/apis/apps/v1/namespaces/{self.namespace}/deployments", self._deployment(i, 2)
            )
        self.note(f"seed {self.seed}: node {self.node}, namespace {self.namespace}, workdir {self.workdir}")
        converged = await self.wait_for(self.converged, timeout=180)
        self.note(f"initial rollout {'converged' if converged else 'DID NOT converge'}")

    def _kubeconfig_via(self, port: int, identity: str) -> Path:
        config = yaml.safe_load(self.cluster.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
        path = self.workdir / f"{identity}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    async def _create_namespace(self) -> None:
        await self.kube("POST", "/api/v1/namespaces", {"metadata": {"name": self.namespace}})
        self.secret_value = f"chaos-s3cret-{self.seed}-{uuid.uuid4().hex[:12]}"
        secret = {
            "metadata": {"name": "chaos-secret"},
            "stringData": {SECRET_KEY: self.secret_value},
        }

        async def sa() -> bool:
            found = await self.kube("GET", f"/api/v1/namespaces/{self.namespace}/serviceaccounts/default")
            return found is not None

        await self.wait_for(sa, timeout=60)
        await self.kube("POST", f"/api/v1/namespaces/{self.namespace}/secrets", secret)

    def _deployment(self, i: int, replicas: int) -> JSON:
        env = [
            {"name": "MODE", "value": "chaos"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "chaos-secret", "key": SECRET_KEY}}},
        ]
        return inference_deployment(f"svc-{i}", self.node, replicas, env=env, grace_seconds=3)

    # --- helpers --------------------------------------------------------------------------

    async def kube(self, method: str, path: str, body: JSON | None = None, **params: Any) -> JSON | None:
        """One apiserver call; None for 404 and while the apiserver is down (faults expected)."""
        assert self._kube is not None
        try:
            response = await self._kube.request(method, path, json=body, params=params or None)
        except httpx.HTTPError:
            return None
        if response.status_code == 404 or response.status_code >= 500:
            return None
        if response.status_code >= 400 and response.status_code != 409:
            raise AssertionError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return dict(response.json()) if response.content else {}

    async def admin(self, cloud: str, method: str, path: str, json: Any = None) -> Any:
        assert self._http is not None
        response = await self._http.request(method, self.clouds[cloud].url + "/admin" + path, json=json)
        response.raise_for_status()
        return response.json()

    async def restore_capacity(self, cloud: str) -> None:
        live = len(self.clouds[cloud].store.deployments)
        await self.admin(cloud, "PUT", "/capacity", json={"capacity": max(0, CAPACITY - live)})

    async def wait_for(
        self, check: Callable[[], Awaitable[bool]], timeout: float, interval: float = 1.0
    ) -> bool:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if await check():
                    return True
            await asyncio.sleep(interval)
        return False

    def signal_pid(self, pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    async def lease_holder(self) -> str:
        if len(self.replicas) == 1:
            return self.replicas[0].identity
        lease = await self.kube(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/chaos-{self.node}"
        )
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    async def leader(self) -> Replica:
        holder = await self.lease_holder()
        return next((r for r in self.replicas if r.identity == holder), self.replicas[0])

    async def _one_ready(self) -> bool:
        assert self._http is not None
        for replica in self.replicas:
            replica.check()
        return any([await r.ready(self._http) for r in self.replicas])

    async def list_pods(self) -> list[JSON] | None:
        listed = await self.kube("GET", f"/api/v1/namespaces/{self.namespace}/pods")
        return None if listed is None else list(listed["items"])

    async def converged(self) -> bool:
        """Every Deployment has exactly its replicas Running and Ready on the node, nothing else
        pending or terminating."""
        deployments = await self.kube("GET", f"/apis/apps/v1/namespaces/{self.namespace}/deployments")
        pods = await self.list_pods()
        if deployments is None or pods is None:
            return False
        for deployment in deployments["items"]:
            app = deployment["spec"]["selector"]["matchLabels"]["app"]
            mine = [p for p in pods if p["metadata"].get("labels", {}).get("app") == app]
            active = [p for p in mine if p["status"].get("phase") not in ("Failed", "Succeeded")]
            if len(active) != deployment["spec"]["replicas"] or not all(_ready(p) for p in active):
                return False
        return True

    # --- the run --------------------------------------------------------------------------

    async def run(self) -> None:
        """Churn and sample throughout; inject the planned faults in seeded rounds until the fault
        phase is over and each was injected at least once; then clear everything."""
        tasks = [
            asyncio.create_task(self._churn(random.Random(f"{self.seed}/churn"))),
            asyncio.create_task(self._sample()),
            asyncio.create_task(self._watch_replicas()),
            asyncio.create_task(jobs.churn_jobs(self, random.Random(f"{self.seed}/jobs"), self._stop)),
        ]
        rng = random.Random(f"{self.seed}/faults")
        provoke = random.Random(f"{self.seed}/provoke")
        loop = asyncio.get_running_loop()
        end = loop.time() + self.plan.seconds
        order: list[str] = []
        try:
            while loop.time() < end or not set(self.plan.faults) <= {w.kind for w in self.windows}:
                if not order:
                    order = sorted(self.plan.faults)
                    rng.shuffle(order)
                kind = order.pop()
                window = Window(kind, time.time())
                self.windows.append(window)
                seconds = rng.uniform(*self.plan.window)
                self.note(f"fault {kind} for {seconds:.0f}s")
                try:
                    window.detail, _ = await asyncio.gather(
                        FAULTS[kind](self, rng, seconds), self._provoke(provoke, seconds)
                    )
                except Exception as exc:  # a fault that could not be injected is a rig problem
                    window.detail = f"injection failed: {type(exc).__name__}: {exc}"
                window.ended = time.time()
                self.note(f"  {kind}: {window.detail}")
                await asyncio.sleep(rng.uniform(2.0, 5.0))
            self._stop.set()
            await self.clear_all()
            self.faults_ended = time.time()
            self.note("faults over; settling")
            converged = await self.wait_for(self.converged, timeout=self.plan.settle_timeout)
            self.note(f"settle: {'converged' if converged else 'DID NOT converge'}")
            wait = max(self.plan.settle_timeout, jobs.FINISH_WAIT)
            done = await self.wait_for(lambda: jobs.jobs_finished(self), timeout=wait)
            self.note(f"jobs: {'all finished' if done else 'NOT all finished'}")
            await asyncio.sleep(3 * 5.0)  # orphan GC period (5 s) at least twice after convergence
            await self.wait_for(self.converged, timeout=60)
        finally:
            self._stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def clear_all(self) -> None:
        for cloud in self.cloud_names:
            await self.admin(cloud, "DELETE", "/outage")
            await self.admin(cloud, "DELETE", "/rules")
            knobs = {
                "error_rate": 0.0,
                "rate_limit_rate": 0.0,
                "timeout_rate": 0.0,
                "ambiguous_create_rate": 0.0,
                "loss_rate": 0.0,
                **GLITCH_KNOBS,
            }
            await self.admin(cloud, "PATCH", "/knobs", json=knobs)
            await self.restore_capacity(cloud)
        for proxy in self.proxies.values():
            proxy.unblock()
        for replica in self.replicas:
            if not replica.alive():
                replica.start()

    async def _churn(self, rng: random.Random) -> None:
        """Scale Deployments up and down and delete pods (gracefully and by force)."""
        while not self._stop.is_set():
            await asyncio.sleep(rng.uniform(1.5, 4.0))
            action = rng.choice(["scale", "scale", "delete", "force-delete"])
            i = rng.randrange(self.plan.deployments)
            if action == "scale":
                replicas = rng.randint(1, self.plan.max_replicas)
                body = {"spec": {"replicas": replicas}}
                await self._patch(f"/apis/apps/v1/namespaces/{self.namespace}/deployments/svc-{i}", body)
            else:
                pods = await self.list_pods() or []
                pick = sorted(
                    p["metadata"]["name"]
                    for p in pods
                    if p["metadata"].get("labels", {}).get("app") == f"svc-{i}"
                    and not p["metadata"].get("deletionTimestamp")
                )
                if not pick:
                    continue
                name = pick[rng.randrange(len(pick))]
                grace = {"gracePeriodSeconds": 0} if action == "force-delete" else None
                await self.kube("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}", grace)
            self.churn[action] = self.churn.get(action, 0) + 1

    async def force_delete_some(self, rng: random.Random, count: int) -> None:
        pods = sorted(
            p["metadata"]["name"]
            for p in await self.list_pods() or []
            if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Running"
        )
        for name in rng.sample(pods, min(count, len(pods))):
            path = f"/api/v1/namespaces/{self.namespace}/pods/{name}"
            await self.kube("DELETE", path, {"gracePeriodSeconds": 0})

    async def _provoke(self, rng: random.Random, seconds: float) -> None:
        """Make the fault meet creates and deletes: force-delete two pods once it is in place
        (their replacements are created under the fault), delete one gracefully halfway."""
        await asyncio.sleep(min(1.0, seconds / 4))
        for grace in (0, 0, None):
            pods = sorted(
                p["metadata"]["name"]
                for p in await self.list_pods() or []
                if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Running"
            )
            if pods:
                name = pods[rng.randrange(len(pods))]
                body = {"gracePeriodSeconds": 0} if grace == 0 else None
                await self.kube("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}", body)
                self.churn["provoke"] = self.churn.get("provoke", 0) + 1
            if grace is None:
                break
            await asyncio.sleep(seconds / 3 if grace == 0 else 0)

    async def _patch(self, path: str, body: JSON) -> None:
        assert self._kube is not None
        with contextlib.suppress(httpx.HTTPError):
            await self._kube.patch(
                path, content=yaml.safe_dump(body), headers={"Content-Type": "application/merge-patch+json"}
            )

    async def _sample(self) -> None:
        """Every second: each pod's phase and reason; the UIDs live on two clouds at once."""
        while True:
            now = time.time()
            for uid in set.intersection(*(self._live_uids(c) for c in self.cloud_names)):
                self.sampled_twins.setdefault(uid, now)
            pods = await self.list_pods()
            for pod in pods or []:
                uid = pod["metadata"]["uid"]
                trace = self.pods.setdefault(uid, PodTrace(pod["metadata"]["name"], now, now))
                trace.last_seen = now
                trace.phase = pod["status"].get("phase", "")
                trace.reason = pod["status"].get("reason", "")
                if trace.phase == "Failed" and not trace.reason and trace.unexplained_failure_at is None:
                    trace.unexplained_failure_at = now
                trace.job = (pod["metadata"].get("labels") or {}).get(jobs.JOB_LABEL, "")
                if trace.phase == "Succeeded" and trace.succeeded_at is None:
                    trace.succeeded_at = now
            await asyncio.sleep(1.0)

    def _live_uids(self, cloud: str) -> set[str]:
        store = self.clouds[cloud].store
        return {uid for uid, d in store.deployments.items() if not store.status(d).phase.terminal}

    async def _watch_replicas(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            for replica in self.replicas:
                if replica.proc is not None and replica.proc.poll() is not None and not replica.held_down:
                    self.note(f"replica {replica.identity} exited by itself (rc {replica.proc.returncode})")
                    replica.check()
            await self.watch_control_plane()

    async def watch_control_plane(self) -> None:
        """Restart a control-plane component that died while no fault was restarting it, and
        record it (``controlplane``): the service is not to blame for an apiserver that is gone."""
        current = self.windows[-1] if self.windows and not self.windows[-1].ended else None
        busy = (
            {controlplane.RESTARTS[current.kind]}
            if current and current.kind in controlplane.RESTARTS
            else set()
        )
        for death in await controlplane.check(self.cluster, self.workdir, busy):
            self.deaths.append(death)
            self.note(f"CONTROL PLANE: {death.describe()}")

    async def apiserver_answers(self) -> bool:
        return await self.list_pods() is not None

    async def stop(self) -> None:
        for replica in self.replicas:
            await replica.close()
        for proxy in self.proxies.values():
            await proxy.stop()
        if self._kube is not None:
            await self.kube("DELETE", f"/api/v1/namespaces/{self.namespace}")
            await self._kube.aclose()
        if self._http is not None:
            await self._http.aclose()
        for server in self.clouds.values():
            await server.stop()


def _ready(pod: JSON) -> bool:
    if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") != "Running":
        return False
    conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
    return conditions.get("Ready") == "True"


def _cloud_config(name: str, price: float, ip_range: str, seed: int) -> Any:
    return parse_config(
        {
            "provider": name,
            "seed": seed,
            "ip_range": ip_range,
            "catalog": [
                {
                    "id": f"{name}-h100",
                    "gpu_type": "H100-SXM-80GB",
                    "region": "eu-west",
                    "price_per_hour": price,
                    "capacity": CAPACITY,
                }
            ],
            "lifecycle": {"provisioning_seconds": 0.5, "serving_after_seconds": 0.5},
        }
    )
