"""Secret values of a request, kept out of every message a provider sends back.

A cloud that echoes its input in an error (``invalid env value 'hunter2'``) would otherwise put a
Secret's value into a pod Event, the pod's status, the service log and ``/state``, all readable
by people who may not read the Secret. The guard is the one place every adapter answer passes,
so it keeps, per pod UID, the secret values of that pod's request — environment values from
Secrets, secret volume files, registry credentials — and replaces each of them, and its
JSON-escaped and base64 forms, by ``[redacted]`` in error messages and status messages.

Values shorter than ``MIN_LENGTH`` are not replaced: redacting ``1`` or ``on`` everywhere would
garble every message and hide nothing. Known limits: a value cut in pieces, or base64-encoded
at an offset inside a larger blob, is not recognised; a pod deployed before a restart of the
service has no recorded values until it is deployed again.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable

from vkprovider.errors import ProviderError
from vkprovider.models import ContainerStatus, DeploymentRequest, DeploymentStatus

REDACTED = "[redacted]"
MIN_LENGTH = 4


def _forms(value: bytes) -> set[str]:
    """The value as text (and trimmed of surrounding whitespace), JSON-escaped, and base64."""
    forms: set[str] = set()
    for raw in (value, value.strip()):
        encoded = base64.b64encode(raw).decode()
        forms |= {encoded, encoded.rstrip("="), base64.urlsafe_b64encode(raw).decode().rstrip("=")}
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            continue
        forms |= {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    return {form for form in forms if len(form) >= MIN_LENGTH}


def secret_values(request: DeploymentRequest) -> set[bytes]:
    """Every secret value a request carries (env from Secrets, secret files, pull credentials)."""
    values: set[bytes] = set()
    for container in (*request.containers, *request.init_containers):
        values |= {env.value.encode() for env in container.env if env.secret}
        values |= {file.content for file in container.files if file.secret}
    for credential in request.registry_credentials:
        values.add(credential.password.encode())
        values.add(f"{credential.username}:{credential.password}".encode())  # docker's "auth"
    return {value for value in values if len(value.strip()) >= MIN_LENGTH}


class Scrubber:
    """Replaces a fixed set of values (in all their forms) by ``[redacted]``; one regex pass.

    The values are encoded and compiled on first use, not per deploy: most pods never get a
    message to scrub, and compiling a few KiB of literals costs about a millisecond."""

    def __init__(self, values: Iterable[bytes]) -> None:
        self._values = [value for value in values if len(value.strip()) >= MIN_LENGTH]
        self._pattern: re.Pattern[str] | None = None

    def __bool__(self) -> bool:
        return bool(self._values)

    def __call__(self, text: str) -> str:
        if not self._values or not text:
            return text
        if self._pattern is None:
            forms: set[str] = set()
            for value in self._values:
                forms |= _forms(value)
            # longest first, so a value is replaced whole before any shorter value inside it
            ordered = sorted(forms, key=len, reverse=True) or [REDACTED]  # never an empty pattern
            self._pattern = re.compile("|".join(map(re.escape, ordered)))
        return self._pattern.sub(REDACTED, text)


_NOTHING = Scrubber(())


class SecretBook:
    """One provider's scrubbers, by pod UID (the guard remembers a request when it deploys it).

    A UID is *retired* when its deployment is deleted, ``get`` says it is gone, or a deploy was
    refused outright, and forgotten once a later list no longer returns it (a deleting
    deployment may still report a message; a redeploy remembers it again). Memory is one entry
    per pod the provider holds, plus the retired ones until the next list."""

    def __init__(self) -> None:
        self._values: dict[str, set[bytes]] = {}
        self._scrubbers: dict[str, Scrubber] = {}
        self._retiring: set[str] = set()
        self._all: Scrubber | None = None

    def __len__(self) -> int:
        return len(self._values)

    def remember(self, request: DeploymentRequest) -> None:
        values = secret_values(request)
        self._retiring.discard(request.uid)
        if not values or self._values.get(request.uid) == values:
            return
        self._values[request.uid] = values
        self._scrubbers[request.uid] = Scrubber(values)
        self._all = None

    def forget(self, uid: str) -> None:
        if self._values.pop(uid, None) is not None:
            self._scrubbers.pop(uid, None)
            self._all = None
        self._retiring.discard(uid)

    def retire(self, uid: str) -> None:
        """The deployment was deleted: forget ``uid`` after the next list without it."""
        if uid in self._values:
            self._retiring.add(uid)

    def listed(self, uids: Iterable[str]) -> None:
        """A full list returned ``uids``: retired UIDs no longer among them are forgotten."""
        if self._retiring:
            for uid in self._retiring - set(uids):
                self.forget(uid)

    def scrubber(self, uid: str | None = None) -> Scrubber:
        """``uid``'s scrubber; for ``None`` (a call not about one pod) every known value's."""
        if uid is not None:
            return self._scrubbers.get(uid, _NOTHING)
        if self._all is None:
            every: set[bytes] = set()
            for values in self._values.values():
                every |= values
            self._all = Scrubber(every)
        return self._all

    def error(self, exc: BaseException, uid: str | None = None) -> None:
        """Scrub ``exc`` in place; drop its cause chain if the chain holds a secret (a logged
        traceback would print it)."""
        scrub = self.scrubber(uid)
        if not scrub:
            return
        if isinstance(exc, ProviderError):
            exc.message = scrub(exc.message)
            exc.args = (exc.message, *exc.args[1:])
        chained: BaseException | None = exc.__cause__ or exc.__context__
        while chained is not None:
            if scrub(str(chained)) != str(chained):
                exc.__cause__ = exc.__context__ = None
                exc.__suppress_context__ = True
                break
            chained = chained.__cause__ or chained.__context__

    def status(self, status: DeploymentStatus) -> DeploymentStatus:
        """``status`` with its reason and messages (its own and its containers') scrubbed."""
        scrub = self._scrubbers.get(status.uid)
        if scrub is None or not (status.message or status.reason or status.containers):
            return status
        update: dict[str, object] = {}
        for key in ("reason", "message"):
            value: str = getattr(status, key)
            if (clean := scrub(value)) != value:
                update[key] = clean
        containers = [_container(c, scrub) for c in status.containers]
        if any(new is not old for new, old in zip(containers, status.containers, strict=True)):
            update["containers"] = containers
        return status.model_copy(update=update) if update else status


def _container(status: ContainerStatus, scrub: Scrubber) -> ContainerStatus:
    reason, message = scrub(status.reason), scrub(status.message)
    if reason == status.reason and message == status.message:
        return status
    return status.model_copy(update={"reason": reason, "message": message})
