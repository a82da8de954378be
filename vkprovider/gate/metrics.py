"""Prometheus metrics of the gate, on the admin port's ``/metrics`` with the rest.

The state gauges (taint, free GPUs, signal up, blocked pods) belong to a leadership term: they
are served only while a gate term runs in this process, so a standby or a former leader reports
none instead of its last values (a standby's ``signal_up 0`` would otherwise read as an outage
and its stale ``tainted`` as the node's state). The counters are the process's own.

Every series carries a ``node`` label: ``serve`` runs one gate per virtual node (``nodes:``),
each with its own term, so one node's term ending must not take another's gauges with it.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily, Metric

_STATE_HELP = {
    "tainted": "1 while the gate's taint is on the virtual node (dry-run: would be)",
    "free_gpus": "Free local GPUs, as the signal last read them",
    "signal_up": "1 when the last signal reading succeeded",
    "pending_blocked_pods": "Unschedulable pods that only the gate's taint keeps out",
    "owner_conflict": "1 while another gate's fresh heartbeat owns the node's taint (this one writes nothing)",
    "paused": "1 while the node carries vkprovider.io/gate-paused (the operator owns the taint)",
}


class TermGauges:
    """The gate's state gauges, computed at scrape time from each node's running term's last
    values (node name -> gauge -> value; a node without a running term has no entry)."""

    def __init__(self) -> None:
        self._values: dict[str, dict[str, float]] = {}

    def start(self, node: str) -> None:
        """A term of ``node``'s gate begins: nothing is reported until it has read and decided."""
        self._values[node] = {}

    def stop(self, node: str) -> None:
        """The term ended: its values go with it."""
        self._values.pop(node, None)

    def set(self, name: str, value: float, *, node: str) -> None:
        if name not in _STATE_HELP:
            raise KeyError(name)
        values = self._values.get(node)
        if values is not None:
            values[name] = value

    def collect(self) -> Iterable[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        for node, values in sorted(self._values.items()):
            for name, value in sorted(values.items()):
                if name not in families:
                    families[name] = GaugeMetricFamily(
                        f"vkprovider_gate_{name}", _STATE_HELP[name], labels=["node"]
                    )
                families[name].add_metric([node], value)
        yield from (families[name] for name in sorted(families))


STATE = TermGauges()
REGISTRY.register(STATE)

FLIPS = Counter(
    "vkprovider_gate_flips_total", "Taint changes written (or, in dry-run, decided)", ["node", "direction"]
)
SIGNAL_ERRORS = Counter(
    "vkprovider_gate_signal_errors_total", "Failed signal readings by kind", ["node", "kind"]
)
FAIL_OPEN = Counter(
    "vkprovider_gate_signal_timeouts_total",
    "Taint removed because the signal was unavailable too long",
    ["node"],
)
