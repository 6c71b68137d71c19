"""Text from the model, the sandbox or a user's file made safe to print on a terminal.

A terminal acts on control sequences in what it prints: OSC 52 sets the clipboard, CSI
codes erase lines and move the cursor (a faked "all passed"), OSC 0 retitles the window,
DCS talks to the terminal itself. Model-written code controls all of that output, so every
control sequence is removed, in its 7-bit (ESC …) and 8-bit (C1) forms, and so is any other
control character. Newlines and tabs stay; a lone carriage return becomes a newline, so a
line cannot be overwritten in place (what it held is shown, not hidden).
"""

from __future__ import annotations

import re

ESC = "\x1b"
ST = rf"(?:{ESC}\\|\x9c)"  # string terminator: ESC \ or C1 ST
# OSC (ESC ] / C1 9D) ends at BEL or ST; DCS, SOS, PM and APC (ESC P X ^ _ / C1 90 98 9E
# 9F) at ST. One left open runs to the end of the text, and is removed to there.
STRINGS = (
    rf"(?:{ESC}\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|{ST}|$)"
    rf"|(?:{ESC}[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:{ST}|$)"
)
CSI = rf"(?:{ESC}\[|\x9b)[0-?]*[ -/]*[@-~]?"  # parameters, intermediates, final byte
OTHER_ESC = rf"{ESC}[ -/]*[0-~]?"  # ESC c (reset), ESC 7, ESC ( 0 (charset), …
SEQUENCES = re.compile(f"{STRINGS}|{CSI}|{OTHER_ESC}")
CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # all but \t \n \r


def printable(text: str) -> str:
    """`text` without control sequences or control characters, but for \\n and \\t."""
    text = SEQUENCES.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return CONTROLS.sub("", text)
