"""Build provider instances from configuration: entry points in-process, gRPC out-of-process.

An adapter is found by its name in the ``vkprovider.providers`` entry-point group, or, for
development and tests, by a ``module:Class`` path. Its nested pydantic ``Settings`` validates the
instance's ``settings`` so that configuration mistakes stop the service at start-up with the
provider and field named (``providers[fakecloud-cheap].settings.url: Field required``), not at
the first deploy. Every provider comes back wrapped in :func:`vkprovider.plugins.guard.guard`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, cast

from pydantic import BaseModel, ValidationError

from vkprovider.errors import ConfigError
from vkprovider.plugins.api import AdapterClass, Provider
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.supervisor import PluginSpec, PluginSupervisor
from vkprovider.plugins.guard import guard

ENTRY_POINT_GROUP = "vkprovider.providers"


class ProviderSpec(Protocol):
    """What the registry reads from ``vkprovider.config.ProviderConfig`` (structural: config sits
    above this layer)."""

    @property
    def name(self) -> str: ...
    @property
    def adapter(self) -> str: ...
    @property
    def settings(self) -> dict[str, Any]: ...
    @property
    def grpc(self) -> PluginSpec | None: ...


def adapter_entry_points() -> dict[str, EntryPoint]:
    """Installed adapters by name."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load_adapter(adapter: str, *, where: str = "adapter") -> AdapterClass:
    """Resolve an entry-point name or ``module:Class`` path to an adapter class.

    Raises ``ConfigError`` prefixed with ``where`` (e.g. ``providers[x].adapter``).
    """
    if ":" in adapter:
        module_name, _, attr = adapter.partition(":")
        try:
            obj: object = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"{where}: cannot import adapter {adapter!r}: {exc}") from None
    else:
        eps = adapter_entry_points()
        if adapter not in eps:
            known = ", ".join(sorted(eps)) or "none installed"
            raise ConfigError(f"{where}: unknown adapter {adapter!r} (known: {known})")
        try:
            obj = eps[adapter].load()
        except Exception as exc:
            raise ConfigError(
                f"{where}: adapter {adapter!r} ({eps[adapter].value}) failed to load: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    settings_model = getattr(obj, "Settings", None)
    if not (isinstance(settings_model, type) and issubclass(settings_model, BaseModel)):
        raise ConfigError(f"{where}: adapter {adapter!r} has no nested pydantic 'Settings' model")
    return cast(AdapterClass, obj)


def validate_settings(adapter_cls: AdapterClass, settings: dict[str, Any], *, where: str) -> BaseModel:
    """Validate ``settings`` with the adapter's model; ``ConfigError`` names every bad field."""
    try:
        return adapter_cls.Settings.model_validate(settings)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(part) for part in err["loc"])
            problems.append(f"{where}.{field}: {err['msg']}" if field else f"{where}: {err['msg']}")
        raise ConfigError("; ".join(problems)) from None


def instantiate(adapter: str, name: str, settings: dict[str, Any]) -> Provider:
    """Load, validate and construct one in-process adapter (unguarded)."""
    where = f"providers[{name}]"
    adapter_cls = load_adapter(adapter, where=f"{where}.adapter")
    validated = validate_settings(adapter_cls, settings, where=f"{where}.settings")
    try:
        provider = adapter_cls(name, validated)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"{where}: adapter {adapter!r} failed to start: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(provider, Provider):
        raise ConfigError(f"{where}: adapter {adapter!r} does not implement the Provider protocol")
    return provider


def build_provider(config: ProviderSpec) -> Provider:
    """One guarded provider: in-process from ``config.adapter``, or a supervised gRPC plugin."""
    if config.grpc is not None:
        supervisor = PluginSupervisor(config.name, config.grpc)
        return guard(GrpcProvider(config.name, supervisor, call_timeout=config.grpc.call_timeout_seconds))
    return guard(instantiate(config.adapter, config.name, config.settings))


def build_providers(configs: Iterable[ProviderSpec]) -> dict[str, Provider]:
    """Build every configured provider, keyed by instance name; the first bad one raises."""
    providers: dict[str, Provider] = {}
    for config in configs:
        if config.name in providers:
            raise ConfigError(f"providers[{config.name}].name: duplicate provider name")
        providers[config.name] = build_provider(config)
    return providers
