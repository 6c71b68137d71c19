"""The terminal is a front end like Slack: its runs are stored, audited and budgeted, and
`ask --session NAME` continues a session with its history, its files and its sandbox."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.support import POPULATION_CSV, model_in_thread

UPLOAD = "/buddy/work/uploads/population_2000_2010_2020.csv"
PROMPT_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
LINES = "The file has {} lines.".format(POPULATION_CSV.read_bytes().count(b"\n"))


def analyst(req: Any) -> Reply:
    """Counts the file's lines for the first question; for any other question it answers
    with the questions it can see in the conversation, so a test can tell what it was sent."""
    results = req.tool_results()
    if results:
        count = re.findall(r"^\d+$", results[-1].text, re.MULTILINE)[-1]
        return Reply([text(f"The file has {count} lines.")])
    asked = [
        b["text"]
        for m in req.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "text"
    ]
    if asked[-1].startswith("count"):
        return Reply([tool_use("run_code", {"language": "bash", "code": f"wc -l < {UPLOAD}"})])
    return Reply([text("I was asked: " + " | ".join(asked))])


@pytest.fixture
def model(sandbox_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with model_in_thread(analyst) as fake:
        monkeypatch.chdir(tmp_path)
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test-secret",
            "ANTHROPIC_BASE_URL": fake.base_url,
            "SANDBOX_BACKEND": "local",
            "SANDBOX_ROOT": str(sandbox_root),
            "MODEL_RETRY_DELAY_S": "0.01",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield fake


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def sandboxes(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_a_named_session_continues_with_its_history_file_and_sandbox(
    model: FakeAnthropic, sandbox_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, "ask", "--csv", str(POPULATION_CSV), "--session", "pop", "--keep",
                    "count the rows")  # fmt: skip
    assert code == 0, out
    assert "New session pop" in out and LINES in out
    assert "\n1 figure, traced to step 1\n" in out  # the line count, printed by the step
    assert "Kept sandbox" in out
    kept = sandboxes(sandbox_root)
    assert len(kept) == 1

    code, out = run(capsys, "ask", "--session", "pop", "what did I ask before?")
    assert code == 0, out
    assert "Continuing session pop" in out
    assert "I was asked: count the rows | what did I ask before?" in out
    # The same sandbox, and the file is still described to the model.
    assert sandboxes(sandbox_root) == [] and len(model.requests) == 3
    assert UPLOAD in model.requests[-1].system_text
    assert "taken in again" not in json.dumps(model.requests[-1].messages)

    code, out = run(capsys, "sessions")
    line = next(ln for ln in out.splitlines() if "terminal:pop" in ln)
    assert line.startswith("terminal") and " idle " in line

    code, out = run(capsys, "sessions", "export", "pop")
    *records, conversation = [json.loads(ln) for ln in out.splitlines()]
    calls = [r for r in records if "tool" in r]
    assert code == 0 and [c["code"] for c in calls] == [f"wc -l < {UPLOAD}"]
    first, second = [r["run"] for r in records if "run" in r]
    assert (first["question"], second["question"]) == ("count the rows", "what did I ask before?")
    assert [(f["step"], f["call_id"]) for f in first["figures"]] == [(1, calls[0]["call_id"])]
    assert second["figures"] == []  # its answer has no figures
    assert [m["role"] for m in conversation["history"]][:2] == ["user", "assistant"]


def test_a_session_whose_sandbox_is_gone_gets_its_files_again(
    model: FakeAnthropic, sandbox_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, "ask", "--csv", str(POPULATION_CSV), "--session", "again",
                    "count the rows")  # fmt: skip
    assert code == 0 and sandboxes(sandbox_root) == []  # destroyed without --keep
    code, out = run(capsys, "ask", "--session", "again", "count the rows again")
    assert code == 0, out
    assert LINES in out  # read back from its path into a fresh sandbox
    assert "taken in again" in model.requests[-2].last_user_text  # told with the question


def test_every_terminal_run_is_stored_with_its_cost(
    model: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, "ask", "--session", "costs", "hello")
    assert code == 0, out
    db = sqlite3.connect(tmp_path / "sessions.db")
    runs = db.execute("SELECT question, outcome, user FROM runs").fetchall()
    cost = db.execute("SELECT SUM(cost_usd) FROM turns").fetchone()[0]
    assert runs == [("hello", "finished", runs[0][2])] and runs[0][2].startswith("terminal:")
    assert cost > 0


def test_a_spent_budget_stops_the_terminal_with_a_reason(
    model: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MAX_COST_USD_PER_THREAD", "0.000001")
    assert run(capsys, "ask", "--session", "cheap", "hello")[0] == 0
    code, out = run(capsys, "ask", "--session", "cheap", "hello again")
    assert code == 1 and "No budget left" in out and "this session's" in out
    assert len(model.requests) == 1  # the second question never reached the model


def test_sessions_lists_the_latest_prompt_against_the_models_window(
    model: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    model.context_window = 40_000  # what the Models API reports, and the fake enforces
    code, out = run(capsys, "ask", "--csv", str(POPULATION_CSV), "--session", "big",
                    "count the rows")  # fmt: skip
    assert code == 0, out
    usage = model.replies[-1]["usage"]  # the latest of the run's two turns
    prompt = sum(usage[k] for k in PROMPT_FIELDS)
    assert prompt > sum(model.replies[0]["usage"][k] for k in PROMPT_FIELDS)
    code, out = run(capsys, "sessions")
    line = next(ln for ln in out.splitlines() if "terminal:big" in ln)
    share = round(100 * prompt / 40_000)
    assert line.endswith(f"prompt {prompt:,} of 40,000 tokens ({share}%)"), line
