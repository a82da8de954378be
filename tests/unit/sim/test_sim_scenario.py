"""Scenario files are refused before anything starts, naming the bad field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from vkprovider.sim.scenario import ScenarioError, load_scenario, parse_duration, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "deploy" / "examples" / "scenarios"


def base() -> dict[str, Any]:
    return {
        "name": "t",
        "clock": {"day": "2h", "real_seconds": 60},
        "fleet": {"nodes": 2, "gpus_per_node": 8},
        "providers": [{"name": "cheap", "price_per_hour": 2.0, "capacity": 4}],
        "workloads": [{"name": "chat", "replicas": 4}],
        "timeline": [
            {"at": "30m", "training": {"name": "a", "gpus": 16, "duration": "1h"}},
            {"at": "45m", "capacity": {"provider": "cheap", "capacity": 0}},
        ],
    }


def refused(data: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "s.yaml")
    return str(info.value)


def test_every_shipped_scenario_is_valid() -> None:
    files = sorted(SCENARIOS.glob("*.yaml"))
    assert any(f.name == "krea-day.yaml" for f in files)
    for path in files:
        scenario = load_scenario(path)
        assert scenario.timeline, path


def test_time_compression_and_durations() -> None:
    s = parse_scenario(base())
    assert s.scale == pytest.approx(7200 / 60)
    assert s.real(3600) == pytest.approx(30.0)
    assert [e.kind for e in s.events()] == ["training", "capacity"]
    assert parse_duration("1h30m") == 5400 and parse_duration("45s") == 45 and parse_duration(0.5) == 1800


def test_unknown_provider_in_an_event_is_named() -> None:
    data = base()
    data["timeline"][1]["capacity"]["provider"] = "cheep"
    message = refused(data)
    assert "timeline.1.capacity.provider: unknown provider 'cheep' (known: cheap)" in message
    assert message.startswith("invalid scenario s.yaml")


def test_negative_duration_is_named() -> None:
    data = base()
    data["timeline"][0]["training"]["duration"] = "-1h"
    assert "timeline.0.training.duration: must not be negative" in refused(data)
    data["timeline"][0]["training"]["duration"] = "0h"
    assert "timeline.0.training.duration: Input should be greater than 0" in refused(data)


@pytest.mark.parametrize("gpus", [0, -8])
def test_gpus_per_node_must_be_positive(gpus: int) -> None:
    data = base()
    data["fleet"]["gpus_per_node"] = gpus
    assert "fleet.gpus_per_node: Input should be greater than 0" in refused(data)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("fleet", "colour"), "red", "fleet.colour: Extra inputs are not permitted"),
        (
            ("providers", 0, "failure_rate"),
            1.5,
            "providers.0.failure_rate: Input should be less than or equal to 1",
        ),
        (("timeline", 0, "at"), "soon", "timeline.0.at: expected a duration"),
        (("timeline", 0, "at"), "3h", "timeline.0.at: 3h is after the end of the day"),
        (("timeline", 0, "training", "gpus"), 24, "timeline.0.training.gpus: 24 exceeds the fleet's 16 GPUs"),
        (("timeline", 0, "training", "gpus_per_pod"), 16, "timeline.0.training.gpus_per_pod: 16 exceeds"),
        (("workloads", 0, "pdb"), {}, "workloads.0.pdb: set exactly one of max_unavailable or min_available"),
        (
            ("workloads", 0, "requests_per_second"),
            0,
            "workloads.0.requests_per_second: Input should be greater than 0",
        ),
        (
            ("workloads", 0, "requests_per_second"),
            101,
            "workloads.0.requests_per_second: Input should be less than",
        ),
        (
            ("workloads", 0, "requests_per_second"),
            "10",
            "workloads.0.requests_per_second: Input should be a valid number, got '10'",
        ),
        (
            ("providers", 0, "round_trip_ms"),
            -1,
            "providers.0.round_trip_ms: Input should be greater than or equal to 0",
        ),
    ],
)
def test_bad_fields_are_named(path: tuple[Any, ...], value: Any, expected: str) -> None:
    data = copy.deepcopy(base())
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert expected in refused(data)


def test_cross_references() -> None:
    data = base()
    data["timeline"] += [
        {"at": "1h", "scale": {"workload": "chatt", "replicas": 2}},
        {"at": "1h", "maintenance": {"node": 2}},
        {"at": "1h", "outage": {"provider": "nope"}},
        {"at": "1h", "training": {"name": "a", "gpus": 4, "duration": "10m"}},
        {"at": "1h"},
    ]
    message = refused(data)
    assert "timeline.6: set exactly one of training, capacity, outage, maintenance, scale" in message
    data["timeline"].pop()
    message = refused(data)
    assert "timeline.2.scale.workload: unknown workload 'chatt'" in message
    assert "timeline.3.maintenance.node: 2 is not a node index (0..1)" in message
    assert "timeline.4.outage.provider: unknown provider 'nope'" in message
    assert "timeline.training: duplicate name 'a'" in message


def test_load_reports_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="not found"):
        load_scenario(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(bad)
    bad.write_text(yaml.safe_dump(["a list"]))
    with pytest.raises(ScenarioError, match="expected a mapping"):
        load_scenario(bad)


def test_make_demo_refuses_a_bad_scenario_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vkprovider.sim import demo

    async def must_not_run(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the simulation started despite a bad scenario")

    monkeypatch.setattr(demo, "run", must_not_run)
    data = base()
    data["fleet"]["gpus_per_node"] = 0
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert demo.main(["up", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"invalid scenario {path}" in err and "fleet.gpus_per_node" in err


def test_gate_overrides_are_checked_with_the_services_schema() -> None:
    from vkprovider.sim.service_config import gate_supported, preflight

    data = base()
    preflight(parse_scenario(data))  # the generated config is valid as it is
    data["runtime"] = {"gate": {"untaint_below_free_gpus": 5, "taint_at_free_gpus": 2}}
    with pytest.raises(ScenarioError) as info:
        preflight(parse_scenario(data), "s.yaml")
    expected = "runtime.gate: " if gate_supported() else "runtime.gate: this build has no gate"
    assert expected in str(info.value)


def test_types_are_strict_a_quoted_number_is_refused() -> None:
    data = base()
    data["workloads"][0]["replicas"] = "8"
    assert "workloads.0.replicas: Input should be a valid integer, got '8'" in refused(data)


def test_a_pdb_floor_above_the_replicas_is_refused() -> None:
    data = base()
    data["workloads"][0]["pdb"] = {"min_available": 5}
    assert "workloads.0.pdb.min_available: 5 exceeds replicas (4)" in refused(data)
    data["workloads"][0]["pdb"] = {"min_available": 4}
    parse_scenario(data)


def test_events_that_outlast_the_day_are_refused() -> None:
    data = base()
    data["timeline"].append({"at": "1h", "maintenance": {"node": 0, "duration": "30h"}})
    message = refused(data)
    assert (
        "timeline.2.maintenance.duration: 30h from 01:00 ends at 31:00, after the end of the day (2h)"
        in message
    )
    data = base()
    data["timeline"][0]["training"]["duration"] = "2h"
    assert "timeline.0.training.duration: 2h from 00:30 ends at 02:30" in refused(data)


def test_overlapping_events_on_one_subject_are_refused() -> None:
    data = base()
    data["timeline"] += [
        {"at": "10m", "outage": {"provider": "cheap", "duration": "30m"}},
        {"at": "20m", "outage": {"provider": "cheap", "duration": "10m"}},
        {"at": "10m", "maintenance": {"node": 1}},  # until the end of the day
        {"at": "1h", "maintenance": {"node": 1, "duration": "10m"}},
        {"at": "1h", "maintenance": {"node": 0, "duration": "10m"}},  # another node: fine
        {"at": "45m", "capacity": {"provider": "cheap", "capacity": 3}},  # same instant as timeline.1
    ]
    message = refused(data)
    assert "timeline.3.outage: overlaps timeline.2 (outage of cheap at 00:10)" in message
    assert "timeline.5.maintenance: overlaps timeline.4 (maintenance of 1 at 00:10)" in message
    assert "timeline.7.capacity: overlaps timeline.1" in message
    assert "timeline.6" not in message
    back_to_back = base()
    back_to_back["timeline"] += [
        {"at": "10m", "outage": {"provider": "cheap", "duration": "30m"}},
        {"at": "40m", "outage": {"provider": "cheap", "duration": "10m"}},
    ]
    parse_scenario(back_to_back)


def test_the_days_total_request_rate_is_bounded() -> None:
    data = base()
    data["workloads"] = [{"name": f"w{i}", "replicas": 1, "requests_per_second": 100} for i in range(3)]
    assert "workloads.requests_per_second: 300 requests/s in total exceed 200" in refused(data)
