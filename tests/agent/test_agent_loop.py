"""The tool loop's habits: limits, stop reasons, retries, errors returned to the model."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from bot.agent.loop import Checkpoint
from bot.run_events import RunFailed, RunFinished, TextEmitted
from bot.sessions.session import Session
from tests.fakes.anthropic import (
    MAX_REQUEST_BYTES,
    FakeAnthropic,
    Reply,
    drop_connection,
    http_error,
    stream_error,
    text,
    tool_use,
)
from tests.support import Recorder, runtime_for


@asynccontextmanager
async def session_with(
    script: Callable,
    root: Path,
    min_cache_tokens: int = 1024,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    context_window: int | None = None,
    checkpoint: Checkpoint | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[Session, FakeAnthropic]]:
    fake_api = FakeAnthropic(
        script,
        min_cache_tokens=min_cache_tokens,
        max_request_bytes=max_request_bytes,
        context_window=context_window,
    )
    async with fake_api as fake:
        runtime = runtime_for(fake.base_url, root, **settings)
        session = runtime.sessions.new("loop-test", checkpoint=checkpoint)
        try:
            yield session, fake
        finally:
            await session.close()
            await runtime.close()
    # The API would merge same-role neighbours, but the bot keeps the roles alternating itself.
    for req in fake.requests:
        roles = [m["role"] for m in req.messages]
        assert all(a != b for a, b in pairwise(roles)), roles


def run_python(code: str, **extra: Any) -> dict:
    return tool_use("run_code", {"language": "python", "code": code, **extra})


async def test_max_turns_stops_with_an_answer_and_a_note(sandbox_root: Path) -> None:
    def script(req):  # never stops calling tools
        return Reply([text(f"step {req.turn}"), run_python("print(1)")])

    saved: list[list[dict[str, Any]]] = []

    async def checkpoint(history: list[dict[str, Any]], _archive: Any) -> None:
        saved.append(json.loads(json.dumps(history)))

    limited = session_with(script, sandbox_root, checkpoint=checkpoint, max_turns=3)
    async with limited as (session, fake):
        result = await session.ask("loop forever", Recorder())
    assert isinstance(result, RunFinished) and result.stop == "max_turns"
    assert result.turns == 3 and len(fake.requests) == 3
    # What a restarted bot would load is the history as it ended, unrun call answered.
    assert saved[-1] == json.loads(json.dumps(session.agent.history))
    assert "Stopped after 3 turns" in result.answer
    # Before its last turn the model was told to answer now.
    last_user = fake.requests[-1].last_user_blocks
    assert any("last turn" in b.get("text", "") for b in last_user)
    # The unrun call of the last turn was answered, so the history stays valid for a follow-up.
    assert session.agent.history[-1]["content"][0]["type"] == "tool_result"


async def test_tool_error_comes_back_and_the_model_fixes_it(sandbox_root: Path) -> None:
    def script(req):
        match req.turn:
            case 0:
                return Reply([run_python("print(1/0)")])
            case 1:
                result = req.tool_results()[0]
                assert result.is_error and "ZeroDivisionError" in result.text
                assert "exit_code: 1" in result.text
                return Reply([run_python("print(1/1)")])
            case _:
                assert not req.tool_results()[0].is_error
                return Reply([text("fixed: 1.0")])

    recorder = Recorder()
    async with session_with(script, sandbox_root) as (session, _):
        result = await session.ask("divide", recorder)
    assert isinstance(result, RunFinished) and result.answer == "fixed: 1.0"
    assert [e.status for e in recorder.finished] == ["error", "ok"]


async def test_bad_tool_input_and_unknown_tool_are_results_not_crashes(sandbox_root: Path) -> None:
    def script(req):
        match req.turn:
            case 0:
                return Reply(
                    [
                        tool_use("run_code", {"language": "cobol", "code": "x"}),
                        tool_use("rm_rf", {}),
                        tool_use("read_file", {"path": "/etc/shadow"}),
                    ]
                )
            case _:
                results = req.tool_results()
                assert all(r.is_error for r in results)
                assert "language" in results[0].text
                assert "Unknown tool 'rm_rf'" in results[1].text
                return Reply([text("ok")])

    async with session_with(script, sandbox_root) as (session, _):
        result = await session.ask("misbehave", Recorder())
    assert isinstance(result, RunFinished) and result.answer == "ok"


async def test_refusal_is_terminal_and_its_tool_calls_never_run(sandbox_root: Path) -> None:
    def script(req):
        if req.turn == 0 and req.messages[-1]["content"][-1].get("text") == "bad":
            details = {"type": "refusal", "category": "cyber", "explanation": "Not allowed."}
            marker = "open('/buddy/work/ran', 'w')"
            return Reply([run_python(marker)], stop_reason="refusal", stop_details=details)
        return Reply([tool_use("list_files", {"path": "/buddy/work"})] if req.turn == 0 else [])

    recorder = Recorder()
    async with session_with(script, sandbox_root) as (session, _):
        result = await session.ask("bad", recorder)
        assert isinstance(result, RunFailed) and "declined" in result.reason
        assert result.cause is None  # a refusal is the model's answer, not a failure
        assert "Not allowed." in result.reason
        assert recorder.started == []
        # The session goes on: a follow-up works and the refused call never ran.
        follow = await session.ask("fine", Recorder())
        sandbox = await session.sandbox()
        names = [e.name for e in await sandbox.list_dir("/buddy/work")]
    assert isinstance(follow, RunFinished)
    assert "ran" not in names


async def test_max_tokens_cut_tool_call_is_not_run(sandbox_root: Path) -> None:
    def script(req):
        match req.turn:
            case 0:
                cut = run_python("open('/buddy/work/ran', 'w')")
                return Reply([text("Writing…"), cut], stop_reason="max_tokens")
            case 1:
                assert "output token limit" in req.tool_results()[0].text
                return Reply([text("A long answer that was cut")], stop_reason="max_tokens")
            case _:
                raise AssertionError("no third turn expected")

    async with session_with(script, sandbox_root) as (session, _):
        result = await session.ask("write", Recorder())
        sandbox = await session.sandbox()
        names = [e.name for e in await sandbox.list_dir("/buddy/work")]
    assert isinstance(result, RunFinished) and result.stop == "max_tokens"
    assert "cut at the output token limit" in result.answer
    assert "ran" not in names


async def test_overloaded_errors_are_retried_then_succeed(sandbox_root: Path) -> None:
    async with session_with(lambda req: Reply([text("done")]), sandbox_root) as (session, fake):
        # Three 529s exhaust the SDK's own retries (1 + 2); the turn-level retry goes on.
        fake.fail_next(3, http_error(529))
        result = await session.ask("hi", Recorder())
    assert isinstance(result, RunFinished) and result.answer == "done"
    assert [r.retry_count for r in fake.requests] == [0, 1, 2, 0]


# A turn is answered whole unless the SDK says one of its max_tokens may take over 10
# minutes (3600 s x max_tokens / 128,000 > 600 s): that one streams.
STREAMED_MAX_TOKENS = 32_000


@pytest.mark.parametrize("max_tokens", [16_000, STREAMED_MAX_TOKENS])
async def test_stream_error_and_dropped_connection_are_retried(
    sandbox_root: Path, max_tokens: int
) -> None:
    async with session_with(
        lambda req: Reply([text("done")]), sandbox_root, max_output_tokens=max_tokens
    ) as (session, fake):
        # Streamed, an error event and a cut mid-stream; whole, an error status and a cut.
        fake.fail_next(1, stream_error("overloaded_error", after_blocks=1))
        fake.fail_next(1, drop_connection(after_blocks=0))
        result = await session.ask("hi", Recorder())
    assert isinstance(result, RunFinished) and result.answer == "done"
    streamed = max_tokens == STREAMED_MAX_TOKENS
    assert [r.stream for r in fake.requests][-1:] == [streamed]
    assert [r.body["max_tokens"] for r in fake.requests][-1:] == [max_tokens]
    # Streamed, the turn's own retry sends each again; whole, the SDK's retries do.
    assert len(fake.requests) == 3
    assert [r.retry_count for r in fake.requests] == ([0, 0, 0] if streamed else [0, 1, 2])


async def test_persistent_overload_fails_with_a_clear_reason(sandbox_root: Path) -> None:
    async with session_with(lambda req: Reply([text("never")]), sandbox_root) as (session, fake):
        # Every attempt fails: four turn-level attempts, each with the SDK's 1 + 2 tries.
        fake.fail_next(4 * 3, http_error(529))
        result = await session.ask("hi", Recorder())
    assert isinstance(result, RunFailed) and len(fake.requests) == 12
    assert result.cause == "model"
    assert result.reason == "The model API is overloaded right now; try again in a few minutes."


async def test_bad_api_key_fails_without_retrying(sandbox_root: Path) -> None:
    async with session_with(lambda req: Reply([text("never")]), sandbox_root) as (session, fake):
        fake.fail_next(1, http_error(401, "authentication_error"))
        result = await session.ask("hi", Recorder())
    assert isinstance(result, RunFailed) and "ANTHROPIC_API_KEY" in result.reason
    assert len(fake.requests) == 1


async def test_pause_turn_is_sent_back_as_is(sandbox_root: Path) -> None:
    def script(req):
        if req.turn == 0:
            return Reply([text("thinking about it")], stop_reason="pause_turn")
        assert req.messages[-1]["role"] == "assistant"  # resent unchanged, no new user text
        return Reply([text("resumed and done")])

    recorder = Recorder()
    async with session_with(script, sandbox_root) as (session, fake):
        result = await session.ask("long job", recorder)
    assert isinstance(result, RunFinished) and result.answer == "resumed and done"
    assert len(fake.requests) == 2 and recorder.of(TextEmitted) == []


async def test_several_pauses_in_a_row_each_count_as_a_turn(sandbox_root: Path) -> None:
    calls = []

    def script(req):
        calls.append(req)
        if len(calls) <= 3:
            return Reply([text(f"pause {len(calls)}")], stop_reason="pause_turn")
        return Reply([text("done after three pauses")])

    async with session_with(script, sandbox_root) as (session, fake):
        result = await session.ask("long job", Recorder())
    assert isinstance(result, RunFinished) and result.answer == "done after three pauses"
    assert result.turns == 4 and len(fake.requests) == 4
    # Each resend carried the paused turn as one assistant message, and no new user text.
    last = fake.requests[-1].messages
    assert [m["role"] for m in last] == ["user", "assistant"]
    # Each part of the turn starts with its own thinking, kept in place.
    assert [b["type"] for b in last[1]["content"]] == ["thinking", "text"] * 3
    texts = [b["text"] for b in last[1]["content"] if b["type"] == "text"]
    assert texts == ["pause 1", "pause 2", "pause 3"]


async def test_endless_pauses_end_at_the_turn_limit(sandbox_root: Path) -> None:
    def script(req):
        return Reply([text(f"still paused {req.turn}")], stop_reason="pause_turn")

    async with session_with(script, sandbox_root, max_turns=3) as (session, fake):
        result = await session.ask("never ends", Recorder())
        assert isinstance(result, RunFinished) and result.stop == "max_turns"
        assert result.turns == 3 and len(fake.requests) == 3
        # The conversation stays usable: a follow-up is sent after the paused turn.
        follow = await session.ask("and now?", Recorder())
    assert isinstance(follow, RunFinished) and len(fake.requests) == 6


async def test_detached_command_then_check(sandbox_root: Path) -> None:
    def script(req):
        match req.turn:
            case 0:
                code = "import time\nprint('started', flush=True)\ntime.sleep(0.5)\nprint('end')"
                return Reply([run_python(code, detached=True)])
            case 1:
                command_id = req.tool_results()[0].text.split("as ")[1].split(";")[0]
                # No sleep first: check_command waits for the command to end.
                return Reply([tool_use("check_command", {"command_id": command_id})])
            case _:
                return Reply([text(req.tool_results()[-1].text)])

    async with session_with(script, sandbox_root) as (session, _):
        result = await session.ask("background", Recorder())
    assert isinstance(result, RunFinished)
    assert "status: ok" in result.answer and "end" in result.answer


async def test_default_waits_double_and_say_how_long_they_were(sandbox_root: Path) -> None:
    """A wait that ends before the command says so; each default wait on the same command is
    twice the last, up to TOOL_TIMEOUT_S, so a long job costs a handful of turns."""
    started: dict[str, str] = {}
    seen: list[str] = []

    def script(req):
        if req.turn == 0:
            return Reply([run_python("import time; time.sleep(1000)", detached=True)])
        if req.turn == 1:
            started["id"] = req.tool_results()[0].text.split("as ")[1].split(";")[0]
        else:
            seen.append(req.tool_results()[0].text)
        if req.turn < 4:
            return Reply([tool_use("check_command", {"command_id": started["id"]})])
        return Reply([text("\n".join(seen))])

    settings = {"command_wait_s": 1, "tool_timeout_s": 3}
    async with session_with(script, sandbox_root, **settings) as (session, _):
        result = await session.ask("background", Recorder())
    assert isinstance(result, RunFinished)
    waits = re.findall(r"Still running after a wait of (\d+) s \(a wait may last up to 3 s\)",
                       result.answer)  # fmt: skip
    assert waits == ["1", "2", "3"]


async def test_prompt_cache_breakpoints_and_usage_totals(sandbox_root: Path) -> None:
    def script(req):
        return Reply([run_python("print(2)")] if req.turn < 3 else [text("done")])

    # A small minimum: this conversation is shorter than real ones.
    async with session_with(script, sandbox_root, min_cache_tokens=512) as (session, fake):
        result = await session.ask("count", Recorder())
    body = fake.requests[-1].body
    assert body["cache_control"] == {"type": "ephemeral"}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "thread" not in body and "temperature" not in body
    # Turn 1 writes the prefix; each later turn reads all of the previous turn's prompt.
    assert result.usage.cache_write_tokens > 0
    assert result.usage.cache_read_tokens > result.usage.input_tokens
