"""``vkprovider explain`` against real fakecloud servers on 127.0.0.1 (the demo's example catalogs)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from vkprovider_fakecloud.config import load_config
from vkprovider_fakecloud.server import running_fakecloud

from vkprovider.cli import main
from vkprovider.config import load_settings
from vkprovider.http.explain import pod_request_context
from vkprovider.placement import Placer
from vkprovider.plugins.registry import build_providers

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"

POD = {
    "kind": "Pod",
    "metadata": {"name": "llm", "namespace": "serving"},
    "spec": {
        "containers": [{"name": "s", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    },
}


async def test_explain_against_fakecloud_matches_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cheap_cfg = load_config(EXAMPLES / "fakecloud-cheap.yaml")
    premium_cfg = load_config(EXAMPLES / "fakecloud-premium.yaml")
    async with running_fakecloud(cheap_cfg) as cheap, running_fakecloud(premium_cfg) as premium:
        config: dict[str, Any] = {
            "providers": [
                {"name": "fakecloud-cheap", "adapter": "fakecloud", "settings": {"url": cheap.url}},
                {"name": "fakecloud-premium", "adapter": "fakecloud", "settings": {"url": premium.url}},
            ],
            "placement": {"providers": {"fakecloud-premium": {"discount": 0.1}}},
        }
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        (tmp_path / "pod.yaml").write_text(yaml.safe_dump(POD))
        argv = ["explain", "-f", str(tmp_path / "pod.yaml"), "--config", str(tmp_path / "config.yaml")]
        # The CLI runs its own event loop; the servers keep serving on this one.
        code = await asyncio.wait_for(asyncio.to_thread(main, argv), timeout=60)
        out = capsys.readouterr().out

        settings = load_settings(tmp_path / "config.yaml")
        providers = build_providers(settings.providers)
        try:
            placer = Placer(providers, settings.placement)
            await placer.refresh()
            request, ctx = await pod_request_context(POD, settings.node.name)
            best = placer.rank(request, ctx).candidates[0]
        finally:
            await asyncio.gather(*(p.close() for p in providers.values()))
    assert code == 0, out
    rows = [line.split() for line in out.splitlines() if re.match(r"^\*\d+\s", line)]
    assert len(rows) == 1, out
    assert (rows[0][1], rows[0][2]) == (best.provider, best.offer.offer_id)
    assert best.provider == "fakecloud-cheap" and best.offer.gpu_type == "H100-SXM-80GB"
