"""Model-written Markdown made safe to show where images would be fetched: images as words,
raw HTML and TeX as text, and hostile text costing little more than plain text."""

from __future__ import annotations

import time

from bot.results.markdown import without_html, without_images, without_math


def safe(text: str) -> str:
    return without_math(without_html(without_images(text, lambda alt: f"[{alt}]")))


def test_images_become_their_words_and_any_other_image_mark_is_escaped() -> None:
    assert safe("see ![the growth](https://x.example/g.png) here") == "see [the growth] here"
    assert safe("![r][ref]") == "!\\[r][ref]"
    assert safe("![a [b] c](<https://x.example/a b.png> 't')") == "[a [b] c]"


def test_tags_and_math_are_text() -> None:
    assert safe("<img src=x> a < b, c <= d") == "&lt;img src=x> a < b, c <= d"
    assert safe("</div><!-- c --><?php") == "&lt;/div>&lt;!-- c -->&lt;?php"
    assert safe("costs $5 or \\$6") == "costs \\$5 or \\$6"
    assert safe("\\begin{x} \\\\(y\\\\)") == "\\ begin{x} \\\\ (y\\\\)"  # no opener, no math


def seconds(text: str) -> float:
    started = time.perf_counter()
    safe(text)
    return time.perf_counter() - started


def test_many_unclosed_images_cost_little_more_than_an_ordinary_answer() -> None:
    size = 200_000
    line = "Revenue grew **12%** (see [the table](https://x.example/t)); ![g](out/g.png) <b>\n"
    ordinary = min(seconds((line * (size // len(line) + 1))[:size]) for _ in range(3))
    for hostile in ("![a](" * (size // 5), "![[a]" * (size // 5), "![" + "a" * size):
        assert seconds(hostile) <= 50 * ordinary, hostile[:10]  # unbounded, it was 1000x+
