"""Unit-level fakes for PodSync: an in-memory API server for the few pod calls it makes, a real
in-memory provider with switchable failures, and a builder wiring them to real placement,
tracker and event recorder (unique module name: tests import it directly)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from vkprovider.errors import Transient
from vkprovider.kube.errors import KubeConflict, KubeNotFound
from vkprovider.kube.events import EventRecorder
from vkprovider.models import DeploymentRequest, DeploymentStatus, Offer, Phase
from vkprovider.placement import Placer
from vkprovider.plugins.memory import InMemoryProvider
from vkprovider.pods.sync import PodSync, SyncSettings
from vkprovider.pods.tracker import DeploymentTracker

JSON = dict[str, Any]
NODE = "vk-test"
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)(/status)?$")
_EVENTS = re.compile(r"^/api/v1/namespaces/([^/]+)/events(?:/([^/]+))?$")
_OBJ = re.compile(r"^/api/v1/namespaces/([^/]+)/(configmaps|secrets)/([^/]+)$")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what ``application/merge-patch+json`` does)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class FakeKube:
    """Pods, events, ConfigMaps and Secrets with resourceVersion checks, and a call log."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], JSON] = {}
        self.events: list[JSON] = []
        self.objects: dict[tuple[str, str, str], JSON] = {}
        self.calls: list[tuple[str, str, int]] = []  # (method, path, http status)
        #: an apiserver whose status writes drop metadata (real ones keep it: kubernetes#92022)
        self.status_drops_metadata = False
        #: ``decode`` of each status patch that carried annotations, in order
        self.annotated_status_decodes: list[bool] = []
        self._rv = 100

    def _bump(self, pod: JSON) -> None:
        self._rv += 1
        pod["metadata"]["resourceVersion"] = str(self._rv)

    def add_pod(self, pod: JSON) -> JSON:
        pod = copy.deepcopy(pod)
        self._bump(pod)
        self.pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = pod
        return copy.deepcopy(pod)

    def pod(self, namespace: str, name: str) -> JSON | None:
        found = self.pods.get((namespace, name))
        return copy.deepcopy(found) if found else None

    def update(self, namespace: str, name: str, patch: JSON) -> JSON:
        """Another writer changes the pod (bumps resourceVersion)."""
        pod = merge_patch(self.pods[(namespace, name)], patch)
        self._bump(pod)
        self.pods[(namespace, name)] = pod
        return copy.deepcopy(pod)

    def reasons(self) -> list[str]:
        return [e["reason"] for e in self.events]

    def count(self, method: str, suffix: str = "", status: int | None = None) -> int:
        return sum(
            1
            for m, p, s in self.calls
            if m == method and p.endswith(suffix) and (status is None or s == status)
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Any = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        decode: bool = True,
        accept: str = "application/json",
    ) -> Any:
        if method == "PATCH" and path.endswith("/status") and (body.get("metadata") or {}).get("annotations"):
            self.annotated_status_decodes.append(decode)
        try:
            result = self._handle(method, path, body)
        except KubeConflict:
            self.calls.append((method, path, 409))
            raise
        except KubeNotFound:
            self.calls.append((method, path, 404))
            raise
        self.calls.append((method, path, 200))
        return result if decode else None

    def _handle(self, method: str, path: str, body: Any) -> Any:
        if m := _EVENTS.match(path):
            if method == "POST":
                self.events.append(copy.deepcopy(body))
            elif method == "PATCH":
                event = next(e for e in self.events if e["metadata"]["name"] == m.group(2))
                event.update(body)
            return {}
        if m := _OBJ.match(path):
            found = self.objects.get((m.group(1), m.group(2), m.group(3)))
            if found is None:
                raise KubeNotFound(404, f"{m.group(2)} {m.group(3)} not found")
            return copy.deepcopy(found)
        m = _POD.match(path)
        assert m, f"unexpected call {method} {path}"
        key = (m.group(1), m.group(2))
        pod = self.pods.get(key)
        if pod is None:
            raise KubeNotFound(404, f"pod {key} not found")
        if method == "GET":
            return copy.deepcopy(pod)
        if method == "DELETE":
            precondition = (body or {}).get("preconditions", {}).get("uid")
            if precondition and precondition != pod["metadata"]["uid"]:
                raise KubeConflict(409, "uid precondition failed")
            if pod["metadata"].get("finalizers"):  # held: marked for deletion, not removed
                pod["metadata"]["deletionGracePeriodSeconds"] = 0
                self._bump(pod)
                return {}
            del self.pods[key]
            return {}
        assert method == "PATCH"
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_rv is not None and wanted_rv != pod["metadata"]["resourceVersion"]:
            raise KubeConflict(409, "the object has been modified")
        if m.group(3):
            # Like the apiserver's pod status strategy: metadata changes are kept (labels,
            # annotations), spec/deletionTimestamp/ownerReferences are not.
            kept = {k: v for k, v in (body.get("metadata") or {}).items() if k in ("labels", "annotations")}
            if self.status_drops_metadata:
                kept = {}
            patch = {"status": body["status"], "metadata": kept}
        else:
            patch = {"metadata": {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}}
        updated = merge_patch(pod, patch)
        self._bump(updated)
        self.pods[key] = updated
        return copy.deepcopy(updated)


class DictObjects:
    """``ObjectSource`` backed by plain dicts that tests change between syncs."""

    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, bytes]] = {}
        self.config_maps: dict[str, dict[str, str]] = {}

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        return self.config_maps.get(name)

    async def get_secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        return self.secrets.get(name)

    async def list_services(self, namespace: str) -> list[Any]:
        return []


class Cloud(InMemoryProvider):
    """The in-memory reference provider, plus: switchable failures, and a record of deletes."""

    def __init__(self, name: str, offers: Iterable[Offer]) -> None:
        super().__init__(name)
        self.catalog = list(offers)
        self.fail_delete = False
        self.fail_list = False
        self.keep_on_delete = False  #: a graceful provider: delete leaves it running until ``finish``
        self.hidden: set[str] = set()  #: UIDs a (glitching) list omits while ``get`` still finds them
        self.deletes: list[tuple[str, float | None]] = []
        self.deploys: list[DeploymentRequest] = []

    async def deploy(self, request: DeploymentRequest) -> DeploymentStatus:
        self.deploys.append(request)
        return await super().deploy(request)

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        if self.fail_list:
            raise Transient("connection refused", provider=self.name)
        return [s for s in await super().list(node_name) if s.uid not in self.hidden]

    async def delete(self, uid: str, *, grace_period_seconds: float | None = None) -> None:
        self.deletes.append((uid, grace_period_seconds))
        if self.fail_delete:
            raise Transient("delete timed out", provider=self.name)
        if self.keep_on_delete and uid in self.deployments:
            return
        await super().delete(uid, grace_period_seconds=grace_period_seconds)

    def set_phase(self, uid: str, phase: Phase, **fields: Any) -> None:
        self.deployments[uid] = self.deployments[uid].model_copy(update={"phase": phase, **fields})


def gpu_offer(provider: str, price: float = 1.0, capacity: int = 10) -> Offer:
    return Offer(
        provider=provider,
        offer_id=f"{provider}-h100",
        gpu_type="H100-SXM-80GB",
        gpu_count=1,
        price_per_hour=price,
        capacity=capacity,
    )


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    kube: FakeKube
    cloud: Cloud
    placer: Placer
    tracker: DeploymentTracker
    objects: DictObjects
    sync: PodSync
    clock: Clock
    changed: list[str] = field(default_factory=list)

    async def run(self, pod: JSON | None, key: str | None = None) -> Any:
        """One reconcile of ``pod`` as the informer would hand it over (the stored object)."""
        if pod is None:
            assert key is not None
            return await self.sync.sync(key, None)
        meta = pod["metadata"]
        current = self.kube.pod(meta["namespace"], meta["name"])
        return await self.sync.sync(f"{meta['namespace']}/{meta['name']}", current)


async def world(
    *,
    clock: Clock | None = None,
    settings: SyncSettings | None = None,
    kube: FakeKube | None = None,
    cloud: Cloud | None = None,
    endpoints: Callable[[str], list[JSON] | None] | None = None,
) -> World:
    """A fresh PodSync (a new process); pass ``kube``/``cloud`` to share them with another one."""
    clock = clock or Clock()
    kube = kube or FakeKube()
    cloud = cloud or Cloud("cheap", [gpu_offer("cheap")])
    providers = {"cheap": cloud}
    placer = Placer(providers, clock=clock)
    await placer.refresh()
    changed: list[str] = []
    tracker = DeploymentTracker(providers, NODE, interval=3600, on_change=changed.append, clock=clock)
    objects = DictObjects()
    events = EventRecorder(kube, component="vkprovider", host=NODE)  # type: ignore[arg-type]
    sync = PodSync(
        kube,  # type: ignore[arg-type]
        providers,
        placer,
        tracker,
        events,
        objects,
        settings or SyncSettings(node_name=NODE, host_ip="127.0.0.1"),
        wall_clock=clock,
        endpoints=endpoints,
    )
    return World(kube, cloud, placer, tracker, objects, sync, clock, changed)


def gpu_pod(name: str = "p", uid: str = "uid-1", *, env: list[JSON] | None = None, **meta: Any) -> JSON:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "creationTimestamp": "2027-01-15T08:00:00Z",
            **meta,
        },
        "spec": {
            "nodeName": NODE,
            "restartPolicy": "Always",
            "containers": [
                {
                    "name": "server",
                    "image": "img:1",
                    "env": env or [],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }
