"""The example provider configs in deploy/examples/ load and build their adapters' settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from vkprovider_kubernetes.adapter import KubernetesProvider
from vkprovider_runpod.adapter import RunPodProvider
from vkprovider_vastai.adapter import VastAiProvider

from vkprovider.config import load_settings

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
ADAPTERS = {"runpod": RunPodProvider, "vastai": VastAiProvider, "kubernetes": KubernetesProvider}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_example_config_is_valid(adapter: str) -> None:
    config = load_settings(EXAMPLES / f"{adapter}.yaml")
    [provider] = config.providers
    assert provider.adapter == adapter
    settings = ADAPTERS[adapter].Settings.model_validate(provider.settings)
    assert settings.model_dump()  # every field recognised (extra="forbid")
