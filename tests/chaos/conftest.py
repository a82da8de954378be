"""Chaos runs: the seed (``VKPROVIDER_CHAOS_SEED``, printed), one run per module, the invariant
summary and fault table printed at the end of the pytest session."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from tests.chaos import report


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: a fault-injection run against the real control plane")


def chaos_seed() -> int:
    raw = os.environ.get("VKPROVIDER_CHAOS_SEED")
    return int(raw) if raw else random.SystemRandom().randrange(1, 1_000_000)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for text in report.PRINTED:
        terminalreporter.write_sep("=", "chaos run")
        terminalreporter.write_line(text)
