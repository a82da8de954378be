"""The capacity gate: free local GPUs (kube API or Prometheus) → one taint on the virtual node,
with hysteresis, so the descheduler brings pods home gradually (DESIGN §8, docs/gate.md).

The loop lives in ``vkprovider.gate.loop``; this package's root stays light because
``vkprovider.config`` imports the config model from here."""

from vkprovider.gate.config import GateConfig

__all__ = ["GateConfig"]
