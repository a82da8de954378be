"""Targeted fault injection: "the next POST /v1/deployments fails with 409", "every GET
/v1/deployments/{uid} waits 60 s".

Chaos knobs are probabilistic and global; rules are exact and scoped to one route, which is what
contract tests need (fail the next call of one operation, hold one operation to test deadlines).
A path is a template: ``{name}`` matches one segment, everything else matches literally.
"""

from __future__ import annotations

import itertools
import re
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field

_DEFAULT_CODES = {
    400: "InvalidRequest",
    402: "QuotaOrBilling",
    404: "NotFound",
    409: "NoCapacity",
    429: "RateLimited",
}
_ids = itertools.count(1)


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = ""
    method: str = Field(default="*", description="HTTP method or * for any")
    path: str = Field(pattern=r"^/", description="path template, e.g. /v1/deployments/{uid}")
    delay_seconds: float = Field(default=0.0, ge=0)
    status: int | None = Field(default=None, ge=400, le=599, description="respond with this error")
    code: str = ""
    message: str = "injected by fakecloud rule"
    retry_after: float | None = Field(default=None, ge=0)
    times: int | None = Field(
        default=None, ge=1, description="matches before the rule expires; None = forever"
    )
    hits: int = 0

    @cached_property
    def regex(self) -> re.Pattern[str]:
        parts = re.split(r"(\{[^/{}]+\})", self.path)
        body = "".join("[^/]+" if p.startswith("{") and p.endswith("}") else re.escape(p) for p in parts)
        return re.compile(f"^{body}$")

    def matches(self, method: str, path: str) -> bool:
        return self.method in ("*", method.upper()) and bool(self.regex.match(path))

    @property
    def error_code(self) -> str:
        if self.code:
            return self.code
        return _DEFAULT_CODES.get(self.status or 0, "InternalError")


class Rules:
    def __init__(self) -> None:
        self.active: list[Rule] = []

    def add(self, rule: Rule) -> Rule:
        rule = rule.model_copy(
            update={"id": rule.id or f"r{next(_ids)}", "hits": 0, "method": rule.method.upper()}
        )
        self.active.append(rule)
        return rule

    def remove(self, rule_id: str) -> Rule | None:
        found = next((r for r in self.active if r.id == rule_id), None)
        if found is not None:
            self.active.remove(found)
        return found

    def clear(self) -> None:
        self.active.clear()

    def take(self, method: str, path: str) -> Rule | None:
        """The first matching rule, counted (and expired once its ``times`` are used up)."""
        for rule in self.active:
            if rule.matches(method, path):
                rule.hits += 1
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times == 0:
                        self.active.remove(rule)
                return rule
        return None
