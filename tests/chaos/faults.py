"""The faults the chaos run injects, one coroutine each: inject, hold for ``seconds``, clear.

Every fault is real: fakecloud's own knobs and rules over HTTP (5xx, 429 + Retry-After, hangs
longer than the adapter's deadline, creates that happen but answer 5xx, lost deployments,
capacity exhaustion, a timed outage), signals to real processes by PID (the gRPC plugin, the
``vkprovider serve`` replicas, kube-apiserver, etcd), aborted TCP connections (watches cut),
and a network partition of the leader (leadership moves by the Lease rules, never by force).
Each returns a short detail string for the run log.
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.chaos.rig import Rig

Fault = Callable[["Rig", random.Random, float], Awaitable[str]]


async def _knobs(rig: Rig, cloud: str, seconds: float, **knobs: float) -> str:
    await rig.admin(cloud, "PATCH", "/knobs", json=knobs)
    try:
        await asyncio.sleep(seconds)
    finally:
        await rig.admin(cloud, "PATCH", "/knobs", json=dict.fromkeys(knobs, 0.0))
    return f"{cloud}: {knobs}"


async def provider_5xx(rig: Rig, rng: random.Random, seconds: float) -> str:
    return await _knobs(rig, rng.choice(rig.cloud_names), seconds, error_rate=0.4)


async def rate_limit_429(rig: Rig, rng: random.Random, seconds: float) -> str:
    cloud = rng.choice(rig.cloud_names)
    await rig.admin(cloud, "PATCH", "/knobs", json={"retry_after_seconds": rng.choice([1, 2])})
    return await _knobs(rig, cloud, seconds, rate_limit_rate=0.5)


async def timeouts(rig: Rig, rng: random.Random, seconds: float) -> str:
    """Requests hang longer than the adapter's 5 s deadline, then are processed anyway."""
    cloud = rng.choice(rig.cloud_names)
    await rig.admin(cloud, "PATCH", "/knobs", json={"hang_seconds": 7})
    return await _knobs(rig, cloud, seconds, timeout_rate=0.3)


async def ambiguous_create(rig: Rig, rng: random.Random, seconds: float) -> str:
    return await _knobs(rig, rng.choice(rig.cloud_names), seconds, ambiguous_create_rate=0.6)


async def lost_deployments(rig: Rig, rng: random.Random, seconds: float) -> str:
    """The cloud loses one or two running deployments (the pod must go Failed/ProviderLost and
    be replaced, never linger)."""
    cloud = rng.choice(rig.cloud_names)
    live = sorted(rig.clouds[cloud].store.deployments)
    lost = rng.sample(live, min(len(live), rng.randint(1, 2)))
    for uid in lost:
        await rig.admin(cloud, "POST", f"/deployments/{uid}/lose")
        rig.injected_losses.add(uid)
    await asyncio.sleep(seconds)
    return f"{cloud}: lost {len(lost)}"


async def capacity_exhausted(rig: Rig, rng: random.Random, seconds: float) -> str:
    """One cloud sells out mid-run: creates answer 409 NoCapacity, offers show 0."""
    cloud = rng.choice(rig.cloud_names)
    rule = await rig.admin(
        cloud,
        "POST",
        "/rules",
        json={"method": "POST", "path": "/v1/deployments", "status": 409, "message": "sold out"},
    )
    await rig.admin(cloud, "PUT", "/capacity", json={"capacity": 0})
    try:
        await asyncio.sleep(seconds)
    finally:
        await rig.admin(cloud, "DELETE", f"/rules/{rule['id']}")
        await rig.restore_capacity(cloud)
    return f"{cloud}: sold out"


async def provider_outage(rig: Rig, rng: random.Random, seconds: float) -> str:
    """A cloud is unreachable (every call hangs to the client's deadline) for the whole window."""
    cloud = rng.choice(rig.cloud_names)
    outage = max(seconds, rig.plan.outage_seconds)
    await rig.admin(cloud, "POST", "/outage", json={"seconds": outage, "mode": "hang"})
    try:
        await asyncio.sleep(outage)
    finally:
        await rig.admin(cloud, "DELETE", "/outage")
    return f"{cloud}: unreachable {outage:.0f}s"


async def plugin_killed(rig: Rig, rng: random.Random, seconds: float) -> str:
    """SIGKILL the leader's gRPC plugin process; its supervisor must restart it."""
    replica = await rig.leader()
    pids = replica.children()
    for pid in pids:
        rig.signal_pid(pid, signal.SIGKILL)
    await asyncio.sleep(seconds)
    return f"{replica.identity}: killed plugin pids {pids}"


async def plugin_noise(rig: Rig, rng: random.Random, seconds: float) -> str:
    """The leader's gRPC plugins write 1 MiB lines, binary and unterminated output
    (``noisy_plugin.py``) while serving; then, still noisy, they are SIGKILLed, so the restart
    passes the same noise before its handshake. The supervisor must keep reading (a plugin never
    blocks on a full pipe), see the exit and restart it (issue 22 defect 2)."""
    replica = await rig.leader()
    markers = [p.with_name(p.name + ".noise") for p in rig.workdir.glob("*-plugin.yaml")]
    for path in markers:
        path.touch()
    try:
        noisy = replica.children()
        for pid in noisy:
            rig.signal_pid(pid, signal.SIGUSR1)
        await asyncio.sleep(seconds / 2)
        for pid in noisy:
            rig.signal_pid(pid, signal.SIGUSR1)  # more while the first burst may still be read
            rig.signal_pid(pid, signal.SIGKILL)

        async def restarted() -> bool:
            return bool(replica.children()) and not set(replica.children()) & set(noisy)

        if not await rig.wait_for(restarted, timeout=60):
            raise AssertionError(f"plugin pids {noisy} killed mid-noise were not restarted in 60s")
        await asyncio.sleep(seconds / 2)
    finally:
        for path in markers:
            path.unlink(missing_ok=True)
    return f"{replica.identity}: noise from plugin pids {noisy}, killed, restarted as {replica.children()}"


async def serve_sigkill(rig: Rig, rng: random.Random, seconds: float) -> str:
    """SIGKILL a replica (the leader two times in three) at a random point of the churn, possibly
    with creates and deletes in flight, and start it again after 0-3 s."""
    leader = await rig.leader()
    replica = leader if rng.random() < 0.67 or len(rig.replicas) == 1 else rng.choice(rig.replicas)
    kills = 0
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(rng.uniform(0.5, 4.0))
        await replica.kill(signal.SIGKILL)
        kills += 1
        await asyncio.sleep(rng.uniform(0.0, 3.0))
        replica.start()
        await asyncio.sleep(rng.uniform(3.0, 6.0))
    return f"{replica.identity}: SIGKILLed {kills}x"


async def watch_cut(rig: Rig, rng: random.Random, seconds: float) -> str:
    """Abort every connection to the apiserver (watches mid-stream) a few times."""
    deadline = asyncio.get_running_loop().time() + seconds
    cut = 0
    while asyncio.get_running_loop().time() < deadline:
        for proxy in rig.proxies.values():
            cut += proxy.cut()
        await asyncio.sleep(rng.uniform(1.0, 4.0))
    return f"{cut} connections cut"


async def apiserver_killed(rig: Rig, rng: random.Random, seconds: float) -> str:
    down = rng.uniform(2.0, 6.0)
    await rig.cluster.restart_component("kube-apiserver", signal.SIGKILL, down_seconds=down)
    await asyncio.sleep(seconds)
    return f"down {down:.1f}s"


async def etcd_restarted(rig: Rig, rng: random.Random, seconds: float) -> str:
    down = rng.uniform(1.0, 4.0)
    await rig.cluster.restart_component("etcd", signal.SIGTERM, down_seconds=down)
    await asyncio.sleep(seconds)
    return f"down {down:.1f}s"


async def leadership_moved(rig: Rig, rng: random.Random, seconds: float) -> str:
    """Move leadership away and back: partition the leader from the apiserver until the other
    replica holds the Lease, heal, let the new leader place pods (two force-deleted, so their
    replacements are created in its term), then do the same to it. The first replica regains a
    term with whatever it cached in the last one (issue 10 defect 1 is that path)."""
    if len(rig.replicas) < 2:
        return "skipped: one replica"
    moves = []
    for _ in range(2):
        before = await rig.lease_holder()
        proxy = rig.proxies[before]
        proxy.block()
        try:
            moved = await rig.wait_for(lambda b=before: _holder_changed(rig, b), timeout=60)
        finally:
            proxy.unblock()
        moves.append(f"{before}->{await rig.lease_holder()}" if moved else f"{before}: stuck 60s")
        await rig.force_delete_some(rng, 2)
        await asyncio.sleep(seconds / 2)
    return ", ".join(moves)


async def _holder_changed(rig: Rig, before: str) -> bool:
    holder = await rig.lease_holder()
    return bool(holder) and holder != before


# --- state across terms (issue 22, defects 4-8): restarts and leader moves at bad moments -------


async def _running_uids(rig: Rig, cloud: str) -> list[str]:
    listed = await rig.admin(cloud, "GET", "/deployments")
    return sorted(d["uid"] for d in listed if d["status"]["phase"] == "Running")


async def _bounce_leader(rig: Rig, rng: random.Random, down: tuple[float, float] = (0.0, 2.0)) -> str:
    """SIGKILL the leader and start it again: its next term (or the other replica's) takes over."""
    replica = await rig.leader()
    await replica.kill(signal.SIGKILL)
    await asyncio.sleep(rng.uniform(*down))
    replica.start()
    return replica.identity


async def restart_in_restart_window(rig: Rig, rng: random.Random, seconds: float) -> str:
    """A container exits (restartPolicy Always: the service deletes the deployment and redeploys
    it after a short backoff) and the leader is SIGKILLed around that moment, so the next term
    meets pods whose deployment was deleted on purpose: it must redeploy them, never fail them
    ``ProviderLost``, and count each exit once."""
    deadline = asyncio.get_running_loop().time() + seconds
    exits = bounces = 0
    while asyncio.get_running_loop().time() < deadline:
        running = [(cloud, uid) for cloud in rig.cloud_names for uid in await _running_uids(rig, cloud)]
        for cloud, uid in rng.sample(running, min(len(running), rng.randint(1, 2))):
            code = rng.choice([0, 1])
            await rig.admin(cloud, "POST", f"/deployments/{uid}/finish", json={"exit_code": code})
            exits += 1
        await asyncio.sleep(rng.uniform(0.8, 2.0))  # the poll (1 s) sees it; the restart begins
        await _bounce_leader(rig, rng)
        bounces += 1
        await asyncio.sleep(rng.uniform(4.0, 7.0))
    return f"{exits} exits, leader SIGKILLed {bounces}x inside restart windows"


async def restart_during_outage(rig: Rig, rng: random.Random, seconds: float) -> str:
    """A cloud's API goes down, then the leader is SIGKILLed and restarted while it is down: the
    new term cannot list that cloud's pods; when it answers they must be adopted (budget, spread,
    placement), never deployed a second time elsewhere nor failed."""
    cloud = rng.choice(rig.cloud_names)
    outage = max(seconds, rig.plan.outage_seconds)
    await rig.admin(cloud, "POST", "/outage", json={"seconds": outage, "mode": "hang"})
    try:
        await asyncio.sleep(rng.uniform(1.0, 3.0))
        who = await _bounce_leader(rig, rng)
        await asyncio.sleep(max(0.0, outage - 3.0))
    finally:
        await rig.admin(cloud, "DELETE", "/outage")
    return f"{cloud}: unreachable {outage:.0f}s, {who} restarted during it"


async def stale_annotation_at_restart(rig: Rig, rng: random.Random, seconds: float) -> str:
    """While no replica acts (the leader SIGKILLed), one to three Running pods get a
    ``vkprovider.io/provider`` annotation naming the *other* cloud (as after a restart-redeploy
    whose annotation write never landed); then the replica starts again. The only copy must not
    be deleted as a twin, nor the pod redeployed; the annotation is corrected."""
    replica = await rig.leader()
    await replica.kill(signal.SIGKILL)
    staled = []
    try:
        pods = [
            p
            for p in await rig.list_pods() or []
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]
        for pod in rng.sample(pods, min(len(pods), rng.randint(1, 3))):
            annotated = (pod["metadata"].get("annotations") or {}).get("vkprovider.io/provider")
            others = [c for c in rig.cloud_names if c != annotated]
            if not annotated or not others:
                continue
            name = pod["metadata"]["name"]
            path = f"/api/v1/namespaces/{rig.namespace}/pods/{name}"
            body = {"metadata": {"annotations": {"vkprovider.io/provider": rng.choice(others)}}}
            await rig._patch(path, body)
            staled.append(name)
        await asyncio.sleep(rng.uniform(0.0, 2.0))
    finally:
        replica.start()
    await asyncio.sleep(seconds)
    return f"{replica.identity} restarted; stale annotations on {staled}"


# --- API glitches that are not failures (issue 22; fakecloud's glitches.py) ------------------
# The workloads are fine; the cloud's API misreports them. Each also ends watch streams every
# 2 s, so the service relists often and the glitched lists really reach it. Invariants: nothing
# is lost (no ProviderLost: no cloud lost anything), restartCount is not inflated, and no
# interrupted pod is counted as a Job completion.


async def list_omits(rig: Rig, rng: random.Random, seconds: float) -> str:
    """List answers leave out live deployments (each with probability 0.3, per list)."""
    return await _knobs(rig, rng.choice(rig.cloud_names), seconds, list_omit_rate=0.3, watch_max_seconds=2.0)


async def unknown_flapping(rig: Rig, rng: random.Random, seconds: float) -> str:
    """List answers report live deployments ``Unknown`` now and then; ``get`` tells the truth."""
    return await _knobs(rig, rng.choice(rig.cloud_names), seconds, unknown_rate=0.3, watch_max_seconds=2.0)


async def async_deletes(rig: Rig, rng: random.Random, seconds: float) -> str:
    """Deletes are only accepted: the deployment is still listed (and found) for 4 s, as with a
    remote Kubernetes (restarts, graceful deletions and interrupted Job pods meet it)."""
    return await _knobs(rig, rng.choice(rig.cloud_names), seconds, delete_delay_seconds=4.0)


#: the knobs the glitch faults above turn, all reset by ``Rig.clear_all``
GLITCH_KNOBS = {
    "list_omit_rate": 0.0,
    "unknown_rate": 0.0,
    "delete_delay_seconds": 0.0,
    "watch_max_seconds": 0.0,
}


FAULTS: dict[str, Fault] = {
    "provider-5xx": provider_5xx,
    "rate-limit-429": rate_limit_429,
    "timeouts": timeouts,
    "ambiguous-create": ambiguous_create,
    "lost-deployments": lost_deployments,
    "capacity-exhausted": capacity_exhausted,
    "provider-outage": provider_outage,
    "plugin-killed": plugin_killed,
    "plugin-noise": plugin_noise,
    "serve-sigkill": serve_sigkill,
    "watch-cut": watch_cut,
    "apiserver-killed": apiserver_killed,
    "etcd-restarted": etcd_restarted,
    "leadership-moved": leadership_moved,
    "restart-in-restart-window": restart_in_restart_window,
    "restart-during-outage": restart_during_outage,
    "stale-annotation-at-restart": stale_annotation_at_restart,
    "list-omits": list_omits,
    "unknown-flapping": unknown_flapping,
    "async-deletes": async_deletes,
}
