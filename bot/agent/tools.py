"""The tools the model has, their validated inputs, and how each maps onto the sandbox.

Whatever happens inside the sandbox (non-zero exit, timeout, bad input, a missing file)
comes back to the model as a tool result, never as an exception.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.agent.definition_tool import DESCRIPTION as DEFINITION_DESCRIPTION
from bot.agent.definition_tool import LoadDefinition, Loader
from bot.agent.kernel_state import RESTARTED_AS_ASKED, kernel_note
from bot.agent.note_tool import DESCRIPTION as NOTE_DESCRIPTION
from bot.agent.note_tool import ProposeNote
from bot.agent.note_tool import proposed as note_proposed
from bot.agent.schedule_tool import DESCRIPTION as SCHEDULE_DESCRIPTION
from bot.agent.schedule_tool import ScheduleRun, proposed
from bot.agent.schemas import input_schema
from bot.agent.sql_tools import SQL_TOOLS, ListTables, RunSql, SqlAnswer, SqlDesk
from bot.clip import clip, last_lines
from bot.errors import BotError
from bot.sandbox.base import WORK_DIR, CommandState, ExecResult, Sandbox
from bot.scrub import NO_SECRETS, Scrubber

READ_FILE_MAX_BYTES = 256 * 1024


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunCode(_Input):
    language: Literal["python", "bash", "node"] = Field(description="Interpreter to run the code.")
    code: str = Field(
        min_length=1,
        description="Python: a cell for the session's kernel. bash, node: a complete program.",
    )
    timeout_s: int | None = Field(
        default=None,
        ge=1,
        description="Wall-clock limit in seconds (default and maximum apply). A Python cell "
        "past it is interrupted and keeps the kernel's state; if it does not stop, the kernel "
        "is restarted.",
    )
    detached: bool = Field(
        default=False,
        description="Start in the background and return a command_id at once; "
        "wait for it with check_command. For work that takes minutes. Runs as a process of "
        "its own, outside the kernel.",
    )
    restart: bool = Field(
        default=False,
        description="Restart the Python kernel first: a clean state, with every variable "
        "and import gone (files stay).",
    )


class ReadFile(_Input):
    path: str = Field(description="Absolute path, e.g. /buddy/work/report.md.")


class ListFiles(_Input):
    path: str = Field(default=WORK_DIR, description="Absolute folder path.")


class CheckCommand(_Input):
    command_id: str = Field(description="The id that run_code returned for a detached command.")
    wait_s: int | None = Field(
        default=None,
        ge=0,
        description="Seconds to wait for the command to end. By default 30 s, doubling with "
        "each further wait on the same command, up to the tool time limit. It returns as "
        "soon as the command ends. 0 just looks.",
    )
    kill: bool = Field(default=False, description="Stop the command instead of waiting for it.")


TOOLS: dict[str, tuple[type[_Input], str]] = {
    "run_code": (
        RunCode,
        "Run Python 3, bash or Node code in the sandbox, with /buddy/work as the working "
        "folder; files persist between calls. Python runs in the session's live kernel, as in "
        "a notebook: variables, imports and loaded data stay between calls and between "
        "questions, so build on earlier steps instead of reloading; the value of the last "
        "expression is shown, and plt.show() (or a figure left open) saves a PNG to "
        "/buddy/work/out/. bash and node start a fresh process each call. Returns the status, "
        "exit code, stdout and stderr (long output is cut in the middle).",
    ),
    "read_file": (ReadFile, "Read a text file from the sandbox (long files are cut)."),
    "list_files": (ListFiles, "List a folder in the sandbox: names, kinds and sizes."),
    "check_command": (
        CheckCommand,
        "Wait for a detached command (or kill it): returns as soon as it ends, or after "
        "wait_s with status running and the output so far; then call it again to keep "
        "waiting. No need to sleep between calls.",
    ),
}


@cache
def tool_definitions() -> list[dict[str, Any]]:
    """The tool list sent to the model; stable, so it stays in the prompt cache (built once:
    the schemas cost more than half a millisecond)."""
    return [
        {"name": name, "description": text, "input_schema": input_schema(model)}
        for name, (model, text) in TOOLS.items()
    ]


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call produced: text for the model plus fields for progress displays."""

    content: str
    is_error: bool
    status: str
    exit_code: int | None = None
    duration_s: float = 0.0
    excerpt: str = ""


SandboxGetter = Callable[[], Awaitable[Sandbox]]


class Toolbox:
    """Runs tool calls against a session's sandbox (awaited lazily: it may still be starting)."""

    def __init__(
        self,
        sandbox: SandboxGetter,
        *,
        default_timeout_s: int,
        max_timeout_s: int,
        output_chars: int,
        default_wait_s: int = 30,
        scrubber: Scrubber = NO_SECRETS,
        sql: SqlDesk | None = None,
        schedule_min_interval_s: float | None = None,
        definitions: Loader | None = None,
    ) -> None:
        """`sql`: the SQL tools, where the session may use a connection;
        `schedule_min_interval_s`: offer `schedule_run`, with that minimum interval (None:
        not offered, as where no one could confirm a schedule)."""
        self._sandbox = sandbox
        self._schedule_min_s = schedule_min_interval_s
        self._definitions = definitions  # the channel's saved definitions (None: none)
        self._sql = sql if sql is not None and sql.offered else None
        self._scrubber = scrubber
        self._default_timeout_s = default_timeout_s
        self._max_timeout_s = max_timeout_s
        self._output_chars = output_chars
        self._default_wait_s = default_wait_s
        # waits so far per command still running, for the doubling; a command seen ended
        # (or never there) is dropped, so ids the model makes up do not pile up
        self._waits: dict[str, int] = {}

    async def call(self, name: str, raw_input: Any) -> ToolOutcome:
        """Run one tool call; what it returns has any configured secret scrubbed out."""
        outcome = await self._call(name, raw_input)
        scrub = self._scrubber.text
        return replace(outcome, content=scrub(outcome.content), excerpt=scrub(outcome.excerpt))

    def definitions(self) -> list[dict[str, Any]]:
        """The tools this toolbox offers: the sandbox's, then SQL's where the session's
        channel may use a connection (the same list every turn, for the prompt cache)."""
        tools = tool_definitions() + (self._sql.definitions() if self._sql else [])
        if self._schedule_min_s is not None:  # where a person can confirm: Slack
            tools.append(
                {"name": "schedule_run", "description": SCHEDULE_DESCRIPTION,
                 "input_schema": input_schema(ScheduleRun)}
            )  # fmt: skip
            tools.append(
                {"name": "propose_note", "description": NOTE_DESCRIPTION,
                 "input_schema": input_schema(ProposeNote)}
            )  # fmt: skip
        if self._definitions is not None:
            tools.append(
                {"name": "load_definition", "description": DEFINITION_DESCRIPTION,
                 "input_schema": input_schema(LoadDefinition)}
            )  # fmt: skip
        return tools

    async def _call(self, name: str, raw_input: Any) -> ToolOutcome:
        if name in SQL_TOOLS and self._sql is not None:
            return await self._sql_call(self._sql, name, raw_input)
        if name == "schedule_run" and self._schedule_min_s is not None:
            return _schedule_call(raw_input, self._schedule_min_s)
        if name == "propose_note" and self._schedule_min_s is not None:
            return _note_call(raw_input)
        if name == "load_definition" and self._definitions is not None:
            return await _definition_call(raw_input, self._definitions)
        spec = TOOLS.get(name)
        if spec is None:
            names = [*TOOLS, *(SQL_TOOLS if self._sql else ())]
            names += ["schedule_run", "propose_note"] if self._schedule_min_s is not None else []
            return _invalid(f"Unknown tool {name!r}. Available: {', '.join(names)}.")
        try:
            parsed = spec[0].model_validate(raw_input)
        except ValidationError as exc:
            return _invalid(f"Invalid input for {name}: {_validation_summary(exc)}")
        started = time.monotonic()
        try:
            return await self._dispatch(parsed)
        except BotError as exc:
            took = time.monotonic() - started
            return ToolOutcome(str(exc), True, "error", duration_s=took, excerpt=str(exc))

    async def _dispatch(self, parsed: _Input) -> ToolOutcome:
        sandbox = await self._sandbox()
        if isinstance(parsed, RunCode) and parsed.restart:
            await sandbox.restart_kernel()
            return _after_restart(
                await self._dispatch(parsed.model_copy(update={"restart": False}))
            )
        match parsed:
            case RunCode(detached=True):
                command_id = await sandbox.start_command(parsed.language, parsed.code)
                text = f"Started in the background as {command_id}; wait for it with check_command."
                return ToolOutcome(text, False, "running", excerpt=f"command {command_id}")
            case RunCode():
                limit = min(parsed.timeout_s or self._default_timeout_s, self._max_timeout_s)
                result = await sandbox.run_code(parsed.language, parsed.code, limit)
                return self._exec_outcome(result, timeout_s=limit)
            case CheckCommand(kill=True):
                self._waits.pop(parsed.command_id, None)
                await sandbox.kill_command(parsed.command_id)
                state = await sandbox.command_state(parsed.command_id)
                return self._exec_outcome(state.result, running=state.running)
            case CheckCommand():
                wait_s = self._wait_s(parsed)
                state = await self._waited(sandbox, parsed.command_id, wait_s)
                result = state.result
                if state.running and wait_s:
                    said = f"Still running after a wait of {wait_s} s (a wait may last up to "
                    said += f"{self._max_timeout_s} s); call check_command again to wait on."
                    result = replace(result, note="\n".join(filter(None, (result.note, said))))
                return self._exec_outcome(result, running=state.running)
            case ReadFile():
                return await self._read_file(sandbox, parsed.path)
            case ListFiles():
                entries = await sandbox.list_dir(parsed.path)
                lines = [f"{e.kind:4} {e.size:>12,}  {e.name}" for e in entries]
                text = "\n".join(lines) if lines else "(empty folder)"
                excerpt = f"{len(lines)} entries"
                return ToolOutcome(clip(text, self._output_chars), False, "ok", excerpt=excerpt)
        raise AssertionError(f"unhandled tool input {parsed!r}")

    async def _sql_call(self, desk: SqlDesk, name: str, raw_input: Any) -> ToolOutcome:
        model = ListTables if name == "list_tables" else RunSql
        try:
            parsed = model.model_validate(raw_input)
        except ValidationError as exc:
            return _invalid(f"Invalid input for {name}: {_validation_summary(exc)}")
        if isinstance(parsed, ListTables):
            answer = await desk.list_tables(parsed)
        else:
            answer = await desk.run_sql(parsed, await self._sandbox(), self._output_chars)
        return _from_sql(answer)

    @property
    def commands_watched(self) -> int:
        """Running commands whose waits are counted."""
        return len(self._waits)

    async def _waited(self, sandbox: Sandbox, command_id: str, wait_s: int) -> CommandState:
        """The command's state after a wait, counted while it still runs."""
        try:
            state = await sandbox.command_state(command_id, wait_s)
        except Exception:  # no such command (an id made up), or the sandbox failed
            self._waits.pop(command_id, None)
            raise
        if state.running:
            self._waits[command_id] = self._waits.get(command_id, 0) + 1
        else:
            self._waits.pop(command_id, None)
        return state

    def _wait_s(self, parsed: CheckCommand) -> int:
        """The wait asked for, or the default: doubling per wait, so a long job costs a
        handful of turns and a short one is seen as soon as it ends."""
        waits = self._waits.get(parsed.command_id, 0) + 1
        if parsed.wait_s is not None:
            return min(parsed.wait_s, self._max_timeout_s)
        return min(self._default_wait_s << min(waits - 1, 16), self._max_timeout_s)

    def _exec_outcome(
        self, result: ExecResult, *, timeout_s: float | None = None, running: bool = False
    ) -> ToolOutcome:
        status = "running" if running else result.status
        head = f"status: {status}"
        if result.exit_code is not None:
            head += f"\nexit_code: {result.exit_code}"
        if status == "timeout" and timeout_s is not None and result.kernel is None:
            head += f"\nThe code ran past its {timeout_s:g} s limit and was killed."
        if result.note:
            head += f"\n{result.note}"
        if note := kernel_note(result, timeout_s):
            head += f"\n{note}"
        head += f"\nduration_s: {result.duration_s:.2f}"
        half = self._output_chars // 2
        body = [head]
        for label, out in (("stdout", result.stdout), ("stderr", result.stderr)):
            text = clip(out.text, half)  # the sandbox already marked what it did not keep
            body.append(f"--- {label} ---\n{text}" if text else f"--- {label}: empty ---")
        shown = result.stderr.text if status not in ("ok", "running") else result.stdout.text
        if result.kernel in ("died", "restarted"):
            shown = f"{shown}\n{note}"  # progress displays say what happened to the kernel
        return ToolOutcome(
            content="\n".join(body),
            is_error=status not in ("ok", "running"),
            status=status,
            exit_code=result.exit_code,
            duration_s=result.duration_s,
            excerpt=last_lines(shown or result.stdout.text or result.stderr.text, 6, 160),
        )

    async def _read_file(self, sandbox: Sandbox, path: str) -> ToolOutcome:
        data = bytearray()
        async for chunk in sandbox.download(path):
            data += chunk
            if len(data) > READ_FILE_MAX_BYTES:
                break
        if b"\x00" in data[:8192]:
            text = f"{path} is a binary file; inspect it with run_code instead."
            return ToolOutcome(text, True, "error", excerpt="binary file")
        text = clip(data.decode("utf-8", errors="replace"), self._output_chars)
        if len(data) > READ_FILE_MAX_BYTES:
            text += (
                f"\n[… longer than {READ_FILE_MAX_BYTES:,} bytes; read the rest with run_code …]"
            )
        return ToolOutcome(text, False, "ok", excerpt=f"{len(data):,} bytes")


def _schedule_call(raw_input: Any, min_interval_s: float) -> ToolOutcome:
    try:
        parsed = ScheduleRun.model_validate(raw_input)
    except ValidationError as exc:
        return _invalid(f"Invalid input for schedule_run: {_validation_summary(exc)}")
    text, failed = proposed(parsed, min_interval_s)
    return ToolOutcome(text, failed, "error" if failed else "ok", excerpt=text)


async def _definition_call(raw_input: Any, load: Loader) -> ToolOutcome:
    try:
        parsed = LoadDefinition.model_validate(raw_input)
    except ValidationError as exc:
        return _invalid(f"Invalid input for load_definition: {_validation_summary(exc)}")
    found = await load(parsed.name)
    if found is None:
        return _invalid(f"No definition named {parsed.name!r} in this channel.")
    return ToolOutcome(found, False, "ok", excerpt=f"definition {parsed.name}")


def _note_call(raw_input: Any) -> ToolOutcome:
    try:
        ProposeNote.model_validate(raw_input)
    except ValidationError as exc:
        return _invalid(f"Invalid input for propose_note: {_validation_summary(exc)}")
    text = note_proposed()
    return ToolOutcome(text, False, "ok", excerpt=text)


def _from_sql(answer: SqlAnswer) -> ToolOutcome:
    return ToolOutcome(
        answer.content,
        answer.is_error,
        answer.status,
        duration_s=answer.duration_s,
        excerpt=answer.excerpt,
    )


def _after_restart(outcome: ToolOutcome) -> ToolOutcome:
    return replace(outcome, content=f"{RESTARTED_AS_ASKED}\n{outcome.content}")


def _invalid(message: str) -> ToolOutcome:
    return ToolOutcome(message, True, "invalid", excerpt=message)


def _validation_summary(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "input"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
