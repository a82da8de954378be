"""State across leadership terms and restarts (issue 22, defects 4-8 and the last-moment deploy).

A "process" is one replica: its providers and Placer outlive its terms, everything else (caches,
tracker, sync state) is the term's. A "restart" is a new process sharing only the API objects
and the providers' deployments. Real Term, PodSync, tracker, Placer and in-memory providers;
the API server is the in-memory fake of ``pod_sync_fakes``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pod_sync_fakes import NODE, Cloud, FakeKube, gpu_offer, gpu_pod

from vkprovider.errors import ProviderError, QuotaOrBilling, Transient
from vkprovider.kube.events import EventRecorder
from vkprovider.models import ContainerState, ContainerStatus, DeploymentStatus, Phase
from vkprovider.placement import Placer
from vkprovider.placement.config import PlacementConfig
from vkprovider.pods.context import ANNOTATION_PROVIDER
from vkprovider.pods.orphans import collect_orphans
from vkprovider.pods.term import Term, TermSettings

#: The restart intent written on the pod before a restart's delete (docs/virtual-node.md).
ANNOTATION_RESTARTING = "vkprovider.io/restarting"

SETTINGS = TermSettings(
    node_name=NODE,
    host_ip="127.0.0.1",
    status_poll_seconds=1.0,
    watch_resync_seconds=300.0,
    lost_grace_seconds=60.0,
    backoff_base_seconds=0.5,
    backoff_max_seconds=60.0,
    queue_rate=100.0,
)


class FlakyCloud(Cloud):
    """A cloud whose API can also refuse ``get`` (an outage of its control API)."""

    def __init__(self, name: str, price: float) -> None:
        super().__init__(name, [gpu_offer(name, price=price)])
        self.fail_get = False
        self.refusal: ProviderError | None = None  #: list and get refused (no key, billing)
        self.run_at_once = True

    async def get(self, uid: str) -> DeploymentStatus:
        if self.fail_get:
            raise Transient("connection refused", provider=self.name)
        if self.refusal is not None:
            raise self.refusal
        return await super().get(uid)

    async def list(self, node_name: str) -> list[DeploymentStatus]:
        if self.refusal is not None:
            raise self.refusal
        return await super().list(node_name)


def running(uid: str, provider: str) -> DeploymentStatus:
    return DeploymentStatus(
        uid=uid, phase=Phase.RUNNING, ready=True, node_name=NODE, offer_id=f"{provider}-h100"
    )


class Process:
    """One replica: providers and Placer shared by its terms."""

    def __init__(self, kube: FakeKube, clouds: dict[str, FlakyCloud], **placement: Any) -> None:
        self.kube = kube
        self.clouds = clouds
        self.placer = Placer(clouds, PlacementConfig(**placement))
        self.terms = 0

    async def term(self) -> Term:
        """A new term, as ``PodController.run`` starts it: list the pods, then every provider."""
        if self.terms == 0:
            await self.placer.refresh()
        self.terms += 1
        events = EventRecorder(self.kube, component="vkprovider", host=NODE)  # type: ignore[arg-type]
        term = Term(self.terms, self.kube, self.clouds, self.placer, events, SETTINGS)  # type: ignore[arg-type]
        for pod in self.kube.pods.values():
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            term.informer.cache[key] = pod
            term._on_pod("ADDED", None, pod)
        term.sync.resume.inherited = frozenset(term.uid_keys)
        term.services.synced.set()  # no Services in this namespace
        await term.tracker.poll_once()
        term.synced = True
        return term


async def sync(term: Term, kube: FakeKube, name: str) -> Any:
    pod = kube.pod("ns", name)
    if pod is not None:
        term.informer.cache[f"ns/{name}"] = pod
    return await term.sync.sync(f"ns/{name}", pod)


def clouds(p_price: float = 1.0, q_price: float = 2.0) -> dict[str, FlakyCloud]:
    return {"p": FlakyCloud("p", p_price), "q": FlakyCloud("q", q_price)}


def annotations(kube: FakeKube, name: str) -> dict[str, str]:
    pod = kube.pod("ns", name)
    assert pod is not None
    return dict(pod["metadata"].get("annotations") or {})


def phase(kube: FakeKube, name: str) -> str:
    pod = kube.pod("ns", name)
    assert pod is not None
    return str(pod["status"]["phase"])


def restart_count(kube: FakeKube, name: str) -> int:
    pod = kube.pod("ns", name)
    assert pod is not None
    return max(int(c.get("restartCount") or 0) for c in pod["status"]["containerStatuses"])


def exited(uid: str, provider: str) -> DeploymentStatus:
    return DeploymentStatus(
        uid=uid,
        phase=Phase.SUCCEEDED,
        node_name=NODE,
        offer_id=f"{provider}-h100",
        containers=[ContainerStatus(name="server", state=ContainerState.TERMINATED, exit_code=0)],
    )


# ---------------------------------------------------------------------------------------- 4


async def test_a_new_term_starts_with_an_empty_placement_book() -> None:
    """Defect 4: pods another replica deleted while we followed keep no budget share."""
    kube, cl = FakeKube(), clouds()
    process = Process(kube, cl, namespace_budgets={"ns": 1.0})
    first = await process.term()
    kube.add_pod(gpu_pod("a", "uid-a"))
    await sync(first, kube, "a")
    assert "uid-a" in cl["p"].deployments
    # We lose the lease; the other replica deletes pod a and its deployment, then we lead again.
    del kube.pods[("ns", "a")]
    cl["p"].deployments.clear()
    second = await process.term()
    kube.add_pod(gpu_pod("b", "uid-b"))
    await sync(second, kube, "b")
    assert "uid-b" in cl["p"].deployments  # not Pending BudgetExceeded where nothing runs
    assert process.placer.placed("uid-a") is None
    assert process.placer.budgets.spent("ns") == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------- 5


async def test_a_restart_during_an_outage_adopts_that_providers_pods_when_it_answers() -> None:
    """Defect 5: adoption is not only on first sight."""
    kube, cl = FakeKube(), clouds()
    cl["p"].deployments["uid-a"] = running("uid-a", "p")
    kube.add_pod(gpu_pod("a", "uid-a", annotations={ANNOTATION_PROVIDER: "p"}))
    cl["p"].fail_list = cl["p"].fail_get = True  # p's API is down when the new process starts
    term = await Process(kube, cl, namespace_budgets={"ns": 1.0}).term()
    with pytest.raises(Transient):
        await sync(term, kube, "a")  # first sight: nothing to adopt, the get fails
    cl["p"].fail_list = cl["p"].fail_get = False
    await term.tracker.poll_once()
    await sync(term, kube, "a")
    assert term.sync.placer.placed("uid-a") == ("p", "p-h100")
    assert term.sync.placer.budgets.spent("ns") == pytest.approx(1.0)
    kube.add_pod(gpu_pod("b", "uid-b"))
    await sync(term, kube, "b")  # the namespace's cap is held by a: b waits
    assert "uid-b" not in cl["p"].deployments and "uid-b" not in cl["q"].deployments
    assert phase(kube, "b") == "Pending"


# ---------------------------------------------------------------------------------------- 6


async def _restart_window(kube: FakeKube, cl: dict[str, FlakyCloud], *, delete_lands: bool) -> None:
    """Pod a runs on p, its container exits, the restart deletes it; then the process dies."""
    term = await Process(kube, cl).term()
    kube.add_pod(gpu_pod("a", "uid-a"))
    await sync(term, kube, "a")
    assert phase(kube, "a") == "Running"
    cl["p"].deployments["uid-a"] = exited("uid-a", "p")
    await term.tracker.poll_once()
    cl["p"].fail_delete = not delete_lands
    if delete_lands:
        await sync(term, kube, "a")  # restartPolicy Always: deleted, to be redeployed after a backoff
        assert "uid-a" not in cl["p"].deployments
    else:
        with pytest.raises(Transient):
            await sync(term, kube, "a")
    cl["p"].fail_delete = False
    assert restart_count(kube, "a") == 1


async def test_a_restart_inside_a_restart_window_redeploys_instead_of_provider_lost() -> None:
    """Defect 6: the restart intent is on the pod, the next term honours it."""
    kube, cl = FakeKube(), clouds()
    await _restart_window(kube, cl, delete_lands=True)
    assert annotations(kube, "a")[ANNOTATION_RESTARTING] == "1"
    term = await Process(kube, cl).term()  # the restarted service (or the new leader)
    await sync(term, kube, "a")
    assert phase(kube, "a") == "Running"
    assert "uid-a" in cl["p"].deployments
    assert restart_count(kube, "a") == 1
    assert annotations(kube, "a")[ANNOTATION_RESTARTING] == ""  # honoured: cleared


async def test_an_exit_seen_again_by_the_next_term_is_counted_once() -> None:
    """Defect 6: the restart's delete had not landed; the new term deletes it, counts nothing."""
    kube, cl = FakeKube(), clouds()
    await _restart_window(kube, cl, delete_lands=False)
    term = await Process(kube, cl).term()
    await sync(term, kube, "a")  # the old exit: deleted again
    await sync(term, kube, "a")  # redeployed
    assert phase(kube, "a") == "Running"
    assert cl["p"].deployments["uid-a"].phase is Phase.RUNNING
    assert restart_count(kube, "a") == 1


# ---------------------------------------------------------------------------------------- 7


async def test_at_a_restart_the_annotated_copy_is_the_primary_not_the_first_listed() -> None:
    """Defect 7: a twin whose provider's list arrives first does not become the pod's copy."""
    kube, cl = FakeKube(), clouds()
    cl["p"].deployments["uid-a"] = running("uid-a", "p")
    cl["q"].deployments["uid-a"] = running("uid-a", "q")  # an ambiguous create that worked
    kube.add_pod(gpu_pod("a", "uid-a", annotations={ANNOTATION_PROVIDER: "p"}))
    process = Process(kube, cl)
    term = await process.term()
    term.tracker.deployments.clear()
    term.tracker.twins.clear()
    await term.tracker._poll("q")  # q's list arrives first
    await term.tracker._poll("p")
    await sync(term, kube, "a")
    tracked = term.tracker.get("uid-a")
    assert tracked is not None and tracked.provider == "p"
    assert process.placer.placed("uid-a") == ("p", "p-h100")
    await collect_orphans(term, cl, process.placer)  # type: ignore[arg-type]
    assert "uid-a" not in cl["q"].deployments  # the twin goes
    assert "uid-a" in cl["p"].deployments  # the pod's copy stays


# ---------------------------------------------------------------------------------------- 8


async def test_a_stale_annotation_does_not_make_the_only_copy_an_orphan() -> None:
    """Defect 8: the annotation names p, the only copy is on q: it is not a twin."""
    kube, cl = FakeKube(), clouds()
    cl["q"].deployments["uid-a"] = running("uid-a", "q")
    kube.add_pod(gpu_pod("a", "uid-a", annotations={ANNOTATION_PROVIDER: "p"}))
    process = Process(kube, cl)
    term = await process.term()
    result = await collect_orphans(term, cl, process.placer)  # type: ignore[arg-type]
    assert result.deleted == 0
    assert "uid-a" in cl["q"].deployments


# ------------------------------------------------------------------------- last-moment deploy


async def test_a_pod_deployed_just_before_a_restart_is_not_deployed_again_elsewhere() -> None:
    """Deployed on p in the last milliseconds of the old term (no status, no annotation yet);
    at the restart p's API fails: the pod waits for p instead of going to q."""
    kube, cl = FakeKube(), clouds(p_price=2.0, q_price=1.0)  # q is the cheaper one now
    kube.add_pod(gpu_pod("a", "uid-a"))
    cl["p"].deployments["uid-a"] = running("uid-a", "p")
    cl["p"].fail_list = cl["p"].fail_get = True
    term = await Process(kube, cl).term()
    with pytest.raises(Transient):
        await sync(term, kube, "a")
    assert "uid-a" not in cl["q"].deployments
    cl["p"].fail_get = False  # p answers a get (its list may still fail)
    await sync(term, kube, "a")
    assert "uid-a" not in cl["q"].deployments
    assert term.sync.placer.placed("uid-a") == ("p", "p-h100")
    cl["p"].fail_list = False
    await term.tracker.poll_once()
    await sync(term, kube, "a")
    assert phase(kube, "a") == "Running"
    assert annotations(kube, "a")[ANNOTATION_PROVIDER] == "p"


async def test_a_pod_created_in_this_term_does_not_wait_for_an_unlisted_provider() -> None:
    """The wait is only for pods an earlier term may have deployed: new pods go ahead."""
    kube, cl = FakeKube(), clouds(p_price=2.0, q_price=1.0)
    cl["p"].fail_list = cl["p"].fail_get = True
    term = await Process(kube, cl).term()
    kube.add_pod(gpu_pod("b", "uid-b"))
    await sync(term, kube, "b")
    assert "uid-b" in cl["q"].deployments


async def test_an_inherited_pod_does_not_wait_for_a_provider_that_refuses() -> None:
    """The wait is for providers that cannot answer, not for one that answers with a refusal
    (its API key unset: it could not take the pod either): the pod goes to the next provider."""
    kube, cl = FakeKube(), clouds(p_price=2.0, q_price=1.0)
    kube.add_pod(gpu_pod("a", "uid-a"))
    cl["p"].refusal = QuotaOrBilling("API key environment variable P_KEY is unset", provider="p")
    term = await Process(kube, cl).term()
    await sync(term, kube, "a")
    assert "uid-a" in cl["q"].deployments


async def test_a_restart_intent_whose_redeploy_had_landed_is_cleared_and_the_next_exit_counts() -> None:
    """Defect 6: the old term redeployed but could not clear the intent before it ended."""
    kube, cl = FakeKube(), clouds()
    await _restart_window(kube, cl, delete_lands=True)
    cl["p"].deployments["uid-a"] = running("uid-a", "p")  # the redeploy landed, nothing written
    term = await Process(kube, cl).term()
    await sync(term, kube, "a")
    assert annotations(kube, "a")[ANNOTATION_RESTARTING] == ""
    cl["p"].deployments["uid-a"] = exited("uid-a", "p")  # a new exit
    await term.tracker.poll_once()
    await sync(term, kube, "a")
    assert restart_count(kube, "a") == 2
