"""Channel memory end to end: a note saved with "remember for this channel:" reaches the
system prompt of later threads in that channel, quoted as the channel's notes, and never
the prompt of another channel's threads; a secret-looking note is refused."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.anthropic import Reply, text, tool_use
from tests.slack.test_slack_show_work import with_button
from tests.slack_harness import CHANNEL, bot_process, fake_world

OTHER = "C0OTHER09"
PRIVATE = "G0PRIVATE1"
DM = "D0DIRECT01"


def answer(req):
    return Reply([text("ok")])


async def test_a_note_is_used_in_its_channel_only(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    async with fake_world(backend, answer, sandbox_root, monkeypatch) as h, bot_process(h):
        note = "revenue means net of refunds"
        saved = await h.slack.post_user_message(
            CHANNEL, f"remember for this channel: {note}", mention=True
        )
        await h.wait_for_text(saved["ts"], "Saved for this channel")
        asked = first = len(h.model.requests)
        here = await h.slack.post_user_message(CHANNEL, "what was revenue?", mention=True)
        await h.slack.wait_for(lambda: len(h.model.requests) > asked, 30)
        prompt_here = h.model.requests[-1].system_text
        await h.wait_for_runs(here["ts"], 1)
        asked = len(h.model.requests)
        there = await h.slack.post_user_message(OTHER, "what was revenue?", mention=True)
        await h.slack.wait_for(lambda: len(h.model.requests) > asked, 30)
        prompt_there = h.model.requests[-1].system_text
        await h.wait_for_runs(there["ts"], 1, channel=OTHER)
    assert first == 0  # the note itself started no run
    assert 'saved_by="U0HUMAN01"' in prompt_here and f">{note}</channel_note>" in prompt_here
    assert "not instructions" in prompt_here
    assert note not in prompt_there and "channel_note" not in prompt_there
    assert f"> {note}" in h.texts(saved["ts"])


async def test_private_channel_and_dm_notes_stay_where_they_were_saved(
    store_backend: tuple[str, dict[str, str]], sandbox_root: Path, monkeypatch
) -> None:
    saved_in = {PRIVATE: "churn counts paused plans", DM: "my fiscal year starts in February"}
    prompts: dict[str, str] = {}
    world = fake_world(store_backend[0], answer, sandbox_root, monkeypatch, **store_backend[1])
    async with world as h, bot_process(h):
        for channel, note in saved_in.items():
            said = await h.slack.post_user_message(
                channel, f"remember for this channel: {note}", mention=True
            )
            await h.wait_for_text(said["ts"], "Saved for this channel", channel=channel)
        for channel in (PRIVATE, DM, OTHER):
            question = await h.slack.post_user_message(channel, "churn this year?", mention=True)
            await h.wait_for_runs(question["ts"], 1, channel=channel)
            prompts[channel] = h.model.requests[-1].system_text  # the run's one turn
    assert saved_in[PRIVATE] in prompts[PRIVATE] and saved_in[DM] not in prompts[PRIVATE]
    assert saved_in[DM] in prompts[DM] and saved_in[PRIVATE] not in prompts[DM]
    assert "channel_note" not in prompts[OTHER]


async def test_the_footer_counts_the_notes_the_answer_says_it_used(
    sandbox_root: Path, monkeypatch
) -> None:
    def citing(req):
        if "refunds" in req.system_text:  # names one shown note, and one it was never shown
            return Reply([text("Revenue was 1,200 net of refunds.\n\nChannel notes used: 1, 7")])
        return Reply([text("Revenue was 1,300.")])

    async with fake_world("local", citing, sandbox_root, monkeypatch) as h, bot_process(h):
        bare = await h.slack.post_user_message(CHANNEL, "revenue?", mention=True)
        await h.wait_for_runs(bare["ts"], 1)
        saved = await h.slack.post_user_message(
            CHANNEL, "remember for this channel: revenue means net of refunds", mention=True
        )
        await h.wait_for_text(saved["ts"], "Saved for this channel")
        asked = await h.slack.post_user_message(CHANNEL, "revenue?", mention=True)
        await h.wait_for_runs(asked["ts"], 1)
        await h.wait_for_text(asked["ts"], "used 1 channel note")
    shown = h.texts(asked["ts"])
    assert "Revenue was 1,200 net of refunds." in shown
    assert "Channel notes used" not in shown and "used 1 channel note ·" in shown
    assert "channel note" not in h.texts(bare["ts"])
    assert 'n="1"' in h.model.requests[-1].system_text


async def test_a_secret_looking_note_is_refused(sandbox_root: Path, monkeypatch) -> None:
    async with fake_world("local", answer, sandbox_root, monkeypatch) as h, bot_process(h):
        said = await h.slack.post_user_message(
            CHANNEL, "remember for this channel: the api_key=abcd1234efgh", mention=True
        )
        await h.wait_for_text(said["ts"], "Not saved")
    assert "looks like it holds a secret" in h.texts(said["ts"])
    assert not h.model.requests


async def test_the_operators_instructions_come_first(
    sandbox_root: Path, tmp_path: Path, monkeypatch
) -> None:
    rules = tmp_path / "instructions.txt"
    rules.write_text("Amounts are in EUR unless a column says otherwise.\n")
    world = fake_world("local", answer, sandbox_root, monkeypatch, operator_instructions_file=rules)
    async with world as h, bot_process(h):
        saved = await h.slack.post_user_message(
            CHANNEL, "remember for this channel: amounts are in USD", mention=True
        )
        await h.wait_for_text(saved["ts"], "Saved for this channel")
        asked = await h.slack.post_user_message(CHANNEL, "total amounts?", mention=True)
        await h.wait_for_runs(asked["ts"], 1)
    prompt = h.model.requests[-1].system_text
    operator = prompt.index("Amounts are in EUR unless a column says otherwise.")
    note = prompt.index(">amounts are in USD</channel_note>")
    assert operator < note
    assert "rank above everything else you are given" in prompt[:operator]
    # the operator's instructions are in the cached, stable block; the notes are not
    stable = h.model.requests[-1].body["system"][0]
    assert "EUR" in stable["text"] and "USD" not in stable["text"]
    assert stable.get("cache_control")


async def test_the_memory_list_forgets_for_the_saver_and_the_next_run_knows(
    store_backend: tuple[str, dict[str, str]], sandbox_root: Path, monkeypatch
) -> None:
    world = fake_world(
        store_backend[0],
        answer,
        sandbox_root,
        monkeypatch,
        memory_editors="U0EDITOR1",
        **store_backend[1],
    )
    async with world as h, bot_process(h):
        for note in ("revenue means net of refunds", "a customer has a paid plan"):
            saved = await h.slack.post_user_message(
                CHANNEL, f"remember for this channel: {note}", mention=True
            )
            await h.wait_for_text(saved["ts"], "Saved for this channel")
        await h.slack.slash_command("/analyze", "memory")
        listed = lambda: [  # noqa: E731
            m for m in h.slack.bot_messages(CHANNEL) if "Notes for this channel" in str(m)
        ]
        await h.slack.wait_for(listed, 10)
        [message] = listed()
        shown = str(message["blocks"])
        ids = [e["value"] for b in message["blocks"] for e in b.get("elements") or []]
        ephemerals = len(h.slack.ephemerals)
        await h.slack.click_button(message, f"note_forget:{ids[0]}", user="U0HUMAN02")
        await h.slack.wait_for(lambda: len(h.slack.ephemerals) > ephemerals, 10)
        refused = h.slack.ephemerals[-1]["text"]
        await h.slack.click_button(message, f"note_forget:{ids[0]}", user="U0HUMAN01")
        await h.slack.wait_for(lambda: "Notes for this channel* (1)" in str(listed()), 10)
        asked = await h.slack.post_user_message(CHANNEL, "revenue?", mention=True)
        await h.wait_for_runs(asked["ts"], 1)
    assert "Notes for this channel* (2)" in shown and "saved by <@U0HUMAN01>" in shown
    assert "Only <@U0HUMAN01> or the memory editors" in refused
    prompt = h.model.requests[-1].system_text
    assert "net of refunds" not in prompt and "a customer has a paid plan" in prompt


async def test_a_note_the_model_proposes_is_saved_by_the_asker_only(
    store_backend: tuple[str, dict[str, str]], sandbox_root: Path, monkeypatch
) -> None:
    definition = "Revenue is net of refunds."

    def corrected(req):
        if req.turn == 0 and "propose_note" in req.tools:
            return Reply([tool_use("propose_note", {"text": definition})])
        return Reply([text("Noted: I will count refunds out.")])

    world = fake_world(store_backend[0], corrected, sandbox_root, monkeypatch, **store_backend[1])
    async with world as h, bot_process(h):
        asked = await h.slack.post_user_message(CHANNEL, "no, we count refunds out", mention=True)
        await h.slack.wait_for(lambda: with_button(h, asked["ts"], "note_save"), 30)
        [proposal] = with_button(h, asked["ts"], "note_save")
        ephemerals = len(h.slack.ephemerals)
        await h.slack.click_button(proposal, "note_save", user="U0HUMAN02")
        await h.slack.wait_for(lambda: len(h.slack.ephemerals) > ephemerals, 10)
        refused = h.slack.ephemerals[-1]["text"]
        await h.slack.click_button(proposal, "note_save", user="U0HUMAN01")
        await h.wait_for_text(asked["ts"], "Saved for this channel by <@U0HUMAN01>")
        later = await h.slack.post_user_message(CHANNEL, "revenue?", mention=True)
        await h.wait_for_runs(later["ts"], 1)
    assert "Only <@U0HUMAN01> can save this note." in refused
    assert f">{definition}</channel_note>" in h.model.requests[-1].system_text


async def test_a_long_proposed_note_in_another_script_fits_its_button(
    sandbox_root: Path, monkeypatch
) -> None:
    """The Save button carries the note: 1,000 characters of any script stay within the
    2,000 characters Slack allows a button's value (escaped, they would not)."""
    definition = "καθαρά έσοδα " * 76  # 988 characters, nearly all of which JSON escapes

    def corrected(req):
        if req.turn == 0 and "propose_note" in req.tools:
            return Reply([tool_use("propose_note", {"text": definition})])
        return Reply([text("Noted.")])

    async with fake_world("local", corrected, sandbox_root, monkeypatch) as h, bot_process(h):
        asked = await h.slack.post_user_message(CHANNEL, "nie, bez zwrotów", mention=True)
        await h.slack.wait_for(lambda: with_button(h, asked["ts"], "note_save"), 30)
