"""A session outlives its sandbox: after a teardown the next question gets a fresh sandbox,
the files again, and the whole conversation; after a stop, the same sandbox again."""

from __future__ import annotations

from pathlib import Path

from bot.run_events import RunFinished
from bot.sessions.sandbox_changes import STOPPED
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.support import POPULATION_CSV, Recorder, file_chunks, runtime_on

UPLOADED = "/buddy/work/uploads/population_2000_2010_2020.csv"


def script(req):
    """Counts the rows of the uploaded file on each question, and leaves a marker behind."""
    results = req.tool_results()
    if not results:
        code = (
            f"import os; print(sum(1 for _ in open({UPLOADED!r})), "
            "os.path.exists('/buddy/work/marker')); open('/buddy/work/marker', 'w')"
        )
        return Reply([tool_use("run_code", {"language": "python", "code": code})])
    return Reply([text(results[-1].text.split("--- stdout ---\n")[1].split("\n")[0])])


async def test_resume_after_teardown(backend: str, sandbox_root: Path) -> None:
    opened = []

    def opener():
        opened.append(1)
        return file_chunks(POPULATION_CSV)

    async with (
        FakeAnthropic(script) as fake,
        runtime_on(backend, fake.base_url, sandbox_root) as runtime,
    ):
        session = runtime.sessions.new("resume")
        try:
            await session.add_file(POPULATION_CSV.name, opener)
            first = await session.ask("count rows", Recorder())
            first_id = session.sandbox_id
            await session.suspend()  # the thread went quiet
            assert session.sandbox_id is None
            second = await session.ask("count again", Recorder())
            assert session.sandbox_id not in (None, first_id)
        finally:
            await session.close()

    assert isinstance(first, RunFinished) and isinstance(second, RunFinished)
    assert first.answer == "796 False"  # the file is there; the marker is not yet
    assert second.answer == "796 False"  # the file is there again; the old marker is gone
    assert len(opened) == 2  # fetched again from its source for the fresh sandbox
    # The model kept the conversation and was told the sandbox is fresh, with the question
    # (the system prompt stays as it was, so the conversation stays in the prompt cache).
    last = fake.requests[-1]
    assert [m["role"] for m in last.messages][:4] == ["user", "assistant", "user", "assistant"]
    assert "this is a fresh one" in fake.requests[2].last_user_text
    assert "fresh one" not in fake.requests[0].last_user_text
    assert last.system_text == fake.requests[0].system_text and UPLOADED in last.system_text


async def test_resume_after_a_stop_keeps_the_files(backend: str, sandbox_root: Path) -> None:
    """SESSION_IDLE_ACTION=stop: the same sandbox comes back with the marker the model left,
    without its processes; the model is told so, and the upload is not fetched again."""
    opened = []

    def opener():
        opened.append(1)
        return file_chunks(POPULATION_CSV)

    async with (
        FakeAnthropic(script) as fake,
        runtime_on(backend, fake.base_url, sandbox_root) as runtime,
    ):
        session = runtime.sessions.new("stop")
        try:
            await session.add_file(POPULATION_CSV.name, opener)
            first = await session.ask("count rows", Recorder())
            first_id = session.sandbox_id
            assert await session.stop_sandbox()  # the thread went quiet
            second = await session.ask("count again", Recorder())
            assert session.sandbox_id == first_id
        finally:
            await session.close()

    assert isinstance(first, RunFinished) and isinstance(second, RunFinished)
    assert (first.answer, second.answer) == ("796 False", "796 True")  # the marker is kept
    assert len(opened) == 1
    told = fake.requests[-2].last_user_text  # a one-off note goes with the question
    assert STOPPED in told and "fresh one" not in told
