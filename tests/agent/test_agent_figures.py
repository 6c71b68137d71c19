"""An answer's figures are traced to the steps that printed them before it is posted: an
untraced figure goes back to the model once, and the run says what holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.agent.checking import sources
from bot.agent.endings import LAST_TURN_NOTE, OWN_NOTES
from bot.agent.tool_calls import TRUNCATED_CALL_NOTE
from bot.run_events import RunFinished, TextEmitted
from bot.trace import Source, summary, trace
from tests.agent.test_agent_loop import run_python, session_with
from tests.fakes.anthropic import Reply, text
from tests.support import Recorder

TOTAL = "print('total', 1402617695)\nprint('grew', 3214567)"
INVENTED = "The total is 1,402,617,695; 3.2 million more than before, up 41%."
CORRECTION = (
    "These figures appear in no step's output: 41% — correct them, or compute them with a step."
)


def corrections(req: Any) -> list[str]:
    """The correction messages the model was sent, in the whole conversation."""
    return [
        b["text"]
        for m in req.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "text" and b["text"].startswith("These figures")
    ]


async def test_an_invented_figure_gets_one_correction_and_the_fix_is_all_traced(
    sandbox_root: Path,
) -> None:
    def script(req):
        match req.turn:
            case 0:
                return Reply([run_python(TOTAL)])
            case 1:
                return Reply([text(INVENTED)])
            case 2:
                assert req.last_user_text == CORRECTION
                return Reply([text("I will compute the share."), run_python("print(41.2)")])
            case _:
                return Reply([text(INVENTED.replace("41%", "41.2%"))])

    view = Recorder()
    async with session_with(script, sandbox_root) as (session, fake):
        result = await session.ask("How many people?", view)
    assert isinstance(result, RunFinished) and len(fake.requests) == 4
    assert corrections(fake.requests[-1]) == [CORRECTION]
    assert result.figures_note == "3 figures, all traced to steps 1–2"
    assert [(t.figure.text, t.step) for t in result.figures] == [
        ("1,402,617,695", 1), ("3.2 million", 1), ("41.2%", 2)
    ]  # fmt: skip
    assert result.figures[0].line == "total 1402617695"
    # The rejected answer was never shown: only the turn with a step said anything.
    assert [e.text for e in view.of(TextEmitted)] == ["I will compute the share."]
    assert view.of(RunFinished) == [result]


async def test_a_figure_left_untraced_is_corrected_once_and_the_note_says_so(
    sandbox_root: Path,
) -> None:
    def script(req):
        return Reply([run_python(TOTAL)]) if req.turn == 0 else Reply([text(INVENTED)])

    async with session_with(script, sandbox_root) as (session, fake):
        result = await session.ask("How many people?", Recorder())
    assert isinstance(result, RunFinished) and result.answer == INVENTED
    assert len(fake.requests) == 3  # the step, the answer, the answer again: no second note
    assert corrections(fake.requests[-1]) == [CORRECTION]
    assert result.figures_note == "2 of 3 figures traced; not found: 41%"
    assert [t.step for t in result.figures] == [1, 1, None]


async def test_an_answer_all_traced_gets_no_correction(sandbox_root: Path) -> None:
    answer = "The total is **1,402,617,695**, 3.2 million more than in 2000."

    def script(req):
        return Reply([run_python(TOTAL)]) if req.turn == 0 else Reply([text(answer)])

    async with session_with(script, sandbox_root) as (session, fake):
        result = await session.ask("How many people?", Recorder())
    assert isinstance(result, RunFinished) and len(fake.requests) == 2
    assert corrections(fake.requests[-1]) == []
    assert result.figures_note == "2 figures, all traced to step 1"


async def test_figures_in_a_markdown_table_are_traced(sandbox_root: Path) -> None:
    rows = [{"country": "India", "increase": 342000000}, {"country": "China", "increase": 150000}]
    table = "| Country | Increase |\n|---|---:|\n| India | 342,000,000 | \n| China | 151,234 |"
    sent: list[str] = []

    def script(req):
        if req.turn == 0:
            return Reply([run_python(f"print({json.dumps(rows)!r})")])
        sent.append(req.last_user_text)
        return Reply([text(table)])

    async with session_with(script, sandbox_root) as (session, _):
        result = await session.ask("Growth by country?", Recorder())
    assert isinstance(result, RunFinished)
    assert sent[1] == CORRECTION.replace("41%", "151,234")
    assert result.figures_note == "1 of 2 figures traced; not found: 151,234"


async def test_the_questions_figures_are_not_counted(sandbox_root: Path) -> None:
    answer = "Yes: the total, 1,402,617,695, is above 5,000,000 and far above 777."

    def script(req):
        return Reply([run_python(TOTAL)]) if req.turn == 0 else Reply([text(answer)])

    async with session_with(script, sandbox_root) as (session, fake):
        result = await session.ask("Is the total above 5,000,000? Or 777?", Recorder())
    assert isinstance(result, RunFinished) and len(fake.requests) == 2
    assert [t.figure.text for t in result.figures] == ["1,402,617,695"]
    assert result.figures_note == "1 figure, traced to step 1"


async def test_a_follow_up_is_traced_to_the_previous_questions_steps(sandbox_root: Path) -> None:
    def script(req):
        if req.turn == 0:
            return Reply([run_python("print('rows', 1234)"), run_python(TOTAL)])
        if req.turn == 1:
            return Reply([text("The total is 1,402,617,695.")])
        return Reply([text("As before: 1,402,617,695 people, and 1,234 rows.")])

    async with session_with(script, sandbox_root) as (session, fake):
        await session.ask("How many people?", Recorder())
        result = await session.ask("Say it again", Recorder())
    assert isinstance(result, RunFinished) and len(fake.requests) == 3  # no correction
    assert result.figures_note == "2 figures, all traced to steps 1–2 of the previous question"
    assert [(t.step, t.earlier) for t in result.figures] == [(2, 1), (1, 1)]


async def test_a_correction_past_the_turn_limit_is_skipped(sandbox_root: Path) -> None:
    def script(req):
        return Reply([run_python(TOTAL)]) if req.turn == 0 else Reply([text(INVENTED)])

    async with session_with(script, sandbox_root, max_turns=2) as (session, fake):
        result = await session.ask("How many people?", Recorder())
    assert isinstance(result, RunFinished) and len(fake.requests) == 2
    assert corrections(fake.requests[-1]) == []
    assert result.figures_note == "2 of 3 figures traced; not found: 41%"


async def test_a_correction_that_leaves_one_turn_says_it_is_the_last(sandbox_root: Path) -> None:
    def script(req):
        return Reply([run_python(TOTAL)]) if req.turn == 0 else Reply([text(INVENTED)])

    async with session_with(script, sandbox_root, max_turns=3) as (session, fake):
        result = await session.ask("How many people?", Recorder())
    assert isinstance(result, RunFinished) and len(fake.requests) == 3
    assert "last turn" in fake.requests[-1].last_user_text
    assert result.stop == "end_turn"


def test_earlier_questions_steps_are_numbered_in_their_own_run() -> None:
    def call(call_id: str) -> dict:
        return {"type": "tool_use", "id": call_id, "name": "run_code", "input": {"code": "x"}}

    def result(call_id: str, output: str) -> dict:
        return {"type": "tool_result", "tool_use_id": call_id, "content": output}

    history = [
        {"role": "user", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "content": [call("a1"), call("a2")]},
        {"role": "user", "content": [result("a1", "11"), result("a2", "12")]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
        {"role": "assistant", "content": [call("b1")]},
        {"role": "user", "content": [result("b1", "21")]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": [{"type": "text", "text": "third"}]},
        {"role": "assistant", "content": [call("c1")]},
        {"role": "user", "content": [result("c1", "31")]},
    ]
    found = [(s.step, s.earlier, s.call_id, s.output) for s in sources(history, ["c1"])]
    assert found == [(1, 0, "c1", "31"), (1, 1, "b1", "21"), (1, 2, "a1", "11"),
                     (2, 2, "a2", "12")]  # fmt: skip
    # The bot's own notes start no question, and a call that never ran is no step.
    second = [
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
        {"role": "assistant", "content": [call("b0"), call("b1")]},
        {"role": "user", "content": [result("b0", TRUNCATED_CALL_NOTE),
                                     result("b1", "21"), {"type": "text", "text": LAST_TURN_NOTE}]},
        {"role": "assistant", "content": [{"type": "text", "text": "4,242"}]},
        {"role": "user", "content": [{"type": "text", "text": CORRECTION}]},
        {"role": "assistant", "content": [call("b2")]},
        {"role": "user", "content": [result("b2", "22")]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]  # fmt: skip
    history = history[:4] + second + history[8:]
    found = [(s.step, s.earlier, s.call_id) for s in sources(history, ["c1"], OWN_NOTES)]
    assert found[1:3] == [(1, 1, "b1"), (2, 1, "b2")]


def test_the_note_names_each_questions_steps() -> None:
    steps = [Source(3, "41.2"), Source(1, "1234", earlier=1), Source(2, "5678", earlier=2)]
    traced = trace("41.2% of 1,234 and 5,678", steps)
    assert summary(traced) == (
        "3 figures, all traced to step 3 and to step 1 of the previous question "
        "and to step 2 of the question 2 before this one"
    )
    # This run's own step wins over an earlier question's that printed the same.
    again = trace("1,234", [Source(1, "1234", earlier=1), Source(4, "1234")])
    assert [(t.step, t.earlier) for t in again] == [(4, 0)]
