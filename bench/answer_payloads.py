"""What Slack receives for the population question: the answer's data message (its table,
chart and canvas link blocks) as the fake Slack stored it, the canvas, the chart's upload,
and the Web API calls per question, for each UI style.

Run from the repository root: `.venv/bin/python -m bench.answer_payloads [--json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections import Counter
from pathlib import Path

from bench import sandbox_root
from bench.slack_agent import STARTUP, TIERS
from tests.scripts import population_charted
from tests.slack_harness import CHANNEL, running_bot
from tests.support import POPULATION_CSV

DATA_BLOCKS = {"data_table", "table", "data_visualization", "rich_text"}


async def population(root: Path, ui: str, show: bool) -> Counter:
    options = {**TIERS, "agent_sessions": True}
    async with running_bot(
        "local", population_charted, root, None, options, slack_ui=ui, slack_rate_scale=1
    ) as h:
        before = len(h.slack.calls)
        csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
        message = await h.slack.post_user_message(CHANNEL, "grew most?", files=[csv], mention=True)
        thread = message["ts"]
        names = {"report.md", "growth.png", "top3.json"}
        shared = lambda: {u.filename for u in h.slack.uploads.values() if u.shared_ts}  # noqa: E731
        await h.slack.wait_for(lambda: names <= shared(), 90)
        await asyncio.sleep(1.0)  # anything still to come
        calls = Counter(c.method for c in h.slack.calls[before:] if c.method not in STARTUP)
        if show:
            for m in h.bot_messages(thread):
                if any(b.get("type") in DATA_BLOCKS for b in m.get("blocks") or []):
                    print(json.dumps({"text": m.get("text"), "blocks": m["blocks"]}, indent=1))
            for canvas in h.slack.canvases.values():
                print(f"canvas {canvas.id} {canvas.title!r}, access {canvas.access}")
                print("  " + canvas.markdown[:300].replace("\n", "\n  "))
            for u in h.slack.uploads.values():
                print(f"upload {u.filename}: alt_txt={u.alt_txt!r}")
        return calls


async def main() -> None:
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true", help="print the stored payloads too")
    args = parser.parse_args()
    with sandbox_root() as root:
        for ui in ("agent", "classic"):
            calls = await population(root / ui, ui, args.json and ui == "agent")
            detail = ", ".join(f"{m} {k}" for m, k in sorted(calls.items()))
            print(f"{ui:7}: {sum(calls.values())} Slack calls for the question ({detail})")


if __name__ == "__main__":
    asyncio.run(main())
