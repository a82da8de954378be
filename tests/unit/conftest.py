"""Fixtures shared by unit tests in several packages."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """Undo what ``eventloop.run`` / ``gcpolicy`` does to the collector (a frozen heap, a raised
    young threshold): the settings are for a long-running command, not the test process."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
