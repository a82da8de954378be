"""API-key sourcing for HTTP adapters, kept apart so the key has exactly one path to the wire.

An adapter's settings mix in :class:`ApiKeySettings`: the key comes from the config (``api_key``,
a ``SecretStr``), from an environment variable (``api_key_env``, typically filled from a
Kubernetes Secret with ``secretKeyRef``) or from a file (``api_key_file``, typically a mounted
Secret volume), exactly one of the three. :class:`ApiKeySource` resolves it lazily on first use,
so a missing variable surfaces as ``QuotaOrBilling`` (stop using the provider, alert) instead of
crashing the service at start, and :class:`BearerAuth` attaches it per request so it never sits
in client headers, reprs or logs. ``scrub``/``scrubbed`` remove it from any text we might surface.

Rotation without a restart (issue 29): the key is not cached for the process's life. A key file
is read again whenever its identity changes (inode, size, modification time — the kubelet
updates a mounted Secret by swapping a symlink, so the path's inode changes), and the variable is
looked up on every use. When the cloud answers 401 or 403, :class:`BearerAuth` reads the source
again and, if the key changed, sends the request once more with the new key before the adapter
maps the answer (to ``QuotaOrBilling``): rotating a key and revoking the old one at once costs
no failed call. This is the one place every HTTP adapter's key goes through.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Self

import httpx
from pydantic import BaseModel, Field, SecretStr, model_validator

from vkprovider.errors import ProviderError, QuotaOrBilling

__all__ = ["ApiKeySettings", "ApiKeySource", "BearerAuth"]


class ApiKeySettings(BaseModel):
    """Settings mixin: the three ways to supply an API key, of which exactly one must be set."""

    api_key: SecretStr | None = Field(default=None, description="inline key; prefer env or file")
    api_key_env: str | None = Field(default=None, description="environment variable holding the key")
    api_key_file: Path | None = Field(default=None, description="file holding the key (mounted Secret)")
    api_key_secret: str | None = Field(
        default=None,
        description="where the variable or file comes from (e.g. 'ns/name (key K)'), named in errors",
    )

    @model_validator(mode="after")
    def _one_key_source(self) -> Self:
        given = [self.api_key is not None, bool(self.api_key_env), self.api_key_file is not None]
        if sum(given) != 1:
            raise ValueError("set exactly one of api_key, api_key_env or api_key_file")
        return self


class ApiKeySource:
    """Where the key comes from; holds the resolved value only as a ``SecretStr``."""

    def __init__(
        self,
        provider: str,
        *,
        api_key: SecretStr | None,
        api_key_env: str | None,
        api_key_file: Path | None,
        api_key_secret: str | None = None,
    ) -> None:
        self._provider = provider
        self._secret = api_key_secret
        self._inline = api_key
        self._env = api_key_env
        self._file = api_key_file
        self._resolved: SecretStr | None = None
        #: The key file's identity when it was last read (device, inode, size, mtime in ns).
        self._file_id: tuple[int, int, int, int] | None = None
        #: Keys used before a rotation, still scrubbed from text (an error may quote an old one).
        self._previous: list[str] = []
        self._lock = threading.Lock()  # the streaming and the call pool may resolve at once

    @classmethod
    def from_settings(cls, provider: str, settings: ApiKeySettings) -> ApiKeySource:
        return cls(
            provider,
            api_key=settings.api_key,
            api_key_env=settings.api_key_env,
            api_key_file=settings.api_key_file,
            api_key_secret=settings.api_key_secret,
        )

    def __repr__(self) -> str:
        return f"ApiKeySource(provider={self._provider!r}, env={self._env!r}, file={self._file!r})"

    def get(self) -> str:
        """The key; raise ``QuotaOrBilling`` naming the source (never the value) if unavailable.

        Cheap enough for every request: the variable is a dict lookup and the file is re-read
        only when ``stat`` says it changed, so a rotated key is used from the next call on.
        """
        with self._lock:
            if self._resolved is None or self._changed():
                self._remember(self._resolve())
            assert self._resolved is not None
            return self._resolved.get_secret_value()

    def refresh(self) -> bool:
        """Read the source again now (after a 401/403); True if the key differs from the last one.

        An unreadable or empty source raises ``QuotaOrBilling`` as ``get`` does.
        """
        with self._lock:
            before = self._resolved.get_secret_value() if self._resolved is not None else None
            self._remember(self._resolve())
            assert self._resolved is not None
            return self._resolved.get_secret_value() != before

    def _changed(self) -> bool:
        if self._env:
            current = self._resolved.get_secret_value() if self._resolved is not None else ""
            return os.environ.get(self._env, "").strip() != current
        if self._file is not None:
            return self._stat_file() != self._file_id
        return False

    def _stat_file(self) -> tuple[int, int, int, int] | None:
        assert self._file is not None
        try:
            st = self._file.stat()
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _remember(self, key: SecretStr) -> None:
        old = self._resolved.get_secret_value() if self._resolved is not None else ""
        if old and old != key.get_secret_value() and old not in self._previous:
            self._previous = [*self._previous[-3:], old]
        self._resolved = key

    def _resolve(self) -> SecretStr:
        if self._inline is not None and self._inline.get_secret_value():
            return self._inline
        if self._env:
            value = os.environ.get(self._env, "").strip()
            if not value:
                raise QuotaOrBilling(
                    f"API key environment variable {self._env} is unset{self._from_secret(restart=True)}",
                    provider=self._provider,
                )
            return SecretStr(value)
        if self._file is not None:
            self._file_id = self._stat_file()  # before reading: a change meanwhile is seen next time
            try:
                value = self._file.read_text().strip()
            except OSError as exc:
                raise QuotaOrBilling(
                    f"API key file {self._file} is unreadable ({exc.strerror}){self._from_secret()}",
                    provider=self._provider,
                ) from None
            if not value:
                raise QuotaOrBilling(
                    f"API key file {self._file} is empty{self._from_secret()}", provider=self._provider
                )
            return SecretStr(value)
        raise QuotaOrBilling("no API key configured", provider=self._provider)

    def _from_secret(self, *, restart: bool = False) -> str:
        """Where the operator fixes it: a Kubernetes Secret is the usual source of the key. A
        variable is set when the container starts (a changed Secret needs a restart); a mounted
        file is re-read when the kubelet updates it."""
        if not self._secret:
            return ""
        then = ", then restart vkprovider" if restart else ""
        return f" (it comes from Secret {self._secret}: create it{then})"

    def scrub(self, text: str) -> str:
        """Replace the key in ``text`` (error bodies, exception strings) with ``***``."""
        keys = [*self._previous, self._resolved.get_secret_value()] if self._resolved is not None else []
        for key in keys:
            if key:
                text = text.replace(key, "***")
        return text

    def scrubbed(self, error: ProviderError) -> ProviderError:
        """``error`` with the key scrubbed from its text: defence in depth, whatever the server sent."""
        error.message = self.scrub(error.message)
        error.args = (error.message,)
        return error


class BearerAuth(httpx.Auth):
    """Adds ``Authorization: Bearer <key>`` at send time, so the key lives nowhere else.

    On a 401 or 403 the key is read again from its source; if it changed (rotated since the last
    read), the request is sent once more with the new key and that answer is the call's. A key
    that did not change is not retried: the refusal is the cloud's answer (a revoked key, a
    missing permission, or on some clouds no capacity), for the adapter to map.
    """

    #: The request is sent twice at most; its body must be replayable.
    requires_request_body = True

    def __init__(self, source: ApiKeySource) -> None:
        self._source = source

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._source.get()}"
        response = yield request
        if response.status_code in (401, 403) and self._source.refresh():
            request.headers["Authorization"] = f"Bearer {self._source.get()}"
            yield request
