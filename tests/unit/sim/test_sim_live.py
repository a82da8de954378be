"""The live view shows time, replicas local vs external, gate, spend and events, on a terminal
as a panel and elsewhere as plain lines."""

from __future__ import annotations

import io

from rich.console import Console

from vkprovider.sim.live import LiveView
from vkprovider.sim.record import Sample, TrainingSample, WorkloadSample
from vkprovider.sim.scenario import parse_scenario
from vkprovider.sim.timeline import Change, sim_clock

S = parse_scenario(
    {
        "name": "live",
        "clock": {"day": "24h", "real_seconds": 240},
        "fleet": {"nodes": 1, "gpus_per_node": 8},
        "providers": [{"name": "cheap", "price_per_hour": 2.0, "capacity": 4}],
        "workloads": [{"name": "chat", "replicas": 4}],
        "timeline": [{"at": "1h", "training": {"name": "train", "gpus": 8, "duration": "2h"}}],
    }
)


def sample(t: float) -> Sample:
    return Sample(
        t=t,
        workloads={"chat": WorkloadSample(desired=4, local=1, external=3, ready_local=1, ready_external=2)},
        training={"train": TrainingSample(running=1, gpus=8)},
        local_gpus=8,
        local_gpus_used=9,
        gate_tainted=False,
        external_by_provider={"cheap": 3},
        spend_rate=6.0,
    )


def test_panel_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=140, color_system=None)
    with LiveView(S, console=console) as view:
        view.start_day(1000.0)
        view.event(Change(1010.0, "training-start", "train", "8 GPUs in 1 pods"))
        view.update(sample(1060.0), spent=12.5)  # 60 real s = 06:00 of the day
    text = out.getvalue()
    assert "06:00 of 24h" in text
    assert "chat" in text and "bursting allowed" in text
    assert "spend rate 6.00/h" in text and "spent $12.50" in text
    assert "01:00  training-start train" in text
    assert "train: 1 running / 0 pending (8 GPUs)" in text


def test_plain_lines_elsewhere() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with LiveView(S, console=console) as view:
        view.gate = False
        view.start_day(1000.0)
        view.event(Change(1010.0, "scale", "chat", "5 replicas"))
        view.update(sample(1060.0), spent=1.0)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("01:00  scale")
    assert "replicas local 1 external 3" in lines[1] and "gate: not running" in lines[1]


def test_plain_lines_print_event_text_verbatim_never_as_markup() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with LiveView(S, console=console) as view:
        view.start_day(1000.0)
        view.event(Change(1010.0, "error", "cheap", "HTTP 503 [/admin/offers] [red]busy[/red]"))
        view.say("[/] not markup")
    text = out.getvalue()
    assert "HTTP 503 [/admin/offers] [red]busy[/red]" in text
    assert "[/] not markup" in text


def test_the_clock_past_midnight_says_plus_one_day() -> None:
    # 240 real s is the 24 h day: 10 real s = 1 simulated hour
    assert sim_clock(S, 1000.0, 1000.0 + 250.0) == "+1d 01:00"
    assert sim_clock(S, 1000.0, 1000.0 + 235.0) == "23:30"
    assert sim_clock(S, 1000.0, 1000.0 - 5.0) == "-00:30"
