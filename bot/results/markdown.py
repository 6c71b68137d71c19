"""Model-written Markdown made safe to show somewhere that would fetch what it names: its
images become a line of text, and (for a reader that renders them, as Jupyter does) raw
HTML and TeX become plain text. Pure: no I/O.

Rather than parse the Markdown as one reader would (and differ from another), the marks
that start an image, a tag or math are escaped wherever they are: a few characters in a
code span show a backslash or an entity, and nothing is fetched."""

from __future__ import annotations

import re
from collections.abc import Callable

# An inline image; its alt text may hold one level of brackets, as CommonMark allows. The
# lengths are bounded and the repeats possessive, so text of many unclosed "![" costs
# little (a longer image is still defused: its "![" is escaped).
IMAGE = re.compile(
    r"!\[((?:[^\[\]\n]|\[[^\[\]\n]{0,100}+\]){0,100}+)\]\((?:<[^>\n]{0,300}+>)?[^)\n]{0,300}+\)"
)
# What starts raw HTML in CommonMark: an open or closing tag, a comment, a declaration
# or CDATA, a processing instruction. An autolink (<https://…>) becomes text too.
HTML_START = re.compile(r"<(?=[A-Za-z/!?])")
DOLLAR = re.compile(r"(?<!\\)\$")
# What else starts math in Jupyter: an environment, or \\( and \\[ (\( and \[ once read).
TEX_START = re.compile(r"\\(?=begin\{|end\{)|(?<=\\\\)(?=[(\[])")


def without_images(text: str, say: Callable[[str], str]) -> str:
    """`text` with each inline image as `say(alt text)`, and any other image (by reference,
    or of a form the pattern misses) left as its words: every "![" is escaped."""
    text = IMAGE.sub(lambda m: say(m.group(1).strip()), text)
    return text.replace("![", "!\\[")


def without_html(text: str) -> str:
    """`text` with raw HTML shown as written rather than rendered: each "<" that would
    start a tag is an entity."""
    return HTML_START.sub("&lt;", text)


def without_math(text: str) -> str:
    """`text` with its dollar signs as dollars (Jupyter reads "$…$" as TeX, whose styles
    can name remote resources; an answer's dollars are money), and no other start of math
    (a space after the backslash)."""
    return TEX_START.sub(lambda m: m.group() + " ", DOLLAR.sub(r"\\$", text))
