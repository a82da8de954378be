"""The gate's state gauges belong to a term: none before it, its values during, none after."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from vkprovider.gate import metrics
from vkprovider.gate.metrics import TermGauges


def scrape(gauges: TermGauges) -> str:
    registry = CollectorRegistry()
    registry.register(gauges)
    return generate_latest(registry).decode()


def test_a_standby_reports_no_gate_state_and_a_term_reports_its_own() -> None:
    gauges = TermGauges()
    gauges.set("signal_up", 0, node="vk")  # no term: ignored, never served
    assert "vkprovider_gate" not in scrape(gauges)
    gauges.start("vk")
    assert "vkprovider_gate" not in scrape(gauges)  # nothing read yet: nothing claimed
    gauges.set("signal_up", 1, node="vk")
    gauges.set("tainted", 1, node="vk")
    text = scrape(gauges)
    assert (
        'vkprovider_gate_signal_up{node="vk"} 1.0' in text
        and 'vkprovider_gate_tainted{node="vk"} 1.0' in text
    )
    gauges.stop("vk")
    assert "vkprovider_gate" not in scrape(gauges)  # a former leader keeps nothing
    gauges.start("vk")
    assert "vkprovider_gate_tainted" not in scrape(gauges)  # a new term starts empty


def test_each_nodes_gate_term_has_its_own_gauges() -> None:
    """Two virtual nodes' gates in one process: one term ending leaves the other's series."""
    gauges = TermGauges()
    for node, free in (("vk-a", 3), ("vk-b", 0)):
        gauges.start(node)
        gauges.set("free_gpus", free, node=node)
    text = scrape(gauges)
    assert 'vkprovider_gate_free_gpus{node="vk-a"} 3.0' in text
    assert 'vkprovider_gate_free_gpus{node="vk-b"} 0.0' in text
    gauges.stop("vk-a")  # vk-a's leadership moved to another replica
    text = scrape(gauges)
    assert 'node="vk-a"' not in text and 'vkprovider_gate_free_gpus{node="vk-b"} 0.0' in text


def test_an_unknown_gauge_name_is_a_bug_not_a_new_series() -> None:
    with pytest.raises(KeyError):
        TermGauges().set("free_gpu", 3, node="vk")


def test_the_process_registry_serves_the_state_gauges() -> None:
    metrics.STATE.start("vk")
    try:
        metrics.STATE.set("free_gpus", 5, node="vk")
        assert REGISTRY.get_sample_value("vkprovider_gate_free_gpus", {"node": "vk"}) == 5
    finally:
        metrics.STATE.stop("vk")
    assert REGISTRY.get_sample_value("vkprovider_gate_free_gpus", {"node": "vk"}) is None
