"""The fake Slack's canvases (fakes/slack/canvases.py) through the real slack_sdk client: every
canvas method, in slack_sdk's encoding and the other one, the free-team and disabled
workspaces, scopes and rate tiers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import DEFAULT_SCOPES, FakeSlack

CHANNEL = "C0CHAN001"
OTHER = "C0CHAN002"
REPORT = "# Report\nintro\n## Revenue\nup 5%\n## Costs\ndown 2%"
pytestmark = pytest.mark.usefixtures("no_proxy")


def doc(markdown: str) -> dict[str, str]:
    return {"type": "markdown", "markdown": markdown}


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def client_of(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


async def error_of(call: Any) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as err:
        await call
    return err.value.response.data


async def new_canvas(slack: FakeSlack, markdown: str = REPORT, **args: Any) -> str:
    answer = await client_of(slack).canvases_create(
        title="Q1", document_content=doc(markdown), **args
    )
    return answer["canvas_id"]


async def section_ids(slack: FakeSlack, canvas_id: str, **criteria: Any) -> list[str]:
    answer = await client_of(slack).canvases_sections_lookup(canvas_id=canvas_id, criteria=criteria)
    return [s["id"] for s in answer["sections"]]


# -- create


async def test_a_canvas_is_a_file_with_a_docs_permalink(slack: FakeSlack) -> None:
    canvas_id = await new_canvas(slack)
    assert canvas_id.startswith("F")
    canvas = slack.canvases[canvas_id]
    assert (canvas.title, canvas.markdown, canvas.channel_id) == ("Q1", REPORT, None)
    file = (await client_of(slack).files_info(file=canvas_id))["file"]
    assert (file["filetype"], file["title"]) == ("canvas", "Q1")
    assert file["permalink"] == f"https://fake-ws.slack.com/docs/{slack.team_id}/{canvas_id}"


async def test_create_takes_a_form_and_a_channel_tab(slack: FakeSlack) -> None:
    data = {"title": "Form", "document_content": json.dumps(doc("# Hi")), "channel_id": CHANNEL}
    answer = await client_of(slack).api_call("canvases.create", data=data)
    canvas = slack.canvases[answer["canvas_id"]]
    assert (canvas.title, canvas.markdown, canvas.channel_id) == ("Form", "# Hi", CHANNEL)


@pytest.mark.parametrize(
    "content",
    [{"type": "html", "markdown": "x"}, {"type": "markdown", "markdown": 5}, {"type": "markdown"}],
    ids=["html", "not a string", "no markdown"],
)
async def test_create_wants_markdown_content(slack: FakeSlack, content: dict[str, Any]) -> None:
    answer = await error_of(client_of(slack).canvases_create(title="x", document_content=content))
    assert answer["error"] == "invalid_arguments"
    assert slack.canvases == {}


@pytest.mark.parametrize(
    ("markdown", "taken"),
    [
        ("x" * 1_048_576, True),
        ("x" * 1_048_577, False),
        ("> quoted\n> more", True),
        ("- item\n> quote", True),
        ("intro\n> - item", False),
        ("> 1. first", False),
    ],
    ids=["1 MiB", "over 1 MiB", "quote", "list then quote", "list in quote", "ordered in quote"],
)
async def test_create_checks_the_markdown(slack: FakeSlack, markdown: str, taken: bool) -> None:
    create = client_of(slack).canvases_create(title="x", document_content=doc(markdown))
    if taken:
        await create
        return
    answer = await error_of(create)
    assert answer["error"] == "canvas_creation_failed"
    assert answer["detail"].startswith("'content' error:")


async def test_the_list_in_a_quote_is_named_by_line(slack: FakeSlack) -> None:
    answer = await error_of(new_canvas(slack, "# Title\n\n> - item"))
    assert answer["detail"] == (
        "'content' error: line 3: Unsupported block type (List) within block quote"
    )


# -- conversations.canvases.create


async def test_one_channel_canvas_per_channel(slack: FakeSlack) -> None:
    client = client_of(slack)
    made = await client.conversations_canvases_create(
        channel_id=CHANNEL, document_content=doc("# Channel"), title="Notes"
    )
    canvas = slack.canvases[made["canvas_id"]]
    assert (canvas.title, canvas.channel_id) == ("Notes", CHANNEL)
    again = client.conversations_canvases_create(channel_id=CHANNEL, document_content=doc("x"))
    assert (await error_of(again))["error"] == "channel_canvas_already_exists"
    await client.conversations_canvases_create(channel_id=OTHER, document_content=doc("x"))


async def test_a_channel_canvas_needs_a_channel(slack: FakeSlack) -> None:
    call = client_of(slack).api_call("conversations.canvases.create", json={"title": "x"})
    assert (await error_of(call))["error"] == "invalid_arguments"


async def test_a_tier_without_channel_canvases() -> None:
    async with FakeSlack(channel_canvases=False) as slack:
        call = client_of(slack).conversations_canvases_create(
            channel_id=CHANNEL, document_content=doc("x")
        )
        assert (await error_of(call))["error"] == "team_tier_cannot_create_channel_canvases"


# -- edit

EDITS = [
    ({"operation": "insert_at_start", "document_content": doc("top")}, "top\n" + REPORT),
    ({"operation": "insert_at_end", "document_content": doc("end")}, REPORT + "\nend"),
    (
        {"operation": "insert_after", "document_content": doc("more")},
        "# Report\nintro\n## Revenue\nup 5%\nmore\n## Costs\ndown 2%",
    ),
    (
        {"operation": "insert_before", "document_content": doc("more")},
        "# Report\nintro\nmore\n## Revenue\nup 5%\n## Costs\ndown 2%",
    ),
    (
        {"operation": "replace", "document_content": doc("## Revenue\nup 9%")},
        "# Report\nintro\n## Revenue\nup 9%\n## Costs\ndown 2%",
    ),
    ({"operation": "delete"}, "# Report\nintro\n## Costs\ndown 2%"),
]


@pytest.mark.parametrize(("change", "after"), EDITS, ids=[c["operation"] for c, _ in EDITS])
async def test_edits_at_a_section(slack: FakeSlack, change: dict[str, Any], after: str) -> None:
    canvas_id = await new_canvas(slack)
    [revenue] = await section_ids(slack, canvas_id, contains_text="Revenue")
    if change["operation"] not in ("insert_at_start", "insert_at_end"):
        change = {**change, "section_id": revenue}
    await client_of(slack).canvases_edit(canvas_id=canvas_id, changes=[change])
    assert slack.canvases[canvas_id].markdown == after
    assert slack.canvases[canvas_id].edits == 1
    content = await client_of(slack).canvases_getContent(canvas_id=canvas_id)
    assert content["content"] == after


async def test_replace_without_a_section_replaces_the_canvas(slack: FakeSlack) -> None:
    canvas_id = await new_canvas(slack)
    change = {"operation": "replace", "document_content": doc("# New")}
    await client_of(slack).canvases_edit(canvas_id=canvas_id, changes=[change])
    assert slack.canvases[canvas_id].markdown == "# New"


async def test_rename_and_a_form_encoded_edit(slack: FakeSlack) -> None:
    canvas_id = await new_canvas(slack)
    change = {"operation": "rename", "title_content": doc("Q2")}
    data = {"canvas_id": canvas_id, "changes": json.dumps([change])}
    await client_of(slack).api_call("canvases.edit", data=data)
    assert slack.canvases[canvas_id].title == "Q2"
    file = (await client_of(slack).files_info(file=canvas_id))["file"]
    assert file["title"] == "Q2"


REFUSED_EDITS = {
    "no change": ([], "invalid_arguments"),
    "two changes": (
        [{"operation": "insert_at_end", "document_content": doc("a")}] * 2,
        "invalid_arguments",
    ),
    "unknown operation": (
        [{"operation": "append", "document_content": doc("a")}],
        "invalid_arguments",
    ),
    "insert_after without section": (
        [{"operation": "insert_after", "document_content": doc("a")}],
        "invalid_arguments",
    ),
    "insert_before without section": (
        [{"operation": "insert_before", "document_content": doc("a")}],
        "invalid_arguments",
    ),
    "delete without section": ([{"operation": "delete"}], "invalid_arguments"),
    "unknown section": (
        [{"operation": "delete", "section_id": "temp:C:AAAAAAAAAAAAAAAAAAAAAAAAAAAA"}],
        "canvas_editing_failed",
    ),
    "list in a quote": (
        [{"operation": "insert_at_end", "document_content": doc("> * item")}],
        "canvas_editing_failed",
    ),
}


@pytest.mark.parametrize(("changes", "error"), REFUSED_EDITS.values(), ids=list(REFUSED_EDITS))
async def test_refused_edits_leave_the_canvas(
    slack: FakeSlack, changes: list[dict[str, Any]], error: str
) -> None:
    canvas_id = await new_canvas(slack)
    answer = await error_of(client_of(slack).canvases_edit(canvas_id=canvas_id, changes=changes))
    assert answer["error"] == error
    if error == "canvas_editing_failed":
        assert answer["detail"]
    assert (slack.canvases[canvas_id].markdown, slack.canvases[canvas_id].edits) == (REPORT, 0)


async def test_edit_of_an_unknown_canvas_and_a_locked_one(slack: FakeSlack) -> None:
    client = client_of(slack)
    change = [{"operation": "insert_at_end", "document_content": doc("a")}]
    unknown = client.canvases_edit(canvas_id="F0NOTHERE1", changes=change)
    assert (await error_of(unknown))["error"] == "canvas_not_found"
    canvas_id = await new_canvas(slack)
    slack.lock_canvas(canvas_id)
    locked = client.canvases_edit(canvas_id=canvas_id, changes=change)
    assert (await error_of(locked))["error"] == "canvas_editing_locked"
    slack.unlock_canvas(canvas_id)
    await client.canvases_edit(canvas_id=canvas_id, changes=change)


async def test_an_edit_past_1_mib_is_too_large(slack: FakeSlack) -> None:
    canvas_id = await new_canvas(slack, "x" * 1_000_000)
    change = [{"operation": "insert_at_end", "document_content": doc("y" * 100_000)}]
    call = client_of(slack).canvases_edit(canvas_id=canvas_id, changes=change)
    assert (await error_of(call))["error"] == "canvas_too_large"


# -- access


async def test_access_is_granted_and_taken_back(slack: FakeSlack) -> None:
    client = client_of(slack)
    canvas_id = await new_canvas(slack)
    await client.canvases_access_set(
        canvas_id=canvas_id, access_level="read", channel_ids=[CHANNEL, OTHER]
    )
    await client.canvases_access_set(
        canvas_id=canvas_id, access_level="write", user_ids=["U0HUMAN01"]
    )
    access = slack.canvases[canvas_id].access
    assert access == {CHANNEL: "read", OTHER: "read", "U0HUMAN01": "write"}
    await client.canvases_access_delete(canvas_id=canvas_id, channel_ids=[OTHER])
    assert OTHER not in slack.canvases[canvas_id].access and CHANNEL in access


async def test_access_takes_json_arrays(slack: FakeSlack) -> None:
    canvas_id = await new_canvas(slack)
    body = {"canvas_id": canvas_id, "access_level": "owner", "user_ids": ["U0HUMAN01"]}
    await client_of(slack).api_call("canvases.access.set", json=body)
    assert slack.canvases[canvas_id].access == {"U0HUMAN01": "owner"}
    form = {"canvas_id": canvas_id, "channel_ids": json.dumps([CHANNEL]), "access_level": "read"}
    await client_of(slack).api_call("canvases.access.set", data=form)
    assert slack.canvases[canvas_id].access[CHANNEL] == "read"


ACCESS_REFUSED = {
    "both lists": ({"channel_ids": [CHANNEL], "user_ids": ["U0HUMAN01"]}, "invalid_parameters"),
    "no list": ({}, "invalid_parameters"),
    "bad level": ({"channel_ids": [CHANNEL], "access_level": "admin"}, "invalid_arguments"),
    "bad channel": ({"channel_ids": ["nope"]}, "channel_not_found"),
    "bad user": ({"user_ids": ["nobody"]}, "user_not_found"),
    "unknown canvas": ({"canvas_id": "F0NOTHERE1", "channel_ids": [CHANNEL]}, "canvas_not_found"),
}


@pytest.mark.parametrize(("args", "error"), ACCESS_REFUSED.values(), ids=list(ACCESS_REFUSED))
async def test_refused_access_changes(slack: FakeSlack, args: dict[str, Any], error: str) -> None:
    canvas_id = await new_canvas(slack)
    client = client_of(slack)
    call = {"canvas_id": canvas_id, "access_level": "read", **args}
    assert (await error_of(client.canvases_access_set(**call)))["error"] == error
    if error != "invalid_arguments":
        call.pop("access_level")
        assert (await error_of(client.canvases_access_delete(**call)))["error"] == error
    assert slack.canvases[canvas_id].access == {}


# -- sections, content, delete


async def test_sections_are_found_by_header_and_text(slack: FakeSlack) -> None:
    canvas_id = await new_canvas(slack)
    h1 = await section_ids(slack, canvas_id, section_types=["h1"])
    h2 = await section_ids(slack, canvas_id, section_types=["h2"])
    every = await section_ids(slack, canvas_id, section_types=["any_header"])
    assert len(h1) == 1 and len(h2) == 2 and every == h1 + h2
    assert all(s.startswith("temp:C:") and len(s) == 35 for s in every)
    costs = await section_ids(slack, canvas_id, section_types=["h2"], contains_text="down")
    assert costs == h2[1:]
    assert await section_ids(slack, canvas_id, section_types=["h3"]) == []
    deep = await new_canvas(slack, "text\n### Deep\nmore")
    [h3] = await section_ids(slack, deep, section_types=["h3"])
    assert await section_ids(slack, deep, section_types=["any_header"]) == [h3]
    assert await section_ids(slack, deep, section_types=["h1", "h2"]) == []


async def test_lookup_takes_criteria_as_json(slack: FakeSlack) -> None:
    canvas_id = await new_canvas(slack)
    body = {"canvas_id": canvas_id, "criteria": {"contains_text": "intro"}}
    answer = await client_of(slack).api_call("canvases.sections.lookup", json=body)
    assert len(answer["sections"]) == 1


@pytest.mark.parametrize(
    "criteria",
    [{}, {"section_types": []}, {"section_types": ["h4"]}, {"contains_text": ""}],
    ids=["empty", "no types", "h4", "empty text"],
)
async def test_lookup_needs_criteria(slack: FakeSlack, criteria: dict[str, Any]) -> None:
    canvas_id = await new_canvas(slack)
    call = client_of(slack).canvases_sections_lookup(canvas_id=canvas_id, criteria=criteria)
    assert (await error_of(call))["error"] == "invalid_arguments"


async def test_content_as_markdown_or_html(slack: FakeSlack) -> None:
    canvas_id = await new_canvas(slack, "# Title\nbody <b>")
    client = client_of(slack)
    assert (await client.canvases_getContent(canvas_id=canvas_id))["content"] == "# Title\nbody <b>"
    html = await client.canvases_getContent(canvas_id=canvas_id, content_type="html")
    assert html["content"] == "<h1>Title</h1><p>body &lt;b&gt;</p>"


async def test_a_deleted_canvas_is_gone(slack: FakeSlack) -> None:
    client = client_of(slack)
    canvas_id = await new_canvas(slack)
    await client.canvases_delete(canvas_id=canvas_id)
    assert canvas_id not in slack.canvases
    assert (await error_of(client.canvases_getContent(canvas_id=canvas_id)))["error"] == (
        "canvas_not_found"
    )
    lookup = client.canvases_sections_lookup(canvas_id=canvas_id, criteria={"contains_text": "x"})
    assert (await error_of(lookup))["error"] == "canvas_deleted"
    assert (await error_of(client.files_info(file=canvas_id)))["error"] == "file_not_found"
    assert (await error_of(client.canvases_delete(canvas_id=canvas_id)))["error"] == (
        "canvas_not_found"
    )


# -- workspaces


async def test_a_free_team_tabs_every_canvas_once_per_channel() -> None:
    async with FakeSlack(canvases="free") as slack:
        client = client_of(slack)
        standalone = client.canvases_create(title="x", document_content=doc("x"))
        assert (await error_of(standalone))[
            "error"
        ] == "free_teams_cannot_create_standalone_canvases"
        canvas_id = await new_canvas(slack, channel_id=CHANNEL)
        assert slack.canvases[canvas_id].channel_id == CHANNEL
        second = client.canvases_create(title="y", document_content=doc("y"), channel_id=CHANNEL)
        assert (await error_of(second))["error"] == "free_team_canvas_tab_already_exists"
        channel = client.conversations_canvases_create(
            channel_id=CHANNEL, document_content=doc("z")
        )
        assert (await error_of(channel))["error"] == "free_team_canvas_tab_already_exists"
        await client.conversations_canvases_create(channel_id=OTHER, document_content=doc("z"))
        change = [{"operation": "insert_at_end", "document_content": doc("more")}]
        await client.canvases_edit(canvas_id=canvas_id, changes=change)


async def test_a_team_moved_to_free_cannot_edit_its_standalone_canvases(slack: FakeSlack) -> None:
    standalone, tabbed = await new_canvas(slack), await new_canvas(slack, channel_id=CHANNEL)
    slack.canvas_mode = "free"  # the workspace's plan changes
    change = [{"operation": "insert_at_end", "document_content": doc("more")}]
    call = client_of(slack).canvases_edit(canvas_id=standalone, changes=change)
    assert (await error_of(call))["error"] == "free_teams_cannot_edit_standalone_canvases"
    await client_of(slack).canvases_edit(canvas_id=tabbed, changes=change)


async def test_a_paid_team_tabs_many_canvases_in_a_channel(slack: FakeSlack) -> None:
    await new_canvas(slack, channel_id=CHANNEL)
    await new_canvas(slack, channel_id=CHANNEL)
    assert len(slack.canvases) == 2


def disabled_calls(client: AsyncWebClient) -> dict[str, Any]:
    change = [{"operation": "insert_at_end", "document_content": doc("x")}]
    return {
        "create": lambda: client.canvases_create(title="x", document_content=doc("x")),
        "channel": lambda: client.conversations_canvases_create(
            channel_id=CHANNEL, document_content=doc("x")
        ),
        "edit": lambda: client.canvases_edit(canvas_id="F0CANVAS01", changes=change),
        "access.set": lambda: client.canvases_access_set(
            canvas_id="F0CANVAS01", access_level="read", channel_ids=[CHANNEL]
        ),
        "access.delete": lambda: client.canvases_access_delete(
            canvas_id="F0CANVAS01", channel_ids=[CHANNEL]
        ),
        "lookup": lambda: client.canvases_sections_lookup(
            canvas_id="F0CANVAS01", criteria={"contains_text": "x"}
        ),
    }


@pytest.mark.parametrize(
    "method", ["create", "channel", "edit", "access.set", "access.delete", "lookup"]
)
async def test_a_workspace_without_canvases(method: str) -> None:
    async with FakeSlack(canvases="disabled") as slack:
        call = disabled_calls(client_of(slack))[method]
        assert (await error_of(call()))["error"] == "canvas_disabled_user_team"
    async with FakeSlack() as slack:
        call = disabled_calls(client_of(slack))[method]
        if method in ("create", "channel"):
            await call()
        else:
            assert (await error_of(call()))["error"] == "canvas_not_found"


# -- scopes and tiers


def test_the_default_scopes_have_canvases() -> None:
    assert {"canvases:read", "canvases:write"} <= set(DEFAULT_SCOPES)


@pytest.mark.parametrize(
    ("missing", "method", "args"),
    [
        ("canvases:write", "canvases.create", {"title": "x"}),
        ("canvases:write", "conversations.canvases.create", {"channel_id": CHANNEL}),
        ("canvases:write", "canvases.edit", {"canvas_id": "F1", "changes": []}),
        ("canvases:write", "canvases.access.set", {"canvas_id": "F1"}),
        ("canvases:write", "canvases.access.delete", {"canvas_id": "F1"}),
        ("canvases:write", "canvases.delete", {"canvas_id": "F1"}),
        ("canvases:read", "canvases.sections.lookup", {"canvas_id": "F1"}),
        ("canvases:read", "canvases.getContent", {"canvas_id": "F1"}),
    ],
)
async def test_canvas_methods_need_their_scope(
    missing: str, method: str, args: dict[str, Any]
) -> None:
    scopes = [s for s in DEFAULT_SCOPES if s != missing]
    async with FakeSlack(scopes=scopes) as slack:
        answer = await error_of(client_of(slack).api_call(method, json=args))
        assert (answer["error"], answer["needed"]) == ("missing_scope", missing)
        assert missing not in answer["provided"].split(",")
    async with FakeSlack() as slack:
        try:
            error = (await client_of(slack).api_call(method, json=args)).get("error")
        except SlackApiError as err:
            error = err.response["error"]
        assert error != "missing_scope"


async def test_canvases_create_is_tier_2() -> None:
    async with FakeSlack(rate_limits=1.0) as slack:
        client = client_of(slack)
        for _ in range(4):  # a tier 2 burst
            await new_canvas(slack)
        answer = await error_of(client.canvases_create(title="x"))
        assert answer["error"] == "ratelimited"
        canvas_id = next(iter(slack.canvases))
        for _ in range(10):  # tier 3 bursts are larger
            await client.canvases_getContent(canvas_id=canvas_id)
