"""A step's result, as the bot formatted it for the model, turned into notebook outputs:
streams, an exception, charts.

The result of a run_code call is "status: …" lines, then "--- stdout ---" and
"--- stderr ---" sections (or "--- stdout: empty ---"), as `Toolbox` writes it.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from bot.store.base import ToolCallRecord

_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)):? ?(.*)$")


def step_outputs(
    call: ToolCallRecord, content: str | None, *, kernel: bool
) -> list[dict[str, Any]]:
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
    return {"output_type": "stream", "name": name, "text": lines(text)}


def image(png: bytes) -> dict[str, Any]:
    return {
        "output_type": "display_data",
        "data": {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": ["<Figure>"]},
        "metadata": {},
    }


def lines(text: str) -> list[str]:
    """nbformat's multiline string: the lines, each keeping its newline."""
    return text.splitlines(keepends=True)
