"""Errors that carry behaviour, not strings.

Every layer decides what to do from the class alone: the pod controller fails the pod on
``InvalidRequest``, placement moves to the next candidate on ``NoCapacity``, the retry policy
backs off on ``Transient`` (honouring ``retry_after``), and ``QuotaOrBilling`` disables the
provider. They are mapped to HTTP and gRPC status codes in exactly one place each
(``vkprovider.http.errors`` and ``vkprovider.plugins.grpc.status``).
"""

from __future__ import annotations


class VkProviderError(Exception):
    """Base of every error the service raises on purpose."""

    #: Stable machine-readable name, used in pod reasons, gRPC details and HTTP bodies.
    code: str = "Error"

    def __init__(self, message: str, *, provider: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        #: The pod/Event reason to report (e.g. ``MandatorySecretNotFound``); defaults to ``code``.
        self.reason = reason or self.code

    def __str__(self) -> str:
        return f"{self.provider}: {self.message}" if self.provider else self.message


class ConfigError(VkProviderError):
    """Configuration is invalid; the message names the field."""

    code = "ConfigError"


class ProviderError(VkProviderError):
    """An error reported by (or about) a provider adapter."""

    code = "ProviderError"


class InvalidRequest(ProviderError):
    """The request can never succeed as written; fail the pod now with this message."""

    code = "InvalidRequest"


class Unsupported(InvalidRequest):
    """This provider (or this plugin's version) does not implement what the request needs.

    Final for this provider only: placement tries the next candidate, and fails the pod only
    when every candidate refused it. A plugin built against an older API answers a method it
    lacks with gRPC ``UNIMPLEMENTED``, which reads as this error.
    """

    code = "Unsupported"


class NoCapacity(ProviderError):
    """The provider has no capacity for this offer now; try the next candidate and blocklist this one."""

    code = "NoCapacity"


class Transient(ProviderError):
    """A temporary failure; retry the same provider with backoff, not before ``retry_after`` seconds."""

    code = "Transient"

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        reason: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, reason=reason)
        self.retry_after = retry_after


class QuotaOrBilling(ProviderError):
    """The account cannot pay or is over quota; stop using this provider and alert an operator."""

    code = "QuotaOrBilling"


class NotFound(ProviderError):
    """The deployment (or object) does not exist."""

    code = "NotFound"


PROVIDER_ERRORS: dict[str, type[ProviderError]] = {
    cls.code: cls
    for cls in (ProviderError, InvalidRequest, Unsupported, NoCapacity, Transient, QuotaOrBilling, NotFound)
}


def provider_error_from_code(
    code: str, message: str, *, provider: str | None = None, retry_after: float | None = None
) -> ProviderError:
    """Rebuild a provider error from its wire code; unknown codes degrade to ``Transient``."""
    cls = PROVIDER_ERRORS.get(code, Transient)
    if cls is Transient:
        return Transient(message, provider=provider, retry_after=retry_after)
    return cls(message, provider=provider)


class Unschedulable(VkProviderError):
    """No provider can take the pod now (no candidate, budget exhausted, circuit open).

    The pod stays Pending with ``reason`` and is retried with backoff; it is not failed.
    """

    code = "Unschedulable"
