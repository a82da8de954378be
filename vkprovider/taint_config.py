"""A virtual node's own taints from config (each node section's ``taints:``).

With several nodes (``nodes:``) a pool or region can be kept for the pods that ask for it: the
node's taints are written by its node agent with the ones it owns (``node.manifest``), and
removed once they leave the config (the agent notes the keys it set in an annotation, so it
never touches a taint it did not set). Keys another writer owns on the node are refused: the
agent's own, the capacity gate's (``Settings`` checks its configured key) and the node lifecycle
controller's ``node.kubernetes.io/*``, which either side would otherwise keep undoing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: the node agent's own taints (``node.manifest.OWNED_TAINT_KEYS``; a unit test keeps them equal)
AGENT_TAINT_KEYS = ("virtual-kubelet.io/provider", "vkprovider.io/unavailable")
#: the node lifecycle controller's (not-ready, unreachable, ...), and Kubernetes' reserved prefix
SYSTEM_TAINT_PREFIX = "node.kubernetes.io/"
#: the annotation where the agent keeps the config taint keys it set (comma-separated)
CONFIG_TAINTS_ANNOTATION = "vkprovider.io/config-taints"

# A qualified name, as the API validates taint keys: an optional DNS-subdomain prefix and "/",
# then a name of at most 63 characters, alphanumeric at both ends.
_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"


class NodeTaint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(pattern=_KEY, max_length=317, description="a qualified name, e.g. pool.example.com/gpu")
    value: str = Field(default="", pattern=_VALUE, description="at most 63 characters; may be empty")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="NoSchedule", description="NoExecute also evicts running pods that do not tolerate it"
    )

    @field_validator("key")
    @classmethod
    def _not_anothers(cls, key: str) -> str:
        if key in AGENT_TAINT_KEYS:
            raise ValueError(f"{key!r} is the node agent's own taint (it sets and removes it itself)")
        if key.startswith(SYSTEM_TAINT_PREFIX):
            raise ValueError(f"{key!r}: {SYSTEM_TAINT_PREFIX}* taints belong to Kubernetes' node lifecycle")
        return key

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


def duplicate_taints(taints: list[NodeTaint]) -> list[tuple[str, str]]:
    """(path, message) for each taint repeating an earlier (key, effect), the API's unique pair."""
    seen: set[tuple[str, str]] = set()
    found: list[tuple[str, str]] = []
    for i, taint in enumerate(taints):
        pair = (taint.key, taint.effect)
        if pair in seen:
            found.append((f"taints.{i}", f"duplicate taint {taint.key}:{taint.effect}"))
        seen.add(pair)
    return found
