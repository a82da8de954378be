"""``imagePullSecrets`` → registry credentials (``.dockerconfigjson`` and legacy ``.dockercfg``).

Like the kubelet, a missing or unreadable pull secret is a warning, not a failure: the image may
be public. Nothing from the secret ever reaches a message.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from vkprovider.models import RegistryCredential
from vkprovider.translate.names import PULL_SECRET_REASON
from vkprovider.translate.refs import RefResolver
from vkprovider.translate.types import TranslationEvent

_REASON = PULL_SECRET_REASON


def _entry(server: str, entry: Any) -> RegistryCredential | None:
    if not isinstance(entry, Mapping):
        return None
    username, password = entry.get("username"), entry.get("password")
    auth = entry.get("auth")
    if (not username or not password) and isinstance(auth, str) and auth:
        try:
            username, _, password = base64.b64decode(auth, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
    if not isinstance(username, str) or not isinstance(password, str) or not username:
        return None
    return RegistryCredential(server=server, username=username, password=password)


def parse_docker_config(data: Mapping[str, bytes]) -> list[RegistryCredential] | None:
    """Credentials from a ``kubernetes.io/dockerconfigjson`` or ``dockercfg`` secret; ``None`` if
    neither key holds valid JSON."""
    for key, nested in ((".dockerconfigjson", True), (".dockercfg", False)):
        if key not in data:
            continue
        try:
            parsed = json.loads(data[key])
        except (ValueError, UnicodeDecodeError):
            return None
        auths = parsed.get("auths") if nested and isinstance(parsed, dict) else parsed
        if not isinstance(auths, dict):
            return None
        found = [_entry(str(server), entry) for server, entry in auths.items()]
        return [c for c in found if c is not None]
    return None


async def registry_credentials(
    names: list[str], refs: RefResolver, warnings: list[TranslationEvent]
) -> list[RegistryCredential]:
    """Credentials from the named pull secrets (``names.pull_secret_names``: already checked)."""
    result: list[RegistryCredential] = []
    for name in names:
        data = await refs.peek_secret(name)
        if data is None:
            warnings.append(TranslationEvent(_REASON, f'image pull secret "{name}" not found'))
            continue
        parsed = parse_docker_config(data)
        if parsed is None:
            warnings.append(
                TranslationEvent(_REASON, f'image pull secret "{name}" has no valid docker config')
            )
            continue
        result.extend(parsed)
    return result
