"""A thread's analysis as a Jupyter notebook (nbformat 4.5) that reruns it, step by step.

Built from what the store keeps: the runs (questions), the audit of their steps, the files
the thread took in, and the conversation (each step's whole output, its answers). Python
steps become code cells (one kernel, as in the thread), bash and node steps cell magics,
other tools Markdown notes. The notebook is plain JSON: the bot needs no nbformat for it.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.agent.trim import CLEARED_MARK
from bot.sandbox.base import OUT_DIR, UPLOADS_DIR, WORK_DIR
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
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python", "file_extension": ".py", "mimetype": "text/x-python"},
}
_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)):? ?(.*)$")


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
    book.markdown(_files_text(files), "files")
    book.code(SETUP_CODE, "setup", [], executed=False)
    steps: dict[str, list[ToolCallRecord]] = {}
    for call in calls:
        steps.setdefault(call.run_id, []).append(call)
    for n, (question, run, segment) in enumerate(_sections(runs, steps, transcript), 1):
        book.markdown(f"## Question {n}\n\n" + _quoted(question), f"q{n}")
        for s, call in enumerate(steps.get(run.run_id, []) if run else [], 1):
            book.step(call, f"q{n}-{s}")
        book.markdown(_answer_text(segment, run), f"q{n}-answer")
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": METADATA, "cells": book.cells}


@dataclass
class Segment:
    """One question in the conversation: its text, the tool calls made for it, its answer."""

    question: str
    call_ids: set[str] = field(default_factory=set)
    answer: str = ""


@dataclass
class Transcript:
    """What the conversation tells: each call's input and whole output, and the questions."""

    segments: list[Segment]
    inputs: dict[str, dict[str, Any]]
    outputs: dict[str, str]

    @classmethod
    def of(cls, sources: Iterable[Sequence[Mapping[str, Any]]]) -> Transcript:
        """From the archived histories (oldest first) and then the current one: an output
        kept whole anywhere wins over a cleared one; a question seen again (a compaction
        archive holds the turns it replaced) is the same question."""
        found = cls([], {}, {})
        for messages in sources:
            segments = _segments(messages, found)
            # A clearing's archive holds the user turns it replaced, no replies: their
            # outputs are whole, but a question there is told better where it was answered.
            if any(m.get("role") == "assistant" for m in messages):
                for segment in segments:
                    found._merge(segment)
        return found

    def _merge(self, segment: Segment) -> None:
        for seen in self.segments:
            same_calls = segment.call_ids & seen.call_ids
            if same_calls or (not segment.call_ids and seen.question == segment.question):
                seen.call_ids |= segment.call_ids
                seen.answer = segment.answer or seen.answer
                return
        self.segments.append(segment)

    def output(self, call_id: str) -> str | None:
        return self.outputs.get(call_id)


def _segments(messages: Sequence[Mapping[str, Any]], found: Transcript) -> list[Segment]:
    segments: list[Segment] = []
    asking = False  # the last block was the user's text: more text is the same question
    for message in messages:
        user = message.get("role") == "user"
        if not user and segments:
            _answer(segments[-1], message)
        for block in _blocks(message):
            kind = block.get("type")
            if user and kind == "text":
                if asking:
                    segments[-1].question = block.get("text", "")
                else:
                    segments.append(Segment(block.get("text", "")))
                asking = True
                continue
            asking = False
            if kind == "tool_result":
                _keep_output(found, block)
            elif kind == "tool_use" and segments:
                segments[-1].call_ids.add(str(block.get("id", "")))
                found.inputs[str(block.get("id", ""))] = dict(block.get("input") or {})
    return segments


def _answer(segment: Segment, message: Mapping[str, Any]) -> None:
    """A reply's text is the answer so far, unless the reply goes on with a tool call (its
    text introduces a step): the answer is the text of the question's last reply."""
    content = _blocks(message)
    if any(b.get("type") == "tool_use" for b in content):
        segment.answer = ""
        return
    said = [b.get("text", "").strip() for b in content if b.get("type") == "text"]
    segment.answer = "\n\n".join(t for t in said if t) or segment.answer


def _keep_output(found: Transcript, block: Mapping[str, Any]) -> None:
    content = block.get("content")
    if isinstance(content, list):  # text blocks, as the API also takes them
        content = "".join(b.get("text", "") for b in content if b.get("type") == "text")
    call_id = str(block.get("tool_use_id", ""))
    if isinstance(content, str) and not content.startswith(CLEARED_MARK):
        found.outputs[call_id] = content


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, Mapping)]


def _sections(
    runs: Sequence[RunRecord], steps: Mapping[str, list[ToolCallRecord]], transcript: Transcript
) -> list[tuple[str, RunRecord | None, Segment | None]]:
    """Each question with its run and its place in the conversation, in the order asked. A
    question the conversation holds and the runs do not (its run was not given) is kept when
    it was answered; a run the conversation lost (compacted away) comes last."""
    matched: dict[int, RunRecord] = {}
    unmatched: list[RunRecord] = []
    for run in sorted(runs, key=lambda r: r.started_at):
        ids = {c.call_id for c in steps.get(run.run_id, [])}
        at = next(
            (
                i
                for i, s in enumerate(transcript.segments)
                if i not in matched and (ids & s.call_ids or (s.question == run.question))
            ),
            None,
        )
        if at is None:
            unmatched.append(run)
        else:
            matched[at] = run
    sections: list[tuple[str, RunRecord | None, Segment | None]] = []
    for i, segment in enumerate(transcript.segments):
        if run := matched.get(i):
            sections.append((run.question, run, segment))
        elif segment.answer:
            sections.append((segment.question, None, segment))
    return sections + [(run.question, run, None) for run in unmatched]


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
        self.cells.append(
            {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": _lines(text)}
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
                "source": _lines(source),
                "outputs": outputs,
            }
        )

    def step(self, call: ToolCallRecord, cell_id: str) -> None:
        """A run_code step as a cell, another tool's as a note (a check of a command shown
        in its detached step's cell: nothing)."""
        given = self._transcript.inputs.get(call.call_id, {})
        if call.tool == "check_command" and given.get("command_id") in self._started:
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
        outputs = _outputs(shown, content, kernel=call.language == "python" and not detached)
        outputs += [_image(png) for png in self._images.get(call.call_id, ())]
        status = {"call_id": call.call_id, "status": shown.status, "exit_code": shown.exit_code}
        status["output"] = "excerpt" if content is None else "whole"  # cleared, lost: excerpt
        if detached:
            status["detached"] = True
        self.code(magic + call.code, cell_id, outputs, metadata={"bot": status})


def _command_id(call: ToolCallRecord) -> str:
    """The command a detached step started ("command <id>", its audit excerpt says)."""
    return call.excerpt.removeprefix("command ") if call.excerpt.startswith("command ") else ""


def _outputs(call: ToolCallRecord, content: str | None, *, kernel: bool) -> list[dict[str, Any]]:
    """The step's printed streams as the bot saw them; an exception a kernel step raised as
    an `error` output; the audit's excerpt when the whole output is gone; a result that is
    not a run's (a note, an error before it ran) as one stream."""
    streams = _streams(content) if content is not None else None
    if streams is None:  # a note rather than a run's output ("Started in the background…")
        said = (call.excerpt if content is None else content).strip()
        name = "stdout" if call.status in ("ok", "running") else "stderr"
        return [_stream(name, said + "\n")] if said else []
    stdout, stderr = streams
    outputs = [_stream("stdout", stdout)] if stdout else []
    error = _error(stderr) if kernel and call.status == "error" else None
    if error:
        outputs.append(error)
    elif stderr:
        outputs.append(_stream("stderr", stderr))
    if call.status not in ("ok", "running", "error") and not stderr:
        outputs.append(_stream("stderr", f"[{call.status}]\n"))
    return outputs


def _streams(content: str) -> tuple[str, str] | None:
    """stdout and stderr out of a run_code result ("status: …", then "--- stdout ---" and
    "--- stderr ---" sections, or "--- stdout: empty ---"); None when it has none."""
    at = content.find("\n--- stdout")
    if at < 0:
        return None
    rest = content[at + 1 :]
    empty_out, empty_err = "--- stdout: empty ---\n", "\n--- stderr: empty ---"
    if rest.startswith(empty_out):
        rest = "\n" + rest[len(empty_out) :]
        stdout = ""
    elif rest.startswith("--- stdout ---\n"):
        rest = rest[len("--- stdout ---\n") :]
        if rest.endswith(empty_err):
            return rest[: -len(empty_err)], ""
        cut = rest.find("\n--- stderr ---\n")
        if cut < 0:
            return None
        stdout, rest = rest[:cut], rest[cut:]
    else:
        return None
    if rest == empty_err:
        return stdout, ""
    if rest.startswith("\n--- stderr ---\n"):
        return stdout, rest[len("\n--- stderr ---\n") :]
    return None


def _error(stderr: str) -> dict[str, Any] | None:
    """A traceback's last line ("NameError: name 'x' is not defined") as an error output."""
    lines = stderr.rstrip("\n").splitlines()
    found = _ERROR_LINE.match(lines[-1].strip()) if lines else None
    if not found:
        return None
    return {
        "output_type": "error",
        "ename": found.group(1),
        "evalue": found.group(2),
        "traceback": lines,
    }


def _stream(name: str, text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": name, "text": _lines(text)}


def _image(png: bytes) -> dict[str, Any]:
    return {
        "output_type": "display_data",
        "data": {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": ["<Figure>"]},
        "metadata": {},
    }


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


def _answer_text(segment: Segment | None, run: RunRecord | None) -> str:
    if segment and segment.answer.strip():
        return "**Answer:**\n\n" + segment.answer.strip()
    outcome = run.outcome if run and run.outcome else "unknown"
    return f"_No answer was recorded (the run's outcome: {outcome})._"


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().splitlines())


def _lines(text: str) -> list[str]:
    """nbformat's multiline string: the lines, each keeping its newline."""
    return text.splitlines(keepends=True)
