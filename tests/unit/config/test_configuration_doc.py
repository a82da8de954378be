"""docs/configuration.md is generated from the settings models and cannot drift from them."""

from __future__ import annotations

from pathlib import Path

from vkprovider.config import Settings
from vkprovider.config_doc import DOC, keys, main, missing_meanings, render
from vkprovider.config_doc.meanings import MEANINGS

REPO = Path(__file__).resolve().parents[3]


def test_the_checked_in_reference_is_current() -> None:
    assert (REPO / DOC).read_text() == render(), "docs/configuration.md is out of date: run `make docs`"


def test_every_key_has_a_meaning() -> None:
    assert missing_meanings() == [], "give these keys a Field(description=...) or a config_doc.meanings entry"


def test_no_meaning_is_left_for_a_key_that_is_gone() -> None:
    known = {k.path for k in keys()} | {f"{k.model.__name__}.{k.name}" for k in keys()}
    assert set(MEANINGS) - known == set()


def test_every_top_level_and_nested_key_is_listed() -> None:
    text = render()
    for name in Settings.model_fields:
        assert f"| `{name}` |" in text
    for path in ("kubelet.csr", "kubelet.cert_dir", "kubelet.client_ca_file", "providers[].grpc.address"):
        assert f"| `{path}` |" in text


def test_check_mode_fails_on_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(render().replace("vk-external", "vk-old"))
    assert main(["--check", str(stale)]) == 1
    stale.write_text(render())
    assert main(["--check", str(stale)]) == 0
