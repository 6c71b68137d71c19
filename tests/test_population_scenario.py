"""The original example end to end: real SDK → fake Messages API, code in the local sandbox."""

from __future__ import annotations

import csv
from pathlib import Path

from bot.agent.events import RunFinished
from bot.cli import main
from tests.fakes.anthropic_api import FakeAnthropic
from tests.scripts import population_analyst
from tests.support import POPULATION_CSV, Recorder, file_chunks, runtime_for

QUESTION = (
    "Find the three countries with the largest absolute population growth from 2000 to 2020. "
    "Exclude aggregates such as regions, income groups and World."
)


def expected() -> dict[str, tuple[int, int]]:
    """The 2000 and 2020 values straight from the data, to compare with what the bot says."""
    wanted = {"India": {}, "China": {}, "Nigeria": {}}
    with POPULATION_CSV.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Country Name"] in wanted and row["Year"] in ("2000", "2020"):
                wanted[row["Country Name"]][row["Year"]] = int(float(row["Value"]))
    return {name: (v["2000"], v["2020"]) for name, v in wanted.items()}


def assert_has_numbers(text: str) -> None:
    for name, (y2000, y2020) in expected().items():
        assert name in text
        assert f"{y2000:,}" in text and f"{y2020:,}" in text
        assert f"{y2020 - y2000:,}" in text
    assert "World" not in text.split("|", 1)[-1]  # no aggregate row in the table


async def test_population_growth_end_to_end(tmp_path: Path, sandbox_root: Path) -> None:
    async with FakeAnthropic(population_analyst) as fake:
        runtime = runtime_for(fake.base_url, sandbox_root)
        session = runtime.new_session("test-population")
        session.start()
        recorder = Recorder()
        try:
            await session.add_file(POPULATION_CSV.name, file_chunks(POPULATION_CSV))
            result = await session.ask(QUESTION, recorder)
            saved = await session.save_outputs(tmp_path)
        finally:
            await session.close()
            await runtime.close()

    assert isinstance(result, RunFinished), result
    assert result.turns == 5
    assert_has_numbers(result.answer)
    report = (tmp_path / "report.md").read_text()
    assert_has_numbers(report)
    assert {p.name for p in saved} == {"report.md", "top3.json"}

    # The failed import reached the model as an error result, and it recovered.
    statuses = [e.status for e in recorder.finished]
    assert statuses == ["ok", "error", "ok", "ok"]
    assert "ModuleNotFoundError" in recorder.finished[1].excerpt
    # The model was told about the file, with its header line, in the system prompt.
    system = fake.requests[0].system_text
    assert "/buddy/work/uploads/population_2000_2010_2020.csv" in system
    assert "Country Name,Country Code,Year,Value" in system
    assert result.usage.output_tokens > 0 and result.cost_usd is not None and result.cost_usd > 0
    assert not list((sandbox_root).iterdir()), "sandbox left behind"


async def test_follow_up_continues_the_same_session(sandbox_root: Path) -> None:
    from tests.fakes.anthropic_api import Reply, text, tool_use

    def script(req):  # first question writes a file; the follow-up reads it back
        if req.turn == 0:
            code = "open('/buddy/work/note.txt', 'w').write('remembered')"
            return Reply([tool_use("run_code", {"language": "python", "code": code})])
        if req.turn == 1:
            return Reply([text("Saved a note.")])
        if req.turn == 2:
            return Reply([tool_use("read_file", {"path": "/buddy/work/note.txt"})])
        return Reply([text(f"The note says: {req.tool_results()[-1].text}")])

    async with FakeAnthropic(script) as fake:
        runtime = runtime_for(fake.base_url, sandbox_root)
        session = runtime.new_session("test-follow-up")
        try:
            first = await session.ask("write a note", Recorder())
            second = await session.ask("what does the note say?", Recorder())
        finally:
            await session.close()
            await runtime.close()
    assert isinstance(first, RunFinished) and isinstance(second, RunFinished)
    assert second.answer == "The note says: remembered"
    # The follow-up request carried the whole earlier conversation.
    last = fake.requests[-1].messages
    assert [m["role"] for m in last] == ["user", "assistant"] * 3 + ["user"]
    assert last[4]["content"][-1]["text"] == "what does the note say?"


def test_terminal_mode_prints_tool_calls_and_saves_report(
    tmp_path: Path, sandbox_root: Path, monkeypatch, capsys
) -> None:
    """`python -m bot ask --csv …` as a user runs it, against the fake endpoint."""
    import asyncio
    import threading

    ready = threading.Event()
    state: dict = {}

    def serve() -> None:
        async def run() -> None:
            async with FakeAnthropic(population_analyst) as fake:
                state["url"] = fake.base_url
                state["stop"] = asyncio.Event()
                state["loop"] = asyncio.get_running_loop()
                ready.set()
                await state["stop"].wait()

        asyncio.run(run())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", state["url"])
    monkeypatch.setenv("SANDBOX_BACKEND", "local")
    monkeypatch.setenv("SANDBOX_ROOT", str(sandbox_root))
    try:
        code = main(["ask", "--csv", str(POPULATION_CSV), QUESTION])
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(10)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "▶ [2] python" in out and "import polars" in out and "✗ error · exit 1" in out
    assert "5 turns" in out and "$" in out
    assert_has_numbers((tmp_path / "report.md").read_text())
    assert (tmp_path / "top3.json").exists()
