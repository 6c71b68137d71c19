"""The report as canvases take it: title, images, lists in quotes, size."""

from __future__ import annotations

from bot.slack.render import canvas_text


def test_the_title_is_the_first_heading_without_its_markup() -> None:
    assert canvas_text.title("intro\n\n## **Growth**, 2000 to 2020 ##\n# Later") == (
        "Growth, 2000 to 2020"
    )
    assert canvas_text.title("no heading at all") == canvas_text.DEFAULT_TITLE


def test_images_become_a_line_and_lists_in_quotes_lose_their_markers() -> None:
    report = "# R\n\n![Growth by country](out/growth.png)\n\n> - one\n> 2. two\n\n- kept\n"
    document = canvas_text.markdown(report)
    assert "![" not in document and "_Chart: Growth by country (in the thread)_" in document
    assert "> one\n> two" in document
    assert "- kept" in document


def test_a_report_too_big_for_a_canvas_has_none() -> None:
    assert canvas_text.markdown("x" * (canvas_text.CANVAS_MAX + 1)) is None
    assert canvas_text.markdown("") is None


def test_the_link_is_a_rich_text_canvas_element() -> None:
    block = canvas_text.link("F0CANVAS1")
    assert block["type"] == "rich_text"
    assert {"type": "canvas", "file_id": "F0CANVAS1"} in block["elements"][0]["elements"]


def test_images_by_reference_or_with_brackets_in_their_alt_are_left_out_too() -> None:
    report = "![a [b] c](https://x.example/1.png)\n\n![ref][r]\n\n[r]: https://x.example/2.png\n"
    document = canvas_text.markdown(report)
    assert document is not None and "![" not in document
    assert "_Chart: a [b] c (in the thread)_" in document
