"""Prometheus metrics of the gate, on the admin port's ``/metrics`` with the rest."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

TAINTED = Gauge(
    "vkprovider_gate_tainted", "1 while the gate's taint is on the virtual node (dry-run: would be)"
)
FREE_GPUS = Gauge("vkprovider_gate_free_gpus", "Free local GPUs, as the signal last read them")
SIGNAL_UP = Gauge("vkprovider_gate_signal_up", "1 when the last signal reading succeeded")
PENDING_BLOCKED = Gauge(
    "vkprovider_gate_pending_blocked_pods", "Unschedulable pods that only the gate's taint keeps out"
)
FLIPS = Counter(
    "vkprovider_gate_flips_total", "Taint changes written (or, in dry-run, decided)", ["direction"]
)
SIGNAL_ERRORS = Counter("vkprovider_gate_signal_errors_total", "Failed signal readings by kind", ["kind"])
FAIL_OPEN = Counter(
    "vkprovider_gate_signal_timeouts_total", "Taint removed because the signal was unavailable too long"
)
