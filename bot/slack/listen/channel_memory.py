"""Channel memory in Slack: "@bot remember for this channel: …" saves a note for the
channel (a DM has its own), confirmed in the thread with the note quoted; every run in the
channel gets the notes in its system prompt. A channel's notes are read only for threads
of that channel, so a private channel's never reach another."""

from __future__ import annotations

import json
import re
import secrets
import time

from bot.memory.notes import (
    chosen,
    definition_text,
    definitions_section,
    prompt_section,
    refusal,
)
from bot.slack.render import memory_blocks
from bot.slack.render.block_kit import escape, section
from bot.slack.threads import Click, ThreadRef
from bot.slack.web import SlackWeb
from bot.store.base import DefinitionRecord, NoteRecord, RunRecord, Store, ToolCallRecord

NOT_YOURS = "Only <@{by}> can save this note."
DEFINE = re.compile(r"^\s*save this as the definition of\s+(?P<name>.+?)\s*[.!]?\s*$", re.I | re.S)
NAME_MAX = 80
STEP_TOOLS = ("run_sql", "run_code")
REMEMBER = re.compile(r"^\s*remember for this channel\s*:\s*(?P<note>.*)$", re.I | re.S)


class ChannelMemory:
    def __init__(
        self,
        web: SlackWeb,
        store: Store,
        *,
        max_notes: int,
        max_chars: int,
        prompt_chars: int,
    ) -> None:
        self._web, self._store = web, store
        self._max_notes, self._max_chars, self._prompt_chars = max_notes, max_chars, prompt_chars

    @staticmethod
    def place(ref: ThreadRef) -> str:
        return f"{ref.team}:{ref.channel}"

    async def remember(self, ref: ThreadRef, user: str, text: str) -> bool:
        """Save `text` if it is a "remember for this channel:" request; True if it was one."""
        match = REMEMBER.match(text)
        if match is None:
            return False
        note = match["note"].strip()
        why = refusal(note, self._max_chars) or await self._full(ref)
        if why is not None:
            await self._web.post(ref.channel, ref.ts, f"Not saved: {escape(why)}")
            return True
        record = NoteRecord(secrets.token_hex(6), self.place(ref), note, user, time.time())
        await self._store.add_note(record)
        quoted = "> " + escape(note).replace("\n", "\n> ")
        await self._web.post(ref.channel, ref.ts, f"Saved for this channel:\n{quoted}")
        return True

    async def save_proposed(self, team: str, value: str, click: Click, message_ts: str) -> None:
        """Save under a note the model proposed: only for the person it was shown to."""
        try:
            given = json.loads(value)
            by, note = str(given["by"]), str(given["text"]).strip()
        except (ValueError, KeyError, TypeError):
            return
        if click.user != by:
            await self._web.ephemeral(click.channel, click.user, NOT_YOURS.format(by=by), None)
            return
        ref = ThreadRef(team, click.channel, click.thread_ts or "")
        why = refusal(note, self._max_chars) or await self._full(ref)
        if why is not None:
            await self._web.ephemeral(click.channel, click.user, f"Not saved: {why}", None)
            return
        record = NoteRecord(secrets.token_hex(6), self.place(ref), note, by, time.time())
        await self._store.add_note(record)
        said = memory_blocks.saved(note, by)
        await self._web.update(click.channel, message_ts, said, [section(said)])

    async def _full(self, ref: ThreadRef) -> str | None:
        if len(await self._store.notes(self.place(ref))) >= self._max_notes:
            return f"This channel keeps at most {self._max_notes} notes; forget one first."
        return None

    async def define(self, ref: ThreadRef, user: str, text: str) -> bool:
        """Save the thread's last answer's step under a name, if `text` asks for it ("save
        this as the definition of …"); True if it did ask. The step is the one its first
        traced figure came from, else its last query or cell."""
        match = DEFINE.match(text)
        if match is None:
            return False
        name = " ".join(match["name"].split())[:NAME_MAX]
        found = await self._last_step(ref)
        if found is None:
            said = "Not saved: this thread has no answer with a query or a cell to save yet."
            await self._web.post(ref.channel, ref.ts, said)
            return True
        run, call, figures = found
        record = DefinitionRecord(
            self.place(ref), name, call.tool, call.language or call.tool, call.code,
            tuple(figures), run.run_id, user, time.time(),
        )  # fmt: skip
        await self._store.save_definition(record)
        computed = f" It computed {', '.join(figures[:5])}." if figures else ""
        said = (
            f"Saved as the definition of *{escape(name)}*: the `{call.language or call.tool}` "
            f"step of the last answer.{escape(computed)} Later runs in this channel can reuse it."
        )
        await self._web.post(ref.channel, ref.ts, said)
        return True

    async def _last_step(
        self, ref: ThreadRef
    ) -> tuple[RunRecord, ToolCallRecord, list[str]] | None:
        runs = [r for r in await self._store.runs(ref.key) if r.outcome == "finished"]
        if not runs:
            return None
        run = runs[-1]
        calls = [
            c for c in await self._store.tool_calls(ref.key)
            if c.run_id == run.run_id and c.tool in STEP_TOOLS
        ]  # fmt: skip
        if not calls:
            return None
        traced = [str(f.get("call_id")) for f in run.figures if f.get("call_id")]
        call = next((c for c in calls if traced and c.call_id == traced[0]), calls[-1])
        figures = [str(f["text"]) for f in run.figures if f.get("call_id") == call.call_id]
        return run, call, figures

    async def context_for(self, key: str, question: str) -> str:
        """The channel's notes and definitions for a run's system prompt ("" for none, or
        another front end)."""
        ref = ThreadRef.parse(key)
        if ref is None:
            return ""
        notes = await self._store.notes(self.place(ref))
        parts = [
            prompt_section(chosen(notes, question, self._prompt_chars)),
            definitions_section(await self._store.definitions(self.place(ref))),
        ]
        return "\n\n".join(p for p in parts if p)

    async def definition_for(self, key: str, name: str) -> str | None:
        """A saved definition of the thread's channel, as load_definition gives it."""
        ref = ThreadRef.parse(key)
        if ref is None:
            return None
        wanted = " ".join(name.split()).lower()
        for definition in await self._store.definitions(self.place(ref)):
            if definition.name.lower() == wanted:
                return definition_text(definition)
        return None
