"""A question answered from a real PostgreSQL, end to end on both backends: a mention in a
channel the connection lists, the model's list_tables and run_sql, the rows in a file in
the sandbox, a cell that reads it, and the answer in the thread. The password is nowhere
on the wire, in the store or in the sandbox; a channel not listed is never offered the
connection."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import nbformat
import pytest

from bot.sessions.notebook_store import thread_notebook
from bot.store.sqlite import SqliteStore
from tests.agent.test_agent_loop import run_python
from tests.fakes.anthropic import Reply, text, tool_use
from tests.postgres_server import ANALYST_PASSWORD, PostgresServer, postgres_server
from tests.slack.test_slack_show_work import modal_text, open_show_work, with_button
from tests.slack_harness import CHANNEL, Harness, running_bot
from tests.sql.connections import PASSWORD_ENV, population_rows, postgres_entry, write_connections

pytestmark = pytest.mark.timeout(180)

QUESTION = "How much did India, China and Nigeria grow from 2000 to 2020?"
GROWTH_SQL = (
    "SELECT country_name, max(value) FILTER (WHERE year = 2000) AS y2000,"
    " max(value) FILTER (WHERE year = 2020) AS y2020 FROM population"
    " WHERE country_code IN ('IND', 'CHN', 'NGA') GROUP BY country_name ORDER BY 1"
)
# The cell reads the query's file, and looks for the password in its environment and files
# (the needle is split, so that the cell's own code does not carry it).
CELL = """
import csv, os
rows = list(csv.DictReader(open('/buddy/work/queries/growth.csv')))
for r in rows:
    print(f"{r['country_name']}: {int(r['y2020']) - int(r['y2000']):,}")
needle = 'pg-Secret-' + '4f9c2e71b8'
found = [k for k, v in os.environ.items() if needle in v]
for folder, _, names in os.walk('/buddy/work'):
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue  # a pipe would block the read
        try:
            if needle in open(path, errors='replace').read():
                found.append(name)
        except OSError:
            pass
print('password found:', found)
"""


def expected_growth() -> dict[str, int]:
    values = {(n, y): v for n, c, y, v in population_rows() if c in ("IND", "CHN", "NGA")}
    return {n: values[n, 2020] - values[n, 2000] for n, y in values if y == 2000}


def analyst(req):
    if req.turn == 0:
        return Reply([tool_use("list_tables", {"connection": "warehouse"})])
    if req.turn == 1:
        args = {"connection": "warehouse", "sql": GROWTH_SQL, "save_as": "growth"}
        return Reply([tool_use("run_sql", args)])
    if req.turn == 2:
        return Reply([run_python(CELL)])
    india = next(v for n, c, y, v in population_rows() if c == "IND" and y == 2020)
    said = f"India had {india:,} people in 2020. Growth 2000–2020:\n"
    return Reply([text(said + req.tool_results()[-1].text)])


@pytest.fixture
async def pg() -> AsyncIterator[PostgresServer]:
    async with postgres_server() as server:
        yield server


def connections_file(pg: PostgresServer, folder: Path, monkeypatch) -> Path:
    monkeypatch.setenv(PASSWORD_ENV, ANALYST_PASSWORD)
    return write_connections(folder, postgres_entry(pg, channels=[CHANNEL]))


async def exported_notebook(path: Path, key: str) -> dict:
    store = SqliteStore(path)
    await store.open()
    try:
        book = await thread_notebook(store, key)
    finally:
        await store.close()
    nbformat.validate(nbformat.from_dict(book))
    return book


def everything_sent(h: Harness) -> str:
    """Every request the model, Slack and Buddy were sent, as text."""
    sent = [json.dumps(r.body) for r in h.model.requests]
    sent += [json.dumps([c.args, c.headers], default=str) for c in h.slack.calls]
    if h.buddy is not None:
        sent += [json.dumps([r.path, r.query, r.headers, r.json]) for r in h.buddy.requests]
    return "\n".join(sent)


async def test_a_question_is_answered_from_postgres(
    backend: str, pg: PostgresServer, sandbox_root: Path, tmp_path: Path, monkeypatch
) -> None:
    path = connections_file(pg, tmp_path, monkeypatch)
    async with running_bot(backend, analyst, sandbox_root, monkeypatch, connections_file=path) as h:
        message = await h.slack.post_user_message(CHANNEL, QUESTION, mention=True)
        thread = message["ts"]
        await h.wait_for_runs(thread, 1, timeout=60)
        await h.wait_for_text(thread, "Growth 2000–2020")
        said = h.texts(thread)
        store = h.settings.store_path
        await h.slack.wait_for(lambda: with_button(h, thread, "show_work"), 30)
        [answer] = with_button(h, thread, "show_work")
        shown = modal_text(await open_show_work(h, answer))

    for name, growth in expected_growth().items():
        assert f"{name}: {growth:,}" in said, said
    assert "password found: []" in said  # neither in the sandbox's environment nor files
    # The model was offered both tools, for this connection only, with its limits.
    first = h.model.requests[0].body
    tools = {t["name"]: t for t in first["tools"]}
    assert tools["run_sql"]["input_schema"]["properties"]["connection"]["enum"] == ["warehouse"]
    assert "at most 100,000 rows" in tools["run_sql"]["description"]
    assert "table population (~795 rows)" in json.dumps(h.model.requests[1].body)
    # The plan shows the query as a task: the connection, the rows, the file.
    assert "3 rows from warehouse → queries/growth.csv" in said
    # The audit keeps the query's text and its row count.
    with sqlite3.connect(store) as db:
        audit = db.execute(
            "SELECT tool, language, code, status, excerpt FROM tool_calls WHERE tool = 'run_sql'"
        ).fetchall()
        stored = b"".join(line.encode() for line in db.iterdump())
    [(tool, language, code, status, excerpt)] = audit
    assert (tool, language, status) == ("run_sql", "sql", "ok")
    assert code == f"-- warehouse → queries/growth.csv\n{GROWTH_SQL}"
    assert excerpt == "3 rows from warehouse → queries/growth.csv"
    # Show work names the query as the step of the figure it printed, with its rows.
    assert "*Step 2* · `sql`" in shown and "FILTER (WHERE year = 2020)" in shown, shown
    assert "3 rows from warehouse → queries/growth.csv" in shown
    # The notebook reruns the query from a URL in the environment, then the cell using it.
    book = await exported_notebook(store, f"{h.slack.team_id}:{CHANNEL}:{thread}")
    sources = ["".join(c["source"]) for c in book["cells"] if c["cell_type"] == "code"]
    assert "os.environ['SQL_URL_WAREHOUSE']" in sources[1] and GROWTH_SQL in sources[1]
    assert "queries/growth.csv" in sources[2]
    # The password is nowhere on the wire, in the store or the notebook.
    assert ANALYST_PASSWORD not in everything_sent(h) + json.dumps(book)
    assert ANALYST_PASSWORD.encode() not in stored


async def test_a_channel_not_listed_is_never_offered_the_connection(
    pg: PostgresServer, sandbox_root: Path, tmp_path: Path, monkeypatch
) -> None:
    def script(req):
        if req.turn == 0:  # a model that tries anyway
            args = {"connection": "warehouse", "sql": "SELECT 1", "save_as": "x"}
            return Reply([tool_use("run_sql", args)])
        return Reply([text("Told: " + req.tool_results()[-1].text)])

    path = connections_file(pg, tmp_path, monkeypatch)
    async with running_bot("local", script, sandbox_root, monkeypatch, connections_file=path) as h:
        other = "C0OTHER02"
        message = await h.slack.post_user_message(other, QUESTION, mention=True)
        await h.wait_for_runs(message["ts"], 1, channel=other, timeout=60)
    first = h.model.requests[0]
    assert "run_sql" not in first.tools and "list_tables" not in first.tools
    assert "warehouse" not in json.dumps(first.body)  # not even named
    assert "Unknown tool 'run_sql'" in json.dumps(h.model.requests[1].body)
