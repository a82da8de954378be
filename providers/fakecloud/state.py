"""The simulated cloud's state: offers with live capacity, and deployments whose status is a pure
function of (creation time, lifecycle timings, now, admin overrides).

Deriving status from the clock instead of running a task per deployment keeps the simulation
deterministic, cheap (thousands of deployments cost nothing while idle) and easy to reset.
"""

from __future__ import annotations

import ipaddress
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from vkprovider.plugins.api import (
    LABEL_POD_UID,
    DeploymentEndpoints,
    DeploymentRequest,
    DeploymentStatus,
    Phase,
)

from .config import CatalogEntry, FakeCloudConfig, Knobs
from .deployment import Deployment, Outcome
from .ledger import LedgerEntry
from .lifecycle import ending, endpoints_of, status_of
from .rules import Rules


class ApiError(Exception):
    """An error the API returns as ``{"error": {"code", "message"}}`` with ``status``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class OfferState:
    entry: CatalogEntry
    capacity: int


def _run_override(request: DeploymentRequest, default: float | None, code: int) -> tuple[float | None, int]:
    """``FAKECLOUD_RUN_SECONDS``/``FAKECLOUD_EXIT_CODE`` in the first container's env end the run
    (handy for Jobs in demos); otherwise the config's lifecycle applies."""
    env = {e.name: e.value for e in request.containers[0].env} if request.containers else {}
    try:
        run = float(env["FAKECLOUD_RUN_SECONDS"]) if "FAKECLOUD_RUN_SECONDS" in env else default
        exit_code = int(env.get("FAKECLOUD_EXIT_CODE", code))
    except ValueError:
        raise ApiError(400, "InvalidRequest", "FAKECLOUD_RUN_SECONDS/EXIT_CODE must be numbers") from None
    return run, exit_code


def ip_network(config: FakeCloudConfig, port: int) -> ipaddress.IPv4Network:
    """The instance's pod IP range: ``config.ip_range``, else a /18 of 10.0.0.0/8 chosen by the
    listening port. Instances on consecutive ports never share a range (two of 1023 random ports
    do with probability 1/1023: set ``ip_range`` to rule it out); 10.0.0.0/18 is never used (left
    for a cluster's service IPs; the dev cluster's are in 198.19.0.0/24)."""
    if config.ip_range:
        return ipaddress.IPv4Network(config.ip_range)
    block = port % 1023 + 1
    return ipaddress.IPv4Network((int(ipaddress.IPv4Address("10.0.0.0")) + (block << 14), 18))


class IpPool:
    """Hands out the range's host addresses in order, wrapping, never one that is in use."""

    def __init__(self, network: ipaddress.IPv4Network) -> None:
        self.network = network
        self._first = int(network.network_address) + 1
        self._size = max(1, network.num_addresses - 2)
        self._next = 0

    def take(self, in_use: set[str]) -> str:
        for _ in range(self._size):
            ip = str(ipaddress.IPv4Address(self._first + self._next))
            self._next = (self._next + 1) % self._size
            if ip not in in_use:
                return ip
        raise ApiError(409, "NoCapacity", f"pod IP range {self.network} is exhausted")


class Store:
    def __init__(
        self, config: FakeCloudConfig, clock: Callable[[], float] = time.monotonic, *, port: int = 0
    ) -> None:
        self.config = config
        self.clock = clock
        #: ``clock() + wall_offset`` is unix time (the ledger's axis), also under a fake clock.
        self.wall_offset = time.time() - clock()
        self.ips = IpPool(ip_network(config, port))
        self.port = port
        #: every deployment ever accepted, by provider id (see ledger.py)
        self.ledger: dict[str, LedgerEntry] = {}
        #: monotonic time an admin-requested outage ends (None: no timed outage)
        self.outage_until: float | None = None
        self.outage_mode = "error"
        self.knobs = config.knobs.model_copy()
        self.rng = random.Random(config.seed)
        self.offers: dict[str, OfferState] = {}
        self.deployments: dict[str, Deployment] = {}
        #: pod UID → labels of deployments the cloud "lost", so a watch can report them.
        self.lost: dict[str, dict[str, str]] = {}
        #: "METHOD /route" → count of API requests served, for tests and the admin stats endpoint.
        self.requests: dict[str, int] = {}
        #: The API keys accepted (``Authorization: Bearer``); empty: no key needed. The config's
        #: ``api_key`` at start, then what ``PUT /admin/api-keys`` sets (the provider's console:
        #: add a new key, revoke the old one, as a key rotation does).
        self.api_keys: set[str] = {config.api_key} if config.api_key else set()
        self.rules = Rules()
        #: pod UID → (deployment, monotonic time it is gone): deletes in flight (glitches.py)
        self.deleting: dict[str, tuple[Deployment, float]] = {}
        #: glitch name → times injected (list omissions, Unknown reports, watches ended)
        self.glitches: dict[str, int] = {}
        self._ids = itertools.count(1)
        self.reset(config.seed)

    def reset(self, seed: int | None = None) -> None:
        self.knobs = self.config.knobs.model_copy()
        self.rng = random.Random(seed if seed is not None else self.config.seed)
        self.offers = {e.id: OfferState(e, e.capacity) for e in self.config.catalog}
        self.deployments.clear()
        self.lost.clear()
        self.deleting.clear()
        self.glitches.clear()
        self.requests.clear()
        self.rules.clear()
        self.ledger.clear()
        self.outage_until = None

    def wall(self, at: float | None = None) -> float:
        """Unix seconds of monotonic ``at`` (default: now)."""
        return (self.clock() if at is None else at) + self.wall_offset

    def in_outage(self) -> bool:
        """The ``outage`` knob, or a timed outage (``POST /admin/outage``) that has not ended."""
        if self.outage_until is not None and self.clock() >= self.outage_until:
            self.outage_until = None
        return self.knobs.outage or self.outage_until is not None

    def set_knobs(self, knobs: Knobs) -> None:
        self.knobs = knobs

    # --- catalog -------------------------------------------------------------------------------

    def choose_offer(self, request: DeploymentRequest) -> OfferState:
        """The requested offer, or the cheapest that fits the GPU type/count and region."""
        if request.offer_id:
            offer = self.offers.get(request.offer_id)
            if offer is None:
                raise ApiError(409, "NoCapacity", f"offer {request.offer_id!r} is not in the catalog")
            candidates = [offer]
        else:
            candidates = [
                o
                for o in self.offers.values()
                if (not request.gpu_type or o.entry.gpu_type == request.gpu_type)
                and o.entry.gpu_count >= request.gpu_count
                and (not request.region or o.entry.region == request.region)
            ]
            if not candidates:
                shape = f"{request.gpu_count} x {request.gpu_type or 'any GPU'}"
                raise ApiError(409, "NoCapacity", f"no offer for {shape} in the catalog")
        available = sorted(
            (o for o in candidates if o.capacity > 0), key=lambda o: (o.entry.price_per_hour, o.entry.id)
        )
        if not available:
            raise ApiError(409, "NoCapacity", f"offer {candidates[0].entry.id!r} has no capacity left")
        return available[0]

    # --- deployments ---------------------------------------------------------------------------

    def create(self, request: DeploymentRequest, labels: dict[str, str]) -> tuple[Deployment, bool]:
        """Create unless a deployment for the pod UID exists; returns (deployment, created)."""
        if labels.get(LABEL_POD_UID, request.uid) != request.uid:
            raise ApiError(400, "InvalidRequest", f"label {LABEL_POD_UID} does not match the request uid")
        existing = self.deployments.get(request.uid)
        if existing is not None:
            return existing, False
        if self.knobs.billing_error:
            raise ApiError(402, "QuotaOrBilling", "payment required: the account has no credit")
        offer = self.choose_offer(request)
        run, exit_code = _run_override(
            request, self.config.lifecycle.run_seconds, self.config.lifecycle.exit_code
        )
        n = next(self._ids)
        deployment = Deployment(
            uid=request.uid,
            provider_id=f"fc-{n:06d}",
            request=request,
            labels={**labels, **request.tags()},
            offer=offer.entry,
            created=self.clock(),
            created_wall=datetime.now(UTC),
            ip=self.ips.take({d.ip for d in self.deployments.values()}),
            run_seconds=run,
            exit_code=exit_code,
        )
        offer.capacity -= 1
        self.deployments[request.uid] = deployment
        self.ledger[deployment.provider_id] = LedgerEntry(
            uid=request.uid,
            deployment_id=deployment.provider_id,
            provider=self.config.provider,
            instance=str(self.port) if self.port else "",
            offer_id=offer.entry.id,
            gpu_type=offer.entry.gpu_type,
            gpus=offer.entry.gpu_count,
            price_per_hour=offer.entry.price_per_hour,
            started_at=self.wall(deployment.created),
        )
        self.lost.pop(request.uid, None)
        return deployment, True

    def get(self, uid: str) -> Deployment:
        deployment = self.deployments.get(uid)
        if deployment is None:
            raise ApiError(404, "NotFound", f"no deployment for pod uid {uid}")
        return deployment

    def remove(self, uid: str, *, lost: bool = False) -> bool:
        deployment = self.deployments.pop(uid, None)
        if deployment is None:
            return False
        self._close_bill(deployment, "lost" if lost else "deleted")
        deployment.removed_at = self.clock()
        if (offer := self.offers.get(deployment.offer.id)) is not None:
            offer.capacity += 1
        if lost:
            self.lost[uid] = deployment.labels
        elif self.knobs.delete_delay_seconds > 0:  # asynchronous: still reported for a while
            self.deleting[uid] = (deployment, self.clock() + self.knobs.delete_delay_seconds)
        return True

    def _close_bill(self, deployment: Deployment, reason: str) -> None:
        entry = self.ledger.get(deployment.provider_id)
        if entry is None or entry.ended_at is not None:
            return
        end = ending(deployment, self.config, self.clock())
        if end is not None:  # it had already stopped running (and billing) before the delete
            entry.ended_at, entry.end_reason = self.wall(end.at), end.reason
        else:
            entry.ended_at, entry.end_reason = self.wall(), reason

    def bills(self) -> list[LedgerEntry]:
        """The ledger now: terminal deployments still present stop billing at their end."""
        for deployment in self.deployments.values():
            entry = self.ledger.get(deployment.provider_id)
            end = ending(deployment, self.config, self.clock())
            if entry is not None and entry.ended_at is None and end is not None:
                entry.ended_at, entry.end_reason = self.wall(end.at), end.reason
        return list(self.ledger.values())

    def select(self, selector: dict[str, str]) -> list[Deployment]:
        return [
            d for d in self.deployments.values() if all(d.labels.get(k) == v for k, v in selector.items())
        ]

    def roll_losses(self, deployments: list[Deployment]) -> list[Deployment]:
        """Apply ``loss_rate``: each deployment read may vanish, as if the cloud lost it."""
        if self.knobs.loss_rate <= 0:
            return deployments
        kept = []
        for deployment in deployments:
            if self.rng.random() < self.knobs.loss_rate:
                self.remove(deployment.uid, lost=True)
            else:
                kept.append(deployment)
        return kept

    def status(self, deployment: Deployment) -> DeploymentStatus:
        """Its status; a running one carries its endpoints (what ``GET …/endpoints`` answers),
        so a client needs no second call to learn how it is reached."""
        at = self._seen_at(deployment)
        status = status_of(deployment, self.config, at)
        if status.phase is not Phase.RUNNING:
            return status
        endpoints = endpoints_of(deployment, self.config, at, routable=self.knobs.routable)
        return status.model_copy(update={"endpoints": endpoints})

    def endpoints(self, deployment: Deployment) -> DeploymentEndpoints:
        return endpoints_of(deployment, self.config, self._seen_at(deployment), routable=self.knobs.routable)

    def _seen_at(self, deployment: Deployment) -> float:
        """The instant ``deployment`` is reported at: now, or when its delete was accepted (a
        deleted run never reaches its natural end, so it can never report a later exit 0)."""
        now = self.clock()
        return now if deployment.removed_at is None else min(now, deployment.removed_at)

    def terminate(self, uid: str, outcome: Outcome) -> Deployment:
        deployment = self.get(uid)
        if deployment.outcome is None and not self.status(deployment).phase.terminal:
            deployment.outcome = outcome
        return deployment

    def skip_to(self, uid: str, stage: str) -> Deployment:
        """Move a deployment's clock forward so it is ``running`` or ``serving`` now."""
        deployment = self.get(uid)
        life = self.config.lifecycle
        elapsed = life.provisioning_seconds + (life.serving_after_seconds if stage == "serving" else 0.0)
        shift = max(0.0, deployment.created - (self.clock() - elapsed))
        deployment.created -= shift
        deployment.created_wall -= timedelta(seconds=shift)
        return deployment

    def lost_status(self, uid: str) -> DeploymentStatus:
        return DeploymentStatus(
            uid=uid, phase=Phase.UNKNOWN, reason="DeploymentLost", message="deployment vanished"
        )
