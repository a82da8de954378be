"""docs/plugin-api.md is generated from the plugin API and must match it (``make docs``)."""

from __future__ import annotations

from pathlib import Path

from vkprovider.contract import apidoc
from vkprovider.plugins import api

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugin-api.md"


def test_the_reference_regenerates_identically() -> None:
    assert DOC.read_text() == apidoc.render(), "docs/plugin-api.md is out of date: run `make docs`"


def test_every_model_field_has_a_meaning() -> None:
    assert apidoc.missing_meanings() == [], (
        "give these fields a Field(description=...) or an apidoc_meanings entry"
    )


def test_the_reference_covers_every_exported_model_protocol_and_label() -> None:
    text = DOC.read_text()
    for model in apidoc.exported_models():
        assert f"### `{model.__name__}`" in text
        for field in model.model_fields:
            assert f"| `{field}` |" in text
    for proto in apidoc.PROTOCOLS:
        assert f"### `{proto.__name__}`" in text
    for label in apidoc.LABELS:
        assert f"`{getattr(api, label)}`" in text
    assert "`request.tags()`, not `request.labels`" in text


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "plugin-api.md"
    stale.write_text(apidoc.render().replace("Plugin API reference", "Old reference"))
    assert apidoc.main(["--check", str(stale)]) == 1
    assert apidoc.main([str(stale)]) == 0 and apidoc.main(["--check", str(stale)]) == 0
