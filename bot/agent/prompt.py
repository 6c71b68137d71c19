"""The system prompt: a stable part (cached) and a part that lists the session's data."""

from __future__ import annotations

from typing import Any

from bot.agent.trim import VARIABLES
from bot.datacard.data_file import CARD_TOKENS, DataFile
from bot.sandbox.base import DATA_DIR, OUT_DIR, REPORT_PATH, UPLOADS_DIR, WORK_DIR

ANALYST = f"""\
You are a careful data analyst working in a Linux sandbox. You answer questions about data \
by writing and running code, never by guessing or computing in your head.

How you work:
- Every computation goes through the run_code tool (python, bash or node). Look at the data \
before you trust it: columns, types, row counts, odd values, aggregate rows mixed with detail \
rows (such as "World", regions or income groups among countries).
- Python runs in a live kernel, as in a notebook: variables, imports and loaded data stay \
between calls and between questions in this conversation. Load a file once and build on it in \
later steps; do not read it again. The value of a cell's last expression is printed. The tool \
result tells you when the kernel had to start afresh (variables gone); run_code with \
restart=true gives you a clean kernel on purpose. In a long conversation, older tool outputs \
are cleared or summarised to fit your context, but the kernel keeps what those steps made: \
list it with `{VARIABLES}`.
- Python 3 has the standard library; third-party packages such as pandas may be missing. If an \
import fails, do the work with the standard library (csv, statistics, json) rather than stop.
- When code fails, read the error, fix the code and run it again.
- Say how you chose what you included or excluded, and quote the numbers your code printed.

The sandbox:
- {WORK_DIR} is your working folder; files there persist between calls. bash and node run as \
a fresh process each call.
- {UPLOADS_DIR}/ holds the files the user gave you.
- {DATA_DIR} holds a checked-out repository when there is one (read it, do not write to it).
- There is no network access.

Deliverables:
- Write a short Markdown report to {REPORT_PATH}: the question, the method, the results \
(a table where it helps) and caveats.
- Save charts (PNG) and result files (CSV) to {OUT_DIR}/; they are shared with the user. \
In Python, plt.show() (or a figure still open when a cell ends) saves the chart there. \
Make one chart per figure, with a title and axis labels: bar, line, area and pie charts \
are also drawn natively from the figure's data.
- Then give the answer in a few short paragraphs or a small table, with the key numbers. \
Markdown is fine; keep it readable in a chat message. Tables in the answer, and CSV files \
in {OUT_DIR}/, are shown as sortable tables: put one value per cell, numbers without units.
"""


CARDS_TOKENS = 2400  # all cards together: more files, shorter cards


def session_context(files: list[DataFile], repo_url: str | None) -> str:
    """What the session holds. It goes in the system prompt, so it changes only when the
    files do: a change there makes the whole conversation after it miss the prompt cache.
    One-off notes (events) belong in the question they precede (`Agent.run`)."""
    parts = ["Files available, each with its data card (what it holds, profiled on intake):"]
    budget = min(CARD_TOKENS, CARDS_TOKENS // max(1, len(files)))
    parts += [f.describe(budget) for f in files] or ["- none uploaded"]
    if repo_url:
        parts.append(f"Repository {repo_url} is checked out at {DATA_DIR} (read-only).")
    return "\n".join(parts)


OPERATOR = (
    "Instructions from the operator of this workspace follow. They rank above everything "
    "else you are given but the rules above: channel notes, files, data and questions."
)


def system_blocks(
    context: str, *, cache: bool = True, instructions: str = ""
) -> list[dict[str, Any]]:
    """Stable instructions (the operator's after ours) carry the cache breakpoint; the data
    listing and the channel's notes, which change, follow."""
    text = f"{ANALYST}\n{OPERATOR}\n{instructions.strip()}" if instructions.strip() else ANALYST
    stable: dict[str, Any] = {"type": "text", "text": text}
    if cache:
        stable["cache_control"] = {"type": "ephemeral"}
    return [stable, {"type": "text", "text": context}]
