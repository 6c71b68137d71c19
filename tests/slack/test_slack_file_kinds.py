"""Files shared in Slack are told by their bytes: a CSV under any name is taken, and a
picture named like a CSV is skipped with what it really is."""

from __future__ import annotations

import gzip
from pathlib import Path

from tests.fakes.anthropic.api import ModelRequest, Reply, text
from tests.slack_harness import CHANNEL, running_bot

CSV = b"country,year\nChad,2010\nPeru,2020\n"


def saved(sandbox_root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sandbox_root.glob("lcl-*/work/uploads/*")}


def echo(req: ModelRequest) -> Reply:
    return Reply([text("seen")])


async def test_slack_files_are_told_by_their_bytes(sandbox_root: Path, monkeypatch) -> None:
    async with running_bot("local", echo, sandbox_root, monkeypatch) as h:
        files = [
            h.slack.add_file("export", CSV),  # no extension
            h.slack.add_file("notes.txt", CSV),
            h.slack.add_file("packed.csv", gzip.compress(CSV)),  # gzip under a plain name
            h.slack.add_file("chart.csv", b"\x89PNG\r\n\x1a\n" + bytes(100)),
        ]
        message = await h.slack.post_user_message(CHANNEL, "", files=files, mention=True)
        thread = message["ts"]
        await h.slack.wait_for(
            lambda: h.texts(thread).count(":inbox_tray:") + h.texts(thread).count("Skipped ") >= 4,
            20,
        )
        texts = h.texts(thread)
        expected = {"export": CSV, "notes.txt": CSV, "packed.csv": CSV}  # saved unpacked
        # a file's note can come before its last bytes are on disk
        await h.slack.wait_for(lambda: saved(sandbox_root) == expected, 20)
    for name in ("export", "notes.txt", "packed.csv"):
        assert f"*{name}* · CSV · 2 rows × 2 columns" in texts
    assert "Skipped chart.csv: it is a PNG image, not a data file. I take CSV," in texts
