"""The original example end to end, on both backends: the real SDK against the fake
Messages API, the code in a local sandbox or a (fake) Buddy sandbox."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import main
from bot.run_events import RunFinished
from bot.sessions.session import save_outputs
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.fakes.buddy import FakeBuddy
from tests.scripts import population_analyst
from tests.support import (
    POPULATION_CSV,
    Recorder,
    buddy_settings,
    file_chunks,
    in_thread,
    model_in_thread,
    runtime_on,
)

QUESTION = (
    "Find the three countries with the largest absolute population growth from 2000 to 2020. "
    "Exclude aggregates such as regions, income groups and World."
)


def expected() -> dict[str, tuple[int, int]]:
    """The 2000 and 2020 values straight from the data, to compare with what the bot says."""
    wanted: dict[str, dict[str, int]] = {"India": {}, "China": {}, "Nigeria": {}}
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


async def test_population_growth_end_to_end(
    backend: str, tmp_path: Path, sandbox_root: Path
) -> None:
    recorder = Recorder()
    async with (
        FakeAnthropic(population_analyst) as fake,
        runtime_on(backend, fake.base_url, sandbox_root) as runtime,
    ):
        session = runtime.sessions.new("test-population")
        session.start()
        try:
            await session.add_file(POPULATION_CSV.name, lambda: file_chunks(POPULATION_CSV))
            result = await session.ask(QUESTION, recorder)
            saved = await save_outputs(session.outputs, tmp_path)
        finally:
            await session.close()

    assert isinstance(result, RunFinished), result
    assert result.turns == 5
    assert_has_numbers(result.answer)
    assert_has_numbers((tmp_path / "report.md").read_text())
    assert {p.name for p in saved} == {"report.md", "top3.json"}

    # The failed import reached the model as an error result, and it recovered.
    assert [e.status for e in recorder.finished] == ["ok", "error", "ok", "ok"]
    assert "ModuleNotFoundError" in recorder.finished[1].excerpt
    # The model was told about the file, with its header line, in the system prompt.
    system = fake.requests[0].system_text
    assert "/buddy/work/uploads/population_2000_2010_2020.csv" in system
    assert "Country Name,Country Code,Year,Value" in system
    assert result.usage.output_tokens > 0 and result.cost_usd is not None and result.cost_usd > 0
    assert not list(sandbox_root.iterdir()), "sandbox left behind"


async def test_follow_up_continues_the_same_session(backend: str, sandbox_root: Path) -> None:
    def script(req):  # first question writes a file; the follow-up reads it back
        if req.turn == 0:
            code = "open('/buddy/work/note.txt', 'w').write('remembered')"
            return Reply([tool_use("run_code", {"language": "python", "code": code})])
        if req.turn == 1:
            return Reply([text("Saved a note.")])
        if req.turn == 2:
            return Reply([tool_use("read_file", {"path": "/buddy/work/note.txt"})])
        return Reply([text(f"The note says: {req.tool_results()[-1].text}")])

    async with (
        FakeAnthropic(script) as fake,
        runtime_on(backend, fake.base_url, sandbox_root) as runtime,
    ):
        session = runtime.sessions.new("test-follow-up")
        try:
            first = await session.ask("write a note", Recorder())
            sandbox_id = session.sandbox_id
            second = await session.ask("what does the note say?", Recorder())
            assert session.sandbox_id == sandbox_id  # the same sandbox, not a new one
        finally:
            await session.close()
    assert isinstance(first, RunFinished) and isinstance(second, RunFinished)
    assert second.answer == "The note says: remembered"
    # The follow-up request carried the whole earlier conversation.
    last = fake.requests[-1].messages
    assert [m["role"] for m in last] == ["user", "assistant"] * 3 + ["user"]
    assert last[4]["content"][-1]["text"] == "what does the note say?"


@pytest.fixture
def model_server() -> Iterator[str]:
    with model_in_thread(population_analyst) as fake:
        yield fake.base_url


def run_terminal(tmp_path: Path, monkeypatch, capsys, env: dict[str, str]) -> str:
    """`python -m bot ask --csv …` as a user runs it; returns what it printed."""
    monkeypatch.chdir(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name.upper(), value)
    code = main(["ask", "--csv", str(POPULATION_CSV), QUESTION])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def assert_terminal_output(out: str, tmp_path: Path) -> None:
    assert "▶ [2] python" in out and "import polars" in out and "✗ error · exit 1" in out
    assert "5 turns" in out and "$" in out
    assert_has_numbers((tmp_path / "report.md").read_text())
    assert (tmp_path / "top3.json").exists()


def test_terminal_mode_on_the_local_sandbox(
    tmp_path: Path, sandbox_root: Path, model_server: str, monkeypatch, capsys
) -> None:
    env = {
        "anthropic_api_key": "sk-ant-test-secret",
        "anthropic_base_url": model_server,
        "sandbox_backend": "local",
        "sandbox_root": str(sandbox_root),
    }
    assert_terminal_output(run_terminal(tmp_path, monkeypatch, capsys, env), tmp_path)
    assert not list(sandbox_root.iterdir())


def test_terminal_mode_on_buddy(
    tmp_path: Path, sandbox_root: Path, model_server: str, monkeypatch, capsys
) -> None:
    with in_thread(lambda: FakeBuddy(sandbox_root, boot_delay_s=0.05)) as fake:
        env = {"anthropic_api_key": "sk-ant-test-secret", "anthropic_base_url": model_server}
        env.update({k: str(v) for k, v in buddy_settings(fake.base_url).items()})
        assert_terminal_output(run_terminal(tmp_path, monkeypatch, capsys, env), tmp_path)
        assert not fake.sandboxes and len(fake.deleted) == 1
