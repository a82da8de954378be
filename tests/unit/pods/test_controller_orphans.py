"""The orphan pass on a term: gone pods, finished pods and twins are deleted; live placements,
pods a worker holds and pods of unknown placement are not; one failing delete stops nothing;
a term that has not synced collects nothing."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from vkprovider.errors import Transient
from vkprovider.kube.client import KubeClient
from vkprovider.kube.events import EventRecorder
from vkprovider.models import DeploymentStatus, Phase
from vkprovider.placement import Placer
from vkprovider.plugins.memory import InMemoryProvider
from vkprovider.pods.orphans import collect_orphans
from vkprovider.pods.sync import ANNOTATION_PROVIDER
from vkprovider.pods.term import Term, TermSettings

SETTINGS = TermSettings(
    node_name="vk",
    host_ip="127.0.0.1",
    status_poll_seconds=1.0,
    watch_resync_seconds=300.0,
    lost_grace_seconds=60.0,
    backoff_base_seconds=0.5,
    backoff_max_seconds=60.0,
    queue_rate=100.0,
)


class FailingDeletes(InMemoryProvider):
    """Deletes of the UIDs in ``broken`` fail, as a provider with a bad day does."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.broken: set[str] = set()

    async def delete(self, uid: str) -> None:
        if uid in self.broken:
            raise Transient("503 from the provider")
        await super().delete(uid)


def kube() -> KubeClient:
    # Never contacted: the orphan pass reads only the term's caches.
    return KubeClient(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")))


def pod(uid: str, *, provider: str | None = None, phase: str = "Running") -> dict[str, Any]:
    annotations = {ANNOTATION_PROVIDER: provider} if provider else {}
    return {
        "metadata": {"namespace": "ns", "name": f"pod-{uid}", "uid": uid, "annotations": annotations},
        "spec": {},
        "status": {"phase": phase},
    }


def running(uid: str) -> DeploymentStatus:
    return DeploymentStatus(uid=uid, phase=Phase.RUNNING, node_name="vk")


def build() -> tuple[Term, dict[str, FailingDeletes], Placer]:
    providers = {name: FailingDeletes(name) for name in ("p", "q")}
    placer = Placer(providers)  # type: ignore[arg-type]
    api = kube()
    term = Term(1, api, providers, placer, EventRecorder(api, component="t", host="vk"), SETTINGS)  # type: ignore[arg-type]
    return term, providers, placer


def deploy(providers: dict[str, FailingDeletes], term: Term, name: str, uid: str) -> None:
    providers[name].deployments[uid] = running(uid)
    listed = list(providers[name].deployments.values())  # what that provider's list now says
    term.tracker._apply(name, listed, asked=term.tracker.clock())


def add_pod(term: Term, item: dict[str, Any]) -> None:
    term.informer.cache[f"ns/{item['metadata']['name']}"] = item
    term._on_pod("ADDED", None, item)


async def test_gone_finished_and_twin_deployments_go_live_ones_stay() -> None:
    term, providers, placer = build()
    add_pod(term, pod("live", provider="p"))
    deploy(providers, term, "p", "live")
    deploy(providers, term, "q", "live")  # a twin: an ambiguous create on q succeeded after all
    deploy(providers, term, "p", "gone")  # its pod was deleted while nobody watched
    add_pod(term, pod("done", provider="q", phase="Succeeded"))
    deploy(providers, term, "q", "done")
    add_pod(term, pod("unknown"))  # no annotation, no placement record: never guess
    deploy(providers, term, "p", "unknown")
    deploy(providers, term, "q", "unknown")
    term.synced = True

    result = await collect_orphans(term, providers, placer)  # type: ignore[arg-type]

    assert (result.deleted, result.failed) == (3, 0)
    assert set(providers["p"].deployments) == {"live", "unknown"}
    assert set(providers["q"].deployments) == {"unknown"}
    assert [t.provider for _, t in term.tracker.entries("live")] == ["p"]


async def test_one_failing_delete_does_not_stop_the_pass() -> None:
    term, providers, placer = build()
    for uid in ("a", "b", "c"):
        deploy(providers, term, "p", uid)
    providers["p"].broken = {"a"}
    term.synced = True
    result = await collect_orphans(term, providers, placer)  # type: ignore[arg-type]
    assert (result.deleted, result.failed) == (2, 1)
    assert set(providers["p"].deployments) == {"a"}
    assert term.tracker.get("a") is not None  # still tracked: the next pass tries again
    providers["p"].broken = set()
    assert (await collect_orphans(term, providers, placer)).deleted == 1  # type: ignore[arg-type]


async def test_an_unsynced_term_and_a_held_pod_are_left_alone() -> None:
    term, providers, placer = build()
    deploy(providers, term, "p", "a")  # its pod is simply not listed yet
    assert (await collect_orphans(term, providers, placer)).deleted == 0  # type: ignore[arg-type]
    term.synced = True
    add_pod(term, pod("b", provider="p"))
    deploy(providers, term, "q", "b")
    assert await term.queue.get() == "ns/pod-b"  # a worker holds b: its placement may be moving
    result = await collect_orphans(term, providers, placer)  # type: ignore[arg-type]
    assert result.deleted == 1 and "b" in providers["q"].deployments and "a" not in providers["p"].deployments


async def test_the_uid_index_follows_the_cache() -> None:
    term, _, _ = build()
    first = pod("uid-1")
    term._on_pod("ADDED", None, first)
    second = pod("uid-2")
    second["metadata"]["name"] = first["metadata"]["name"]  # same name, new pod
    term._on_pod("MODIFIED", first, second)  # the deletion of the first was never seen
    assert term.uid_keys == {"uid-2": "ns/pod-uid-1"}
    term._on_pod("DELETED", second, second)
    assert term.uid_keys == {}
