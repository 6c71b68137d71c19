"""`python -m bot ask` prints what the model and the sandbox wrote without the terminal
control sequences in it: none may set the clipboard (OSC 52), erase or rewrite lines
(CSI), retitle the window or reach the terminal any other way. Newlines and tabs stay."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import pytest

from bot.terminal.printable import printable
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.terminal.test_terminal import bot_env

CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # OSC 52, BEL-terminated
TITLE = "\x1b]0;owned\x1b\\"  # OSC, ST-terminated
ERASE = "\x1b[2K\x1b[1A\x1b[2K"  # erase the line, up one, erase it
C1_CSI = "\u009b2K"  # CSI as one C1 character
DCS = "\x1bP1$r0m\x1b\\"
HOSTILE = f"{CLIPBOARD}{TITLE}tests: 3 failed{ERASE}{C1_CSI}{DCS}\rtests: all passed\x07\x08\x7f"
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

SANDBOX_CODE = f"import sys\nsys.stdout.write({HOSTILE!r} + '\\n\\tindented\\n')"


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        (CLIPBOARD + "a", "a"),
        (TITLE + "b", "b"),
        ("x" + ERASE + "y", "xy"),
        ("1" + C1_CSI + "2", "12"),
        ("\x1b]52;c;unterminated", ""),
        ("\u009d0;title\u009cz", "z"),
        (DCS + "c", "c"),
        ("\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\d", "d"),
        ("\x1bc\x1b7e\x1b(0", "e"),
        ("keep\ttabs\nand lines\r\nok", "keep\ttabs\nand lines\nok"),
        ("over\rwrite", "over\nwrite"),
        ("snow ☃ and ünïcode", "snow ☃ and ünïcode"),
    ],
)
def test_printable_strips_every_kind_of_control(dirty: str, clean: str) -> None:
    assert printable(dirty) == clean


async def test_the_terminal_prints_no_control_sequence_of_the_model_or_sandbox(
    tmp_path: Path, sandbox_root: Path
) -> None:
    data = tmp_path / "data.csv"
    data.write_text(f"name{ERASE},value\nx{CLIPBOARD},1\n")

    def script(req):
        if req.turn == 0:
            run = tool_use("run_code", {"language": "python", "code": SANDBOX_CODE})
            return Reply([text(f"Checking{TITLE}…"), run])
        return Reply([text(f"Answer{CLIPBOARD}:\n\n| a{ERASE} | b |\n|---|---|\n| 1\x1b[8m | 2 |")])

    async with FakeAnthropic(script) as fake:
        env = bot_env(sandbox_root, ANTHROPIC_BASE_URL=fake.base_url, ANTHROPIC_API_KEY="sk-test")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "ask", "--session", "hostile", "--csv", str(data),
            "check", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        raw_out, raw_err = await asyncio.wait_for(proc.communicate(), 120)
        out, err = raw_out.decode(), raw_err.decode()
        assert proc.returncode == 0, err
        export = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "sessions", "export", "hostile", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        raw_jsonl, _ = await asyncio.wait_for(export.communicate(), 60)
    assert "tests: all passed" in out and "\tindented" in out  # the output is there
    assert "Answer" in out and "Checking" in out
    assert not CONTROLS.findall(out), [ln for ln in out.splitlines() if CONTROLS.search(ln)]
    assert not CONTROLS.findall(err)
    jsonl = raw_jsonl.decode()
    assert export.returncode == 0 and "tests: all passed" in jsonl
    assert not CONTROLS.findall(jsonl.replace("\n", ""))
    decoded = "".join(strings([json.loads(line) for line in jsonl.splitlines()]))
    assert C1_CSI in decoded and CLIPBOARD in decoded  # the record is whole, only escaped


def strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [s for item in items for s in strings(item)]
