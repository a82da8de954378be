"""The product inside the demo, without a cluster: the scenario's load curve (validated, played
against a real fakecloud), the service config with the kubelet API on the namespace address, and
the Descheduler's eviction caps no longer a scenario knob (the shipped policy decides)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from vkprovider_fakecloud.config import parse_config
from vkprovider_fakecloud.server import running_fakecloud

from vkprovider.config import Settings
from vkprovider.sim import manifests
from vkprovider.sim.scenario import ScenarioError, load_scenario, parse_scenario
from vkprovider.sim.service_config import KubeletEndpoint, serve_config
from vkprovider.sim.world import World

SCENARIOS = Path(__file__).resolve().parents[3] / "deploy" / "examples" / "scenarios"


def base(**extra: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "clock": {"day": "10h", "real_seconds": 100},
        "fleet": {"nodes": 1, "gpus_per_node": 4},
        "providers": [{"name": "cheap", "price_per_hour": 2.0, "capacity": 4}],
        "workloads": [{"name": "chat", "replicas": 2, "hpa": {"min_replicas": 2, "max_replicas": 4}}],
        **extra,
    }


def refused(data: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "s.yaml")
    return str(info.value)


@pytest.mark.parametrize(
    ("load", "expected"),
    [
        ([{"at": "2h", "cpu_cores": 1}, {"at": "1h", "cpu_cores": 0.5}], "load: Value error, points must be"),
        ([{"at": "1h", "cpu_cores": 1}, {"at": "1h", "cpu_cores": 2}], "points must be in increasing order"),
        ([{"at": "11h", "cpu_cores": 1}], "load.0.at: 11h is after the end of the day"),
        ([{"at": "1h", "cpu_cores": -1}], "load.0.cpu_cores: Input should be greater than or equal to 0"),
        ([{"at": "1h", "cpu_cores": "lots"}], "load.0.cpu_cores: Input should be a valid number"),
        ([{"at": "1h", "cpu": 1}], "load.0.cpu: Extra inputs are not permitted"),
        ({"at": "1h", "cpu_cores": 1}, "load: Input should be a valid list"),
    ],
)
def test_a_bad_load_curve_is_refused_naming_the_field(load: Any, expected: str) -> None:
    assert expected.replace("Value error, ", "") in refused(base(load=load))


def test_the_eviction_caps_are_the_shipped_policys_not_a_scenario_knob() -> None:
    message = refused(base(runtime={"descheduler": {"per_node": 5}}))
    assert "runtime.descheduler: Extra inputs are not permitted" in message


def test_every_shipped_scenario_has_a_load_curve() -> None:
    for path in sorted(SCENARIOS.glob("*.yaml")):
        assert load_scenario(path).load, f"{path.name} has no load: kubectl top would show a constant"


async def test_the_load_curve_plays_as_steps_that_set_every_clouds_load() -> None:
    s = parse_scenario(base(load=[{"at": "0h", "cpu_cores": 0.25}, {"at": "5h", "cpu_cores": 1.5}]))
    cloud = parse_config(manifests.fakecloud_config(s, s.providers[0]))
    async with running_fakecloud(cloud) as server:
        world = World(s, kube=None, clouds={"cheap": server.url}, real_jobs=True)  # type: ignore[arg-type]
        try:
            steps = [step for step in world.steps() if step.label.startswith("load")]
            assert [(step.at, step.label) for step in steps] == [
                (0.0, "load 0.25 cores"),
                (50.0, "load 1.5 cores"),
            ]
            async with httpx.AsyncClient() as client:
                for step, cores in zip(steps, (0.25, 1.5), strict=True):
                    action = await step.run()
                    assert (action.kind, action.value) == ("load", cores)
                    assert (await client.get(f"{server.url}/admin/load")).json()["cpu_cores"] == cores
        finally:
            await world.close()


def test_the_hpa_scales_on_wall_time_windows() -> None:
    s = parse_scenario(base())
    hpa = manifests.hpa(s, s.workloads[0])
    assert hpa is not None
    assert (
        hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"]
        == manifests.HPA_SCALE_DOWN_WINDOW_SECONDS
    )


def test_the_kubelet_api_is_served_and_advertised_on_the_namespace_address(tmp_path: Path) -> None:
    s = parse_scenario(base())
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_text("x")
    kubelet = KubeletEndpoint(
        "198.18.0.1", 40123, tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt"
    )
    settings = Settings(
        **serve_config(s, {"cheap": "http://127.0.0.1:1"}, tmp_path / "kc", 10255, kubelet=kubelet)
    )
    assert (settings.node.internal_ip, settings.node.kubelet_port) == ("198.18.0.1", 40123)
    assert settings.kubelet.enabled and settings.kubelet.client_ca_file == str(tmp_path / "ca.crt")
    without = Settings(**serve_config(s, {"cheap": "http://127.0.0.1:1"}, tmp_path / "kc", 10255))
    assert without.node.internal_ip == "127.0.0.1" and not without.kubelet.enabled
