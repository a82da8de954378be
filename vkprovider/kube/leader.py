"""Lease-based leader election, like client-go's ``leaderelection`` package (DESIGN §4.11).

Two replicas of the service share one Lease; only the holder acts. The rules are client-go's:

* a candidate takes the Lease if it does not exist, has no holder, or its record has not
  changed for ``leaseDurationSeconds`` *as observed on this replica's own clock* (comparing
  renewTime to local wall time would trust clock sync between machines);
* every write is a create or a PUT carrying the read ``resourceVersion``, so two candidates
  racing for an expired Lease cannot both win: the loser gets a 409;
* the leader renews every ``retry_period``; if no renewal succeeds for ``renew_deadline`` (or it
  sees another holder), it stops leading at once: ``lead()`` is cancelled *before* anyone else
  can take over (``renew_deadline < lease_duration``);
* on shutdown the leader releases (empty holder), so a successor need not wait for expiry;
* every failure of a Lease read or write (not only ``KubeError``: an answer of the wrong shape
  too) is one failed attempt, logged and retried; only ``lead()``'s own failure or cancellation
  ends ``run()``, and the service runs it supervised (``vkprovider.tasks``).

Several electors in one process (one per virtual node, ``nodes:``) may share a ``campaign_slot``:
each attempt to take the Lease runs inside it, so a replica can count what it already leads
and hold back (``vkprovider.served_node.LeadShare``); renewals never wait for it.

After losing leadership the elector becomes a candidate again and calls ``lead()`` anew when it
wins, so ``lead`` must be safe to start more than once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from vkprovider.kube import resources
from vkprovider.kube.client import KubeClient
from vkprovider.kube.errors import KubeConflict

log = logging.getLogger(__name__)

JSON = dict[str, Any]


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """``await run(lead)``: ``lead()`` runs only while this replica holds the Lease."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        *,
        release_on_cancel: bool = True,
        campaign_slot: Callable[[], AbstractAsyncContextManager[object]] | None = None,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self._kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self._slot = campaign_slot or contextlib.nullcontext
        self._lease: JSON | None = None
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0  # monotonic time the record last changed
        self._leading = False

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def leader(self) -> str | None:
        """The holder last observed (None before the first read, "" when released)."""
        return None if self._observed is None else self._observed[0]

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Campaign, lead, repeat; returns when ``lead()`` returns, raises what it raises.

        Cancelling ``run`` cancels ``lead()`` and releases the Lease (``release_on_cancel``)."""
        try:
            while True:
                await self._acquire()
                if not await self._lead(lead):
                    return
        finally:
            if self._leading and self.release_on_cancel:
                await self._release()
            self._leading = False

    # Campaign ---------------------------------------------------------------------------------
    async def _acquire(self) -> None:
        while True:
            try:
                async with self._slot():  # leading is set inside: the slot's owner counts it
                    self._leading = await self._try_acquire_or_renew()
                if self._leading:
                    log.info("became leader", extra={"lease": self.name, "identity": self.identity})
                    return
            except Exception as exc:  # any failure (an odd answer, a bug) is one failed try
                # Not only ``KubeError``: an answer of the wrong shape must not end the campaign
                # (and with it the service); cancellation is a BaseException and still ends it.
                log.warning("leader election: %s: %s", type(exc).__name__, exc, extra={"lease": self.name})
            await asyncio.sleep(self.retry_period * (1.0 + 0.2 * random.random()))

    async def _lead(self, lead: Callable[[], Awaitable[None]]) -> bool:
        """Run ``lead()`` while renewing; True if leadership was lost (campaign again)."""
        leading = asyncio.ensure_future(lead())
        renewing = asyncio.ensure_future(self._keep_renewing())
        lost = False
        try:
            await asyncio.wait({leading, renewing}, return_when=asyncio.FIRST_COMPLETED)
            lost = not leading.done()
        finally:
            renewing.cancel()
            leading.cancel()
            await asyncio.gather(leading, renewing, return_exceptions=True)
        if not lost:
            leading.result()  # lead() returned (or raised: propagate)
            return False
        self._leading = False
        log.warning(
            "lost leadership; lead() cancelled", extra={"lease": self.name, "identity": self.identity}
        )
        return True

    async def _keep_renewing(self) -> None:
        """Returns when leadership is lost: no renewal for ``renew_deadline``, or another holder."""
        last_ok = time.monotonic()
        while True:
            await asyncio.sleep(self.retry_period)
            left = last_ok + self.renew_deadline - time.monotonic()
            ok = False
            try:
                async with asyncio.timeout(max(left, 0.001)):
                    ok = await self._try_acquire_or_renew()
            except Exception as exc:  # a failed renewal, whatever failed
                log.warning(
                    "lease renewal failed: %s: %s", type(exc).__name__, exc, extra={"lease": self.name}
                )
            if ok:
                last_ok = time.monotonic()
            elif (
                self.leader not in (None, self.identity) or time.monotonic() - last_ok >= self.renew_deadline
            ):
                return

    # The Lease --------------------------------------------------------------------------------
    def _observe(self, lease: JSON) -> None:
        spec = lease.get("spec") or {}
        record = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        self._lease = lease

    def _record(self, spec: JSON, *, acquire: bool) -> JSON:
        now = _micro_time(datetime.now(UTC))
        spec = dict(spec)
        if acquire:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                1 if spec.get("holderIdentity") else 0
            )
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, math.ceil(self.lease_duration)),
            renewTime=now,
        )
        return spec

    async def _try_acquire_or_renew(self) -> bool:
        # Fast path, as client-go: the leader PUTs its cached copy; a 409 falls back to a read.
        if self._leading and self._lease is not None:
            lease = {**self._lease, "spec": self._record(self._lease.get("spec") or {}, acquire=False)}
            with contextlib.suppress(KubeConflict):
                self._observe(await resources.replace_lease(self._kube, lease))
                return True
        current = await resources.get_lease(self._kube, self.namespace, self.name)
        if current is None:
            fresh: JSON = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._record({"leaseTransitions": 0}, acquire=True),
            }
            try:
                self._observe(await resources.create_lease(self._kube, fresh))
            except KubeConflict:
                return False
            return True
        self._observe(current)
        spec = current.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != self.identity:
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if time.monotonic() < self._observed_at + duration:
                return False  # held by another and not expired
        updated = {**current, "spec": self._record(spec, acquire=holder != self.identity)}
        try:
            self._observe(await resources.replace_lease(self._kube, updated))
        except KubeConflict:
            return False
        return True

    async def _release(self) -> None:
        """Hand the Lease back (empty holder) so a successor need not wait for its expiry.

        A renewal cancelled mid-flight may have landed, leaving our copy one version behind:
        on a conflict the Lease is read again and released only while it is still ours. The
        release gets a renewal's budget (``renew_deadline``); past it the Lease simply expires."""
        if self._lease is None:
            return
        try:
            async with asyncio.timeout(max(self.renew_deadline, self.retry_period * 2)):
                for _ in range(3):
                    try:
                        self._observe(await resources.replace_lease(self._kube, self._released(self._lease)))
                        break
                    except KubeConflict:
                        current = await resources.get_lease(self._kube, self.namespace, self.name)
                        if (
                            current is None
                            or (current.get("spec") or {}).get("holderIdentity") != self.identity
                        ):
                            return  # already someone else's (or gone): nothing of ours to release
                        self._lease = current
                else:
                    raise KubeConflict(409, "the Lease kept changing while it was being released")
            log.info("released leadership", extra={"lease": self.name, "identity": self.identity})
        except Exception as exc:  # the Lease will simply expire
            log.warning("could not release leadership: %s", exc, extra={"lease": self.name})

    @staticmethod
    def _released(lease: JSON) -> JSON:
        now = _micro_time(datetime.now(UTC))
        spec = {
            **(lease.get("spec") or {}),
            "holderIdentity": None,
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
        }
        return {**lease, "spec": spec}
