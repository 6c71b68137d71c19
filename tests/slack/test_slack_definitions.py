"""Saved definitions end to end: a SQL step saved as "the definition of row count" is listed
in a later thread's prompt in the same channel, loaded there with load_definition, and
Show work names it; another channel never sees it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.anthropic import Reply, text, tool_use
from tests.slack.test_slack_show_work import modal_text, open_show_work, with_button
from tests.slack_harness import CHANNEL, bot_process, fake_world
from tests.sql.connections import file_entry, population_sqlite, write_connections

SQL = "SELECT count(*) AS n FROM population"


def analyst(req):
    asked = json.dumps(req.body["messages"][-1])
    if "how many rows now" in asked and "load_definition" in req.tools:
        return Reply([tool_use("load_definition", {"name": "row count"})])
    if "how many rows?" in asked:
        args = {"connection": "pop", "sql": SQL, "save_as": "n"}
        return Reply([tool_use("run_sql", args)])
    results = req.tool_results()
    if results and "Definition" in results[-1].text:
        return Reply([text("Still 795 rows, by the saved definition.")])
    return Reply([text("There are 795 rows.")])


async def test_a_definition_saved_from_a_query_is_reused_in_a_later_thread(
    store_backend: tuple[str, dict[str, str]], sandbox_root: Path, tmp_path: Path, monkeypatch
) -> None:
    db = population_sqlite(tmp_path)
    connections = write_connections(tmp_path, file_entry("pop", f"sqlite:///{db}"))
    world = fake_world(
        store_backend[0], analyst, sandbox_root, monkeypatch, connections_file=connections,
        **store_backend[1]
    )  # fmt: skip
    async with world as h, bot_process(h):
        first = await h.slack.post_user_message(CHANNEL, "how many rows?", mention=True)
        await h.wait_for_runs(first["ts"], 1)
        await h.slack.post_user_message(
            CHANNEL, "save this as the definition of row count", thread_ts=first["ts"]
        )
        await h.wait_for_text(first["ts"], "Saved as the definition of *row count*")
        later = await h.slack.post_user_message(CHANNEL, "how many rows now?", mention=True)
        await h.wait_for_runs(later["ts"], 1)
        prompt = next(
            r.system_text for r in h.model.requests if "how many rows now" in json.dumps(r.body)
        )
        loaded = h.model.requests[-1].tool_results()[-1].text
        await h.slack.wait_for(lambda: with_button(h, later["ts"], "show_work"), 30)
        [answer] = with_button(h, later["ts"], "show_work")
        shown = modal_text(await open_show_work(h, answer))
        await h.slack.slash_command("/analyze", "memory")
        listed = lambda: [  # noqa: E731
            m for m in h.slack.bot_messages(CHANNEL) if "Saved definitions" in str(m)
        ]
        await h.slack.wait_for(listed, 10)
        [memory] = listed()
        in_list = str(memory["blocks"])
        await h.slack.click_button(memory, "definition_forget:0", user="U0HUMAN01")
        await h.slack.wait_for(lambda: "Saved definitions" not in str(listed() or [{}]), 10)
        other = await h.slack.post_user_message("C0OTHER07", "how many rows?", mention=True)
        await h.wait_for_runs(other["ts"], 1, channel="C0OTHER07")
        prompt_there = h.model.requests[-1].system_text
    assert '- "row count": a sql step, which computed 795' in prompt
    assert SQL in loaded and "It computed: 795" in loaded
    assert "Reused the channel's saved definition of *row count*" in shown
    assert '"row count"' not in prompt_there and "Definitions saved" not in prompt_there
    assert "It computed 795." in h.texts(first["ts"])
    assert "*row count*: a `sql` step, computed 795" in in_list
