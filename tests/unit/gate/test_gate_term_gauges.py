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
    gauges.set("signal_up", 0)  # no term: ignored, never served
    assert "vkprovider_gate" not in scrape(gauges)
    gauges.start()
    assert "vkprovider_gate" not in scrape(gauges)  # nothing read yet: nothing claimed
    gauges.set("signal_up", 1)
    gauges.set("tainted", 1)
    text = scrape(gauges)
    assert "vkprovider_gate_signal_up 1.0" in text and "vkprovider_gate_tainted 1.0" in text
    gauges.stop()
    assert "vkprovider_gate" not in scrape(gauges)  # a former leader keeps nothing
    gauges.start()
    assert "vkprovider_gate_tainted" not in scrape(gauges)  # a new term starts empty


def test_an_unknown_gauge_name_is_a_bug_not_a_new_series() -> None:
    with pytest.raises(KeyError):
        TermGauges().set("free_gpu", 3)


def test_the_process_registry_serves_the_state_gauges() -> None:
    metrics.STATE.start()
    try:
        metrics.STATE.set("free_gpus", 5)
        assert REGISTRY.get_sample_value("vkprovider_gate_free_gpus") == 5
    finally:
        metrics.STATE.stop()
    assert REGISTRY.get_sample_value("vkprovider_gate_free_gpus") is None
