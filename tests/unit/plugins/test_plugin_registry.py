"""Entry-point/``module:Class`` loading, settings validation, and what build_provider returns."""

from __future__ import annotations

import pytest
from plugin_fixtures import TinyProvider

from vkprovider.config import GrpcPluginConfig, ProviderConfig
from vkprovider.errors import ConfigError
from vkprovider.plugins.grpc.client import GrpcProvider
from vkprovider.plugins.grpc.supervisor import PluginSupervisor
from vkprovider.plugins.guard import GuardedProvider
from vkprovider.plugins.registry import (
    ENTRY_POINT_GROUP,
    adapter_entry_points,
    build_provider,
    build_providers,
    load_adapter,
)

TINY = "plugin_fixtures:TinyProvider"


def test_entry_point_group_lists_the_packaged_adapters() -> None:
    assert ENTRY_POINT_GROUP == "vkprovider.providers"
    assert {"fakecloud", "runpod", "vastai", "kubernetes"} <= set(adapter_entry_points())


def test_unknown_adapter_names_the_provider_and_the_known_adapters() -> None:
    with pytest.raises(
        ConfigError, match=r"providers\[gpu-a\]\.adapter: unknown adapter 'fakeclod'.*fakecloud"
    ):
        build_provider(ProviderConfig(name="gpu-a", adapter="fakeclod"))


def test_invalid_settings_name_the_provider_and_field() -> None:
    with pytest.raises(ConfigError) as caught:
        build_provider(ProviderConfig(name="fakecloud-cheap", adapter=TINY, settings={"price": "cheap"}))
    message = str(caught.value)
    assert "providers[fakecloud-cheap].settings.url: Field required" in message
    assert "providers[fakecloud-cheap].settings.price:" in message


def test_unimportable_or_settingless_adapters_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"providers\[x\]\.adapter: cannot import"):
        build_provider(ProviderConfig(name="x", adapter="no_such_module:Thing"))
    with pytest.raises(ConfigError, match="no nested pydantic 'Settings'"):
        load_adapter("plugin_fixtures:NoSettings")


def test_builds_guarded_instances_with_validated_settings() -> None:
    providers = build_providers(
        [
            ProviderConfig(name="cheap", adapter=TINY, settings={"url": "http://a", "price": 0.5}),
            ProviderConfig(name="dear", adapter=TINY, settings={"url": "http://b", "price": 3}),
        ]
    )
    assert list(providers) == ["cheap", "dear"]
    cheap = providers["cheap"]
    assert isinstance(cheap, GuardedProvider) and cheap.name == "cheap"
    assert isinstance(cheap.inner, TinyProvider) and cheap.inner.settings.price == 0.5


def test_duplicate_names_are_rejected() -> None:
    config = ProviderConfig(name="same", adapter=TINY, settings={"url": "u"})
    with pytest.raises(ConfigError, match="duplicate"):
        build_providers([config, config])


async def test_grpc_config_builds_a_supervised_grpc_provider() -> None:
    config = ProviderConfig(name="remote", grpc=GrpcPluginConfig(command=["true"], call_timeout_seconds=4))
    provider = build_provider(config)
    assert isinstance(provider, GuardedProvider)
    inner = provider.inner
    assert isinstance(inner, GrpcProvider) and inner.call_timeout == 4
    assert isinstance(inner.source, PluginSupervisor)
    await provider.close()
