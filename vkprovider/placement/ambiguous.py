"""Ambiguous creates: a UID is live on at most one provider, even when a create's answer is lost.

A deploy that timed out, answered ``Transient`` or raised something unclassified may have created
the deployment anyway (the request reached the provider, the answer did not reach us). Trying
another candidate then would run, and bill, the pod twice. So every create is first written down
as an open question, "``uid`` may be on ``provider``", and the question is closed only by an
answer that settles it:

* the create succeeded, or the provider refused it in a way the contract defines as "nothing
  created" (``NoCapacity``, ``QuotaOrBilling``, ``InvalidRequest``);
* a ``get`` after the ambiguous create says ``NotFound`` (nothing there: the next candidate is
  safe), or finds a live deployment (it *was* created: adopt it as the placement), or finds a
  finished/lost one that is then deleted and confirmed gone by another ``get``.

When the provider cannot answer (the ``get`` or ``delete`` fails too) the question stays open,
and :class:`Unsettled` (a ``Transient``) keeps the pod Pending to be retried later; every later
deploy of the UID settles its open questions before it considers any provider. A create that is
cancelled mid-flight (shutdown) also stays open. A request still in flight inside the provider
when the ``get`` answers cannot be seen by anyone; the orphan collector is the backstop for that.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from vkprovider.errors import InvalidRequest, NoCapacity, NotFound, ProviderError, QuotaOrBilling, Transient
from vkprovider.models import DeploymentStatus, Phase
from vkprovider.placement.types import PlacementTarget

log = logging.getLogger(__name__)

#: Refusals after which the contract guarantees nothing was created.
DEFINITE_REFUSALS: tuple[type[ProviderError], ...] = (NoCapacity, QuotaOrBilling, InvalidRequest)


class Unsettled(Transient):
    """A create on ``provider`` may have happened and the provider cannot tell us yet."""

    def __init__(self, uid: str, provider: str, cause: str) -> None:
        super().__init__(
            f"a create of {uid} on {provider} may have succeeded and cannot be confirmed ({cause}); "
            "not trying another provider until it is",
            provider=provider,
        )
        self.uid = uid


@dataclass(frozen=True, slots=True)
class Settled:
    """The answer for one open question: the live deployment found (adopt it), or ``None``."""

    provider: str
    status: DeploymentStatus | None


class OpenCreates:
    """The open questions, and the calls that settle them (each bounded by ``timeout``)."""

    def __init__(
        self,
        providers: Mapping[str, PlacementTarget],
        *,
        timeout: float,
        acquire: Callable[[str], Awaitable[None]],
    ) -> None:
        self._providers = providers
        self._timeout = timeout
        self._acquire = acquire  # the provider's client-side rate limit
        self._open: dict[str, set[str]] = {}  # uid -> providers a create may have reached

    def open(self, uid: str, provider: str) -> None:
        self._open.setdefault(uid, set()).add(provider)

    def close(self, uid: str, provider: str) -> None:
        held = self._open.get(uid)
        if held is not None:
            held.discard(provider)
            if not held:
                del self._open[uid]

    def forget(self, uid: str) -> None:
        """The pod is gone: whatever is left on a provider is the orphan collector's."""
        self._open.pop(uid, None)

    def clear(self) -> None:
        """A new term: questions of the old one are the orphan collector's (it lists every
        provider) and, for a pod that still exists, the new term's resync (it asks them again)."""
        self._open.clear()

    def providers_of(self, uid: str) -> list[str]:
        return sorted(self._open.get(uid, ()))

    def __len__(self) -> int:
        return len(self._open)

    def summary(self) -> dict[str, list[str]]:
        return {uid: sorted(names) for uid, names in sorted(self._open.items())}

    async def settle(self, uid: str, provider: str, *, keep_live: bool = True) -> Settled:
        """Find out whether ``uid`` exists on ``provider``; close the question or raise
        :class:`Unsettled`. A live deployment is returned (to adopt) when ``keep_live``,
        otherwise deleted like a finished one."""
        try:
            status = await self._get(uid, provider)
            live = status is not None and not status.phase.terminal and status.phase is not Phase.UNKNOWN
            if live and keep_live:
                self.close(uid, provider)
                return Settled(provider, status)
            if status is not None:
                await self._delete_confirmed(uid, provider)
        except Unsettled:
            raise
        except ProviderError as exc:
            raise Unsettled(uid, provider, f"{exc.code}: {exc.message}") from exc
        self.close(uid, provider)
        return Settled(provider, None)

    async def _get(self, uid: str, provider: str) -> DeploymentStatus | None:
        target = self._providers[provider]
        await self._acquire(provider)
        try:
            async with asyncio.timeout(self._timeout):
                return await target.get(uid)
        except NotFound:
            return None
        except ProviderError:
            raise
        except TimeoutError:
            raise Unsettled(uid, provider, "get timed out") from None
        except Exception as exc:  # contract violation: treat as "cannot tell"
            log.exception("adapter raised an unclassified error", extra={"provider": provider})
            raise Unsettled(uid, provider, f"unexpected {type(exc).__name__}") from exc

    async def _delete_confirmed(self, uid: str, provider: str) -> None:
        target = self._providers[provider]
        await self._acquire(provider)
        try:
            async with asyncio.timeout(self._timeout):
                await target.delete(uid)
        except ProviderError:
            raise
        except TimeoutError:
            raise Unsettled(uid, provider, "delete timed out") from None
        except Exception as exc:
            log.exception("adapter raised an unclassified error", extra={"provider": provider})
            raise Unsettled(uid, provider, f"unexpected {type(exc).__name__}") from exc
        if await self._get(uid, provider) is not None:
            raise Unsettled(uid, provider, "still present after delete")
        log.info("deleted the stray deployment of %s on %s", uid, provider, extra={"provider": provider})
