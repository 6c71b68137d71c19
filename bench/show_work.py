"""The population question's work as a user sees it: the answer's footer (its figures
traced to steps), the Show work view a click opens, and the first cells of the notebook a
click on Notebook uploads (with nbformat's verdict on it when nbformat is installed).

Run from the repository root: `.venv/bin/python -m bench.show_work`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from bench import sandbox_root
from tests.scripts import population_analyst
from tests.slack_harness import CHANNEL, Harness, running_bot
from tests.support import POPULATION_CSV

CELLS = 6  # how many of the notebook's cells to print


def answer_message(h: Harness, thread: str) -> dict:
    return next(m for m in h.bot_messages(thread) if "show_work" in json.dumps(m))


def footer(message: dict) -> str:
    contexts = [b for b in message["blocks"] if b["type"] == "context"]
    return contexts[-1]["elements"][0]["text"]


async def population(root: Path) -> None:
    async with running_bot("local", population_analyst, root, None) as h:
        csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
        message = await h.slack.post_user_message(CHANNEL, "grew most?", files=[csv], mention=True)
        thread = message["ts"]
        await h.slack.wait_for(lambda: any("show_work" in json.dumps(m)
                                           for m in h.bot_messages(thread)), 90)  # fmt: skip
        answer = answer_message(h, thread)
        print("footer:", footer(answer))

        await h.slack.click_button(answer, "show_work")
        await h.slack.wait_for(lambda: h.slack.views_opened, 30)
        view = h.slack.views_opened[-1]
        print(f"Show work view ({len(view['blocks'])} blocks):")
        print(json.dumps({"title": view["title"], "blocks": view["blocks"][:8]}, indent=1))

        await h.slack.click_button(answer, "notebook")
        notebook = lambda: [u for u in h.slack.uploads.values()  # noqa: E731
                            if u.filename.endswith(".ipynb")]  # fmt: skip
        await h.slack.wait_for(notebook, 30)
        book = json.loads(notebook()[0].content)
        print(f"notebook {notebook()[0].filename}: {len(book['cells'])} cells; the first {CELLS}:")
        for cell in book["cells"][:CELLS]:
            print(f"--- {cell['cell_type']}\n{''.join(cell['source'])}")
        try:
            import nbformat
        except ImportError:
            return
        nbformat.validate(nbformat.reads(json.dumps(book), as_version=4))
        print("nbformat: valid")


async def main() -> None:
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    with sandbox_root() as root:
        await population(root / "work")


if __name__ == "__main__":
    asyncio.run(main())
