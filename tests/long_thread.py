"""A scripted analyst for long threads: question n runs one step that prints about 8 k
characters and a figure, then answers with that figure. It summarises faithfully when the
bot asks it to, and recalls an earlier figure only if the prompt it is sent still holds it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.agent import compact
from tests.fakes.anthropic import ModelRequest, Reply, http_error, text, tool_use
from tests.fakes.anthropic.blocks import as_blocks

ANSWER = re.compile(r"A(\d+): the total is ([\d,]+)\.")
RECALL = re.compile(r"what was the total at question (\d+)\?")
QUESTION = re.compile(r"(?:^|Question: )Q(\d+):", re.M)  # a question, or one quoted back
TOO_LONG = "prompt is too long: 250000 tokens > 200000 maximum"
GO_ON = "Go on with the latest question"  # the bot's note after it compacted within a run
DONE = 10**6  # steps: the summary holds what they found


def figure(n: int) -> str:
    return f"{1_000_003 * n:,}"


def question(n: int) -> str:
    return f"Q{n}: what is the total for part {n}?"


def recall(n: int, of: int) -> str:
    return f"Q{n}: what was the total at question {of}?"


@dataclass
class Analyst:
    answer_chars: int = 0  # padding on each answer, to make the kept text grow
    steps: int = 1  # steps per question
    # question → how many of its next requests are refused as too long
    too_long: dict[int, int] = field(default_factory=dict)
    summaries: int = 0

    def __call__(self, req: ModelRequest) -> Any:
        if req.system_text == compact.SYSTEM:
            self.summaries += 1
            return Reply([text(summary_of(prompt_text(req)))])
        n = current_question(req)
        if self.too_long.get(n):
            self.too_long[n] -= 1
            return http_error(400, message=TOO_LONG)
        wanted = RECALL.search(last_question_text(req))
        if wanted:
            found = dict(ANSWER.findall(prompt_text(req)))
            known = found.get(wanted.group(1))
            reply = f"At question {wanted.group(1)} the total was {known}." if known else "gone"
            return Reply([text(reply)])
        if steps_taken(req) >= self.steps:
            return Reply([text(f"A{n}: the total is {figure(n)}." + " ok" * self.answer_chars)])
        code = f"print('x' * 8000)\nprint('total {n}:', '{figure(n)}')"
        return Reply([tool_use("run_code", {"language": "python", "code": code})])


def steps_taken(req: ModelRequest) -> int:
    """Steps run for the latest question (a summary of earlier ones counts as done): its
    results, cleared or not."""
    steps = 0
    for message in req.merged_messages:
        for block in as_blocks(message.get("content")):
            if block.get("type") == "tool_result":
                steps += 1
            elif block.get("type") == "text" and GO_ON in block["text"]:
                steps = DONE
            elif block.get("type") == "text" and QUESTION.search(block["text"]):
                steps = 0
    return steps


def summary_of(transcript: str) -> str:
    """What a faithful summary keeps: every figure found."""
    answers = sorted(set(ANSWER.findall(transcript)), key=lambda a: int(a[0]))
    return "\n".join(f"A{n}: the total is {total}." for n, total in answers)


def prompt_text(req: ModelRequest) -> str:
    """Every text the model is shown: messages as it reads them, tool results included."""
    parts: list[str] = []
    for message in req.messages:
        for block in as_blocks(message.get("content")):
            if block.get("type") == "text":
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                parts += [b.get("text", "") for b in as_blocks(block.get("content"))]
            elif block.get("type") == "compaction":
                parts.append(str(block.get("content") or ""))
    return "\n".join(parts)


def last_question_text(req: ModelRequest) -> str:
    questions = QUESTION.split(prompt_text(req))
    return questions[-1] if len(questions) > 1 else ""


def current_question(req: ModelRequest) -> int:
    found = QUESTION.findall(prompt_text(req))
    return int(found[-1]) if found else 0
