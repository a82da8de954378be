"""The event-loop choice: what each setting runs on, and a bad value named at load time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from vkprovider import eventloop
from vkprovider.config import load_settings
from vkprovider.errors import ConfigError

pytestmark = pytest.mark.usefixtures("restored_gc")


async def _loop_name() -> str:
    await asyncio.sleep(0)
    return eventloop.running_loop_name()


def test_asyncio_runs_the_standard_loop() -> None:
    assert eventloop.loop_factory("asyncio") is None
    assert eventloop.run(_loop_name(), "asyncio") == "asyncio"


@pytest.mark.skipif(not eventloop.uvloop_available(), reason="uvloop not installed")
def test_auto_and_uvloop_run_uvloop_where_installed() -> None:
    assert eventloop.run(_loop_name(), "auto") == "uvloop"
    assert eventloop.run(_loop_name(), "uvloop") == "uvloop"


def test_auto_falls_back_and_uvloop_refuses_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eventloop, "uvloop_available", lambda: False)
    assert eventloop.run(_loop_name(), "auto") == "asyncio"
    monkeypatch.setitem(__import__("sys").modules, "uvloop", None)  # import fails as if absent
    with pytest.raises(RuntimeError, match="uvloop is not installed"):
        eventloop.loop_factory("uvloop")


def test_run_returns_the_result_and_propagates_errors() -> None:
    async def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        eventloop.run(fail(), "auto")


def test_an_unknown_loop_is_a_config_error_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("event_loop: tokio\n")
    with pytest.raises(ConfigError, match="event_loop"):
        load_settings(config)
