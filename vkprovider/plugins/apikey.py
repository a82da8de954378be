"""API-key sourcing for HTTP adapters, kept apart so the key has exactly one path to the wire.

An adapter's settings mix in :class:`ApiKeySettings`: the key comes from the config (``api_key``,
a ``SecretStr``), from an environment variable (``api_key_env``, typically filled from a
Kubernetes Secret with ``secretKeyRef``) or from a file (``api_key_file``, typically a mounted
Secret volume), exactly one of the three. :class:`ApiKeySource` resolves it lazily on first use,
so a missing variable surfaces as ``QuotaOrBilling`` (stop using the provider, alert) instead of
crashing the service at start, and :class:`BearerAuth` attaches it per request so it never sits
in client headers, reprs or logs. ``scrub``/``scrubbed`` remove it from any text we might surface.
"""

from __future__ import annotations

import os
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
        """The key; raise ``QuotaOrBilling`` naming the source (never the value) if unavailable."""
        if self._resolved is None:
            self._resolved = self._resolve()
        return self._resolved.get_secret_value()

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
        variable is read when the container starts, so it needs a restart; a mounted file not."""
        if not self._secret:
            return ""
        then = ", then restart vkprovider" if restart else ""
        return f" (it comes from Secret {self._secret}: create it{then})"

    def scrub(self, text: str) -> str:
        """Replace the key in ``text`` (error bodies, exception strings) with ``***``."""
        if self._resolved is None:
            return text
        key = self._resolved.get_secret_value()
        return text.replace(key, "***") if key else text

    def scrubbed(self, error: ProviderError) -> ProviderError:
        """``error`` with the key scrubbed from its text: defence in depth, whatever the server sent."""
        error.message = self.scrub(error.message)
        error.args = (error.message,)
        return error


class BearerAuth(httpx.Auth):
    """Adds ``Authorization: Bearer <key>`` at send time, so the key lives nowhere else."""

    def __init__(self, source: ApiKeySource) -> None:
        self._source = source

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._source.get()}"
        yield request
