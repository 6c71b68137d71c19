"""docs/configuration.md is made from the settings: it names every setting, and it is the
file the generator writes today."""

from __future__ import annotations

from bot.settings import Settings
from bot.settings.doc import markdown
from tests.support import CHECKOUT

DOC = CHECKOUT / "docs" / "configuration.md"


def test_the_committed_page_is_what_the_settings_make() -> None:
    assert DOC.read_text() == markdown(), (
        "docs/configuration.md is stale: run `python -m bot.settings.doc > docs/configuration.md`"
    )


def test_every_setting_is_on_the_page_with_a_description() -> None:
    text = DOC.read_text()
    for name, field in Settings.model_fields.items():
        assert f"`{name.upper()}`" in text, name
        assert field.description, f"{name} has no description"
