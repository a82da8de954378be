"""Typed Kubernetes API errors, so callers branch on class rather than on status numbers."""

from __future__ import annotations

from typing import Any


class KubeError(Exception):
    """An API call failed; ``status`` is the HTTP status (0 for a transport failure)."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.body = body


class KubeNotFound(KubeError):
    """404: the object (or namespace) does not exist."""


class KubeConflict(KubeError):
    """409: stale resourceVersion, failed precondition, or already exists."""


class KubeGone(KubeError):
    """410: the watch's resourceVersion is too old; relist."""


class KubeInvalid(KubeError):
    """422 / 400: the request itself is wrong; retrying will not help."""


class InvalidObjectName(KubeInvalid):
    """A name is not a valid API path segment (empty, ``.``, ``..``, or holding ``/`` or ``%``).

    Raised before any request is sent (``status`` 0), as client-go's request builder refuses such
    names: a name from a pod spec must never walk the URL to another namespace or resource."""

    def __init__(self, name: str, what: str = "name") -> None:
        super().__init__(0, f"{what} {name[:100]!r} is not a valid path segment")
        self.name = name


class KubeForbidden(KubeError):
    """401 / 403: credentials or RBAC do not allow this."""


class KubeUnavailable(KubeError):
    """429, 5xx or a transport failure: retry with backoff."""


def error_for_status(status: int, message: str, body: Any = None) -> KubeError:
    cls: type[KubeError]
    if status == 404:
        cls = KubeNotFound
    elif status == 409:
        cls = KubeConflict
    elif status == 410:
        cls = KubeGone
    elif status in (400, 422):
        cls = KubeInvalid
    elif status in (401, 403):
        cls = KubeForbidden
    else:
        cls = KubeUnavailable
    return cls(status, message, body)
