"""A thread's analysis as a Jupyter notebook (nbformat 4.5) that reruns it, step by step.

Built from what the store keeps: the runs (questions), the audit of their steps, the files
the thread took in, and the conversation (each step's whole output, its answers). Python
steps become code cells (one kernel, as in the thread), bash and node steps cell magics,
other tools Markdown notes. The notebook is plain JSON: the bot needs no nbformat for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bot.results.markdown import without_html, without_images, without_math
from bot.sandbox.base import OUT_DIR, UPLOADS_DIR, WORK_DIR
from bot.sessions.notebook_outputs import image, lines, step_outputs
from bot.sessions.notebook_transcript import Transcript
from bot.store.base import FileRecord, RunRecord, ToolCallRecord

Cell = dict[str, Any]
# A cell's first line that runs the rest as another program (IPython cell magics).
MAGICS = {"bash": "%%bash\n", "node": "%%script node\n"}
DETACHED_PYTHON = "%%script python3\n"  # a detached Python step ran outside the kernel
SETUP_CODE = (
    "import os\n"
    "\n"
    "# The steps ran with the work folder as the current one, writing outputs into out/.\n"
    f"os.makedirs({OUT_DIR!r}, exist_ok=True)\n"
    f"os.chdir({WORK_DIR!r})"
)
WRITTEN_BY_A_MODEL = (
    "> **Read the code before you run it.** The code in this notebook was written by a model "
    "and ran in a sandbox, cut off from your machine; run here, it runs as you, with your "
    "files and network. Images, HTML and math in the text are shown as plain text.\n\n"
)
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python", "file_extension": ".py", "mimetype": "text/x-python"},
}


def notebook(
    runs: Sequence[RunRecord],
    calls: Sequence[ToolCallRecord],
    history: Sequence[Mapping[str, Any]],
    files: Sequence[FileRecord],
    *,
    archived: Sequence[Mapping[str, Any]] = (),
    images: Mapping[str, Sequence[bytes]] | None = None,
) -> dict[str, Any]:
    """The notebook (nbformat 4.5, as a JSON-able dict) of a thread: a files cell, a setup
    cell, then per question its steps with their outputs (`images`: a step's charts as PNG
    bytes, by call id) and its answer. `archived`: the store's archived history, where the
    outputs clearing replaced are found."""
    transcript = Transcript.of([*(a.get("messages", []) for a in archived), history])
    book = _Book(transcript, calls, images or {})
    book.markdown(WRITTEN_BY_A_MODEL + _files_text(files), "files")
    book.code(SETUP_CODE, "setup", [], executed=False)
    steps: dict[str, list[ToolCallRecord]] = {}
    for call in calls:
        steps.setdefault(call.run_id, []).append(call)
    for n, (question, run, answer) in enumerate(_sections(runs, steps, transcript), 1):
        book.markdown(f"## Question {n}\n\n" + _quoted(question), f"q{n}")
        for s, call in enumerate(steps.get(run.run_id, []) if run else [], 1):
            book.step(call, f"q{n}-{s}")
        book.markdown(_answer_text(answer, run), f"q{n}-answer")
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": METADATA, "cells": book.cells}


def _sections(
    runs: Sequence[RunRecord], steps: Mapping[str, list[ToolCallRecord]], transcript: Transcript
) -> list[tuple[str, RunRecord | None, str]]:
    """Each question, its run and its answer, in the order asked. A run's place is where the
    conversation made its calls (a compaction within a run splits it in two: the answer is
    the later part's), or else where its question was asked. A question the conversation
    holds and the runs do not is kept when it was answered; a run the conversation lost
    comes last."""
    segments = transcript.segments
    owner: dict[int, RunRecord] = {}
    lost: list[RunRecord] = []
    for run in sorted(runs, key=lambda r: r.started_at):
        ids = {c.call_id for c in steps.get(run.run_id, [])}
        mine = [i for i, s in enumerate(segments) if i not in owner and ids & s.call_ids]
        if not mine:  # no steps: where its question was asked
            asked = (i for i, s in enumerate(segments) if s.question == run.question)
            mine = [i for i in asked if i not in owner][:1]
        owner.update((i, run) for i in mine)
        if not mine:
            lost.append(run)
    sections: list[tuple[str, RunRecord | None, str]] = []
    placed: set[str] = set()
    for i, segment in enumerate(segments):
        owned = owner.get(i)
        if owned is None:
            if segment.answer:
                sections.append((segment.question, None, segment.answer))
        elif owned.run_id not in placed:
            placed.add(owned.run_id)
            parts = [segments[k].answer for k in sorted(owner) if owner[k] is owned]
            sections.append((owned.question, owned, next((a for a in reversed(parts) if a), "")))
    return sections + [(run.question, run, "") for run in lost]


class _Book:
    """The cells so far, numbering the steps that ran; steps read their outputs from the
    transcript, a detached one from its command's last check."""

    def __init__(
        self,
        transcript: Transcript,
        calls: Sequence[ToolCallRecord],
        images: Mapping[str, Sequence[bytes]],
    ) -> None:
        self.cells: list[Cell] = []
        self._count = 0
        self._transcript, self._images = transcript, images
        # A detached command's last check: its outputs are the detached step's, as a rerun
        # of the cell (which waits for it) prints them.
        self._checks: dict[str, ToolCallRecord] = {}
        for call in calls:
            if call.tool == "check_command":
                command = str(transcript.inputs.get(call.call_id, {}).get("command_id", ""))
                self._checks[command] = call
        self._started = {_command_id(c) for c in calls if c.tool == "run_code"} - {""}

    def markdown(self, text: str, cell_id: str) -> None:
        """A Markdown cell of `text`, which the model, the sandbox or a user wrote: shown
        as words, with nothing in it fetched or run when the notebook is opened."""
        safe = without_math(without_html(without_images(text, _image_note)))
        self.cells.append(
            {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": lines(safe)}
        )

    def code(
        self,
        source: str,
        cell_id: str,
        outputs: list[dict[str, Any]],
        *,
        executed: bool = True,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        count = None
        if executed:
            self._count += 1
            count = self._count
        self.cells.append(
            {
                "cell_type": "code",
                "id": cell_id,
                "metadata": metadata or {},
                "execution_count": count,
                "source": lines(source),
                "outputs": outputs,
            }
        )

    def step(self, call: ToolCallRecord, cell_id: str) -> None:
        """A run_code step as a cell, another tool's as a note (a check of a command shown
        in its detached step's cell: nothing)."""
        given = self._transcript.inputs.get(call.call_id, {})
        if call.tool == "check_command" and given.get("command_id") in self._started:
            return
        if call.tool == "run_sql" and call.status == "ok":
            self.markdown(f"_Step: a query, {call.excerpt}_", cell_id + "-query")
            self.code(query_cell(given), cell_id, [], executed=False, metadata={"bot": {
                "call_id": call.call_id, "status": call.status}})  # fmt: skip
            return
        if call.tool != "run_code" or call.language not in ("python", *MAGICS):
            self.markdown(_tool_note(call, self._transcript.output(call.call_id)), cell_id)
            return
        if given.get("restart"):
            note = "_The kernel was restarted before this step: a clean state._"
            self.markdown(note, cell_id + "-restart")
        detached = bool(given.get("detached"))
        magic = MAGICS.get(call.language or "", "")
        if detached and call.language == "python":
            magic = DETACHED_PYTHON
        shown = self._checks.get(_command_id(call), call) if detached else call
        content = self._transcript.output(shown.call_id)
        outputs = step_outputs(shown, content, kernel=call.language == "python" and not detached)
        outputs += [image(png) for png in self._images.get(call.call_id, ())]
        status = {"call_id": call.call_id, "status": shown.status, "exit_code": shown.exit_code}
        status["output"] = "excerpt" if content is None else "whole"  # cleared, lost: excerpt
        if detached:
            status["detached"] = True
        self.code(magic + call.code, cell_id, outputs, metadata={"bot": status})


def url_variable(connection: str) -> str:
    """The environment variable a notebook reads a connection's URL from."""
    return "SQL_URL_" + re.sub(r"[^A-Za-z0-9]", "_", connection).upper()


def query_cell(given: Mapping[str, Any]) -> str:
    """A cell that reruns a query into the file it became. The URL, password and all, comes
    from the environment of whoever runs it: never from the notebook."""
    connection, save_as = str(given.get("connection", "")), str(given.get("save_as", "query"))
    path = f"{WORK_DIR}/queries/{save_as}.csv"
    return "\n".join(
        [
            f"# Rerun the query on the connection {connection!r}. Set {url_variable(connection)}",
            "# to its SQLAlchemy URL (with the password) before running this cell.",
            "import csv, os, pathlib",
            "import sqlalchemy",
            "",
            f"QUERY = {str(given.get('sql', ''))!r}",
            f"engine = sqlalchemy.create_engine(os.environ[{url_variable(connection)!r}])",
            f"pathlib.Path({path!r}).parent.mkdir(parents=True, exist_ok=True)",
            f"with engine.connect() as conn, open({path!r}, 'w', newline='') as out:",
            "    result = conn.exec_driver_sql(QUERY)",
            "    writer = csv.writer(out)",
            "    writer.writerow(result.keys())",
            "    writer.writerows(result)",
        ]
    )


def _image_note(alt: str) -> str:
    return f"_[an image left out{': ' + alt if alt else ''}]_"


def _command_id(call: ToolCallRecord) -> str:
    """The command a detached step started ("command <id>", its audit excerpt says)."""
    return call.excerpt.removeprefix("command ") if call.excerpt.startswith("command ") else ""


def _tool_note(call: ToolCallRecord, content: str | None) -> str:
    said = (content if content is not None else call.excerpt).strip()
    text = f"_Step: `{call.tool}`" + (f" ({call.code})" if call.code else "") + "_"
    return text + (f"\n\n```\n{said}\n```" if said else "")


def _files_text(files: Sequence[FileRecord]) -> str:
    if not files:
        return "## Files\n\nThis notebook reads no uploaded files."
    lines = [f"- `{f.name}` ({f.size:,} bytes) at `{f.sandbox_path}`" for f in files]
    return (
        "## Files\n\n"
        f"This notebook expects the thread's files in `{UPLOADS_DIR}/`; "
        "put a copy of each at its path before running it:\n\n" + "\n".join(lines) + "\n\n"
        f"Its steps ran in `{WORK_DIR}`, writing charts and other outputs to `{OUT_DIR}/`."
    )


def _answer_text(answer: str, run: RunRecord | None) -> str:
    if answer.strip():
        return "**Answer:**\n\n" + answer.strip()
    outcome = run.outcome if run and run.outcome else "unknown"
    return f"_No answer was recorded (the run's outcome: {outcome})._"


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().splitlines())
