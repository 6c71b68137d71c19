"""The fake Slack's data blocks (fakes/slack/surfaces.py) through the real slack_sdk client:
each rule for ``table``, ``data_table`` and ``data_visualization`` takes a payload at its
limit and refuses one past it, per block and per message; the switches change what is taken;
``blocks.validate`` answers with the same checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack, SurfaceRules

CHANNEL = "C0CHAN001"
pytestmark = pytest.mark.usefixtures("no_proxy")
Block = dict[str, Any]


# -- payloads


def raw(text: str = "x") -> Block:
    return {"type": "raw_text", "text": text}


def num(value: Any = 1.5, **fields: Any) -> Block:
    return {"type": "raw_number", "value": value, "text": "1.5", **fields}


def rich(text: str = "x") -> Block:
    section = {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
    return {"type": "rich_text", "elements": [section]}


def table(rows: list[list[Block]] | None = None, **fields: Any) -> Block:
    return {"type": "table", "rows": rows or [[raw("a"), raw("b")], [raw("1"), raw("2")]], **fields}


def data_table(rows: list[list[Block]] | None = None, **fields: Any) -> Block:
    rows = rows or [[raw("Region"), raw("Revenue")], [raw("EMEA"), num()]]
    return {"type": "data_table", "caption": "Revenue", "rows": rows, **fields}


def rows_of(n: int, width: int = 1, text: str = "x") -> list[list[Block]]:
    return [[raw(text) for _ in range(width)] for _ in range(n)]


def chart(**fields: Any) -> Block:
    return {"type": "data_visualization", "title": "Signups", "chart": fields}


def pie(n: int = 2, **segment: Any) -> Block:
    segments = [{"label": f"s{i}", "value": 10, **segment} for i in range(n)]
    return chart(type="pie", segments=segments)


def series(name: str, categories: list[str], **point: Any) -> Block:
    return {"name": name, "data": [{"label": c, "value": 1, **point} for c in categories]}


def line(n: int = 2, categories: list[str] | None = None, **axis: Any) -> Block:
    categories = categories or ["Mon", "Tue"]
    many = [series(f"s{i}", categories) for i in range(n)]
    return chart(type="line", series=many, axis_config={"categories": categories, **axis})


def line_with(one: Block) -> Block:
    """A line chart whose one series is `one`, over Mon and Tue."""
    return chart(type="line", series=[one], axis_config={"categories": ["Mon", "Tue"]})


def cells_of(total: int) -> list[list[Block]]:
    """A header and one row whose cells hold `total` characters in all."""
    return [[raw("h")], [raw("x" * (total - 1))]]


MON_TUE = ["Mon", "Tue"]
CHART_OK = line()
DAYS = [f"d{i}" for i in range(20)]

# rule: (a payload Slack takes, one it refuses); each a message's blocks
RULES: dict[str, tuple[list[Block], list[Block]]] = {
    "table rows 1-100": ([table(rows_of(100))], [table(rows_of(101))]),
    "table rows given": ([table(rows_of(1))], [{"type": "table"}]),
    "table cells 1-20": ([table(rows_of(2, 20))], [table(rows_of(2, 21))]),
    "table row not empty": ([table([[raw()]])], [table([[raw()], []])]),
    "table cell types": ([table([[raw(), rich(), num()]])], [table([[{"type": "image"}]])]),
    "table raw_text text": ([table([[raw(" ")]])], [table([[raw("")]])]),
    "table column_settings 20": (
        [table(column_settings=[{"align": "left"}] * 20)],
        [table(column_settings=[{"align": "left"}] * 21)],
    ),
    "table align": (
        [table(column_settings=[{"align": "center"}, None, {"align": "right"}])],
        [table(column_settings=[{"align": "middle"}])],
    ),
    "table is_wrapped": (
        [table(column_settings=[{"is_wrapped": True}])],
        [table(column_settings=[{"is_wrapped": "yes"}])],
    ),
    "table 10000 chars": ([table(cells_of(10_000))], [table(cells_of(10_001))]),
    "one table family": ([table(), CHART_OK], [table(), data_table()]),
    "data_table caption": ([data_table()], [data_table(caption="")]),
    "data_table caption given": (
        [data_table()],
        [{k: v for k, v in data_table().items() if k != "caption"}],
    ),
    "data_table rows 2-101": ([data_table(rows_of(101))], [data_table(rows_of(102))]),
    "data_table header and a row": ([data_table(rows_of(2))], [data_table(rows_of(1))]),
    "data_table columns 1-20": ([data_table(rows_of(2, 20))], [data_table(rows_of(2, 21))]),
    "data_table rows same length": (
        [data_table([[raw(), raw()], [raw(), raw()]])],
        [data_table([[raw(), raw()], [raw()]])],
    ),
    "data_table header no rich_text": (
        [data_table([[raw(), num()], [rich(), raw()]])],
        [data_table([[rich(), raw()], [raw(), raw()]])],
    ),
    "data_table cell types": (
        [data_table([[raw()], [num()]])],
        [data_table([[raw()], [{"type": "button"}]])],
    ),
    "data_table raw_text text": (
        [data_table([[raw()], [raw(" ")]])],
        [data_table([[raw()], [raw("")]])],
    ),
    "raw_number value a number": (
        [data_table([[raw()], [num(-3)]])],
        [data_table([[raw()], [num("3")]])],
    ),
    "raw_number text given": (
        [data_table([[raw()], [num(3, text="3")]])],
        [data_table([[raw()], [{"type": "raw_number", "value": 3}]])],
    ),
    "page_size 1-100": ([data_table(page_size=100)], [data_table(page_size=101)]),
    "page_size at least 1": ([data_table(page_size=1)], [data_table(page_size=0)]),
    "page_size an integer": ([data_table(page_size=5)], [data_table(page_size="5")]),
    "row_header_column_index in columns": (
        [data_table(row_header_column_index=1)],
        [data_table(row_header_column_index=2)],
    ),
    "row_header_column_index not negative": (
        [data_table(row_header_column_index=0)],
        [data_table(row_header_column_index=-1)],
    ),
    "data_table 10000 chars": ([data_table(cells_of(10_000))], [data_table(cells_of(10_001))]),
    "chart title 1-50": ([{**pie(), "title": "t" * 50}], [{**pie(), "title": "t" * 51}]),
    "chart title given": ([pie()], [{**pie(), "title": ""}]),
    "chart an object": ([pie()], [{"type": "data_visualization", "title": "t", "chart": "pie"}]),
    "chart type": ([CHART_OK], [{**line(), "chart": {**line()["chart"], "type": "scatter"}}]),
    "pie segments 1-6": ([pie(6)], [pie(7)]),
    "pie segments given": ([pie(1)], [pie(0)]),
    "pie label 1-20": ([pie(1, label="l" * 20)], [pie(1, label="l" * 21)]),
    "pie label given": ([pie(1, label="l")], [pie(1, label="")]),
    "pie value above 0": ([pie(1, value=0.1)], [pie(1, value=0)]),
    "pie value a number": ([pie(1, value=5)], [pie(1, value="5")]),
    "pie no series": ([pie()], [{**pie(), "chart": {**pie()["chart"], "series": []}}]),
    "pie no axis_config": (
        [pie()],
        [{**pie(), "chart": {**pie()["chart"], "axis_config": {"categories": ["a"]}}}],
    ),
    "series 1-6": ([line(6)], [line(7)]),
    "series given": ([line(1)], [line(0)]),
    "series names unique": (
        [line_with(series("a", MON_TUE))],
        [chart(type="bar", series=[series("a", MON_TUE)] * 2, axis_config={"categories": MON_TUE})],
    ),
    "series name 1-20": (
        [line_with(series("n" * 20, MON_TUE))],
        [line_with(series("n" * 21, MON_TUE))],
    ),
    "series points 1-20": ([line(1, DAYS)], [line(1, [*DAYS, "d20"])]),
    "point label in categories": (
        [line_with(series("a", MON_TUE))],
        [line_with(series("a", ["Mon", "Wed"]))],
    ),
    "point value a number": (
        [line_with(series("a", MON_TUE, value=-2.5))],
        [line_with(series("a", MON_TUE, value="2"))],
    ),
    "categories given": (
        [line()],
        [chart(type="area", series=[series("a", MON_TUE)], axis_config={"categories": []})],
    ),
    "axis_config given": ([line()], [chart(type="area", series=[series("a", MON_TUE)])]),
    "category 1-20 chars": ([line(1, ["c" * 20])], [line(1, ["c" * 21])]),
    "axis labels 1-50": ([line(x_label="x" * 50, y_label="y")], [line(y_label="y" * 51)]),
    "series cover every category": (
        [line_with(series("a", MON_TUE))],
        [line_with(series("a", ["Mon"]))],
    ),
    "series cover each category once": (
        [line_with(series("a", MON_TUE))],
        [line_with(series("a", ["Mon", "Tue", "Tue"]))],
    ),
    "2 charts a message": ([pie(), line()], [pie(), line(), pie()]),
}

# where each refused payload of RULES is wrong (its first problem"s json pointer)
WHERE = {
    "table rows 1-100": "/blocks/0/rows",
    "table rows given": "/blocks/0/rows",
    "table cells 1-20": "/blocks/0/rows/0",
    "table row not empty": "/blocks/0/rows/1",
    "table cell types": "/blocks/0/rows/0/0/type",
    "table raw_text text": "/blocks/0/rows/0/0/text",
    "table column_settings 20": "/blocks/0/column_settings",
    "table align": "/blocks/0/column_settings/0/align",
    "table is_wrapped": "/blocks/0/column_settings/0/is_wrapped",
    "table 10000 chars": "/blocks/0/rows",
    "one table family": "/blocks/1",
    "data_table caption": "/blocks/0/caption",
    "data_table caption given": "/blocks/0/caption",
    "data_table rows 2-101": "/blocks/0/rows",
    "data_table header and a row": "/blocks/0/rows",
    "data_table columns 1-20": "/blocks/0/rows/0",
    "data_table rows same length": "/blocks/0/rows/1",
    "data_table header no rich_text": "/blocks/0/rows/0/0/type",
    "data_table cell types": "/blocks/0/rows/1/0/type",
    "data_table raw_text text": "/blocks/0/rows/1/0/text",
    "raw_number value a number": "/blocks/0/rows/1/0/value",
    "raw_number text given": "/blocks/0/rows/1/0/text",
    "page_size 1-100": "/blocks/0/page_size",
    "page_size at least 1": "/blocks/0/page_size",
    "page_size an integer": "/blocks/0/page_size",
    "row_header_column_index in columns": "/blocks/0/row_header_column_index",
    "row_header_column_index not negative": "/blocks/0/row_header_column_index",
    "data_table 10000 chars": "/blocks/0/rows",
    "chart title 1-50": "/blocks/0/title",
    "chart title given": "/blocks/0/title",
    "chart an object": "/blocks/0/chart",
    "chart type": "/blocks/0/chart/type",
    "pie segments 1-6": "/blocks/0/chart/segments",
    "pie segments given": "/blocks/0/chart/segments",
    "pie label 1-20": "/blocks/0/chart/segments/0/label",
    "pie label given": "/blocks/0/chart/segments/0/label",
    "pie value above 0": "/blocks/0/chart/segments/0/value",
    "pie value a number": "/blocks/0/chart/segments/0/value",
    "pie no series": "/blocks/0/chart/series",
    "pie no axis_config": "/blocks/0/chart/axis_config",
    "series 1-6": "/blocks/0/chart/series",
    "series given": "/blocks/0/chart/series",
    "series names unique": "/blocks/0/chart/series/1/name",
    "series name 1-20": "/blocks/0/chart/series/0/name",
    "series points 1-20": "/blocks/0/chart/series/0/data",
    "point label in categories": "/blocks/0/chart/series/0/data/1/label",
    "point value a number": "/blocks/0/chart/series/0/data/0/value",
    "categories given": "/blocks/0/chart/axis_config/categories",
    "axis_config given": "/blocks/0/chart",
    "category 1-20 chars": "/blocks/0/chart/axis_config/categories/0",
    "axis labels 1-50": "/blocks/0/chart/axis_config/y_label",
    "series cover every category": "/blocks/0/chart/series/0/data",
    "series cover each category once": "/blocks/0/chart/series/0/data",
    "2 charts a message": "/blocks/2",
}


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def client_of(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


async def refusal(slack: FakeSlack, blocks: list[Block], **args: Any) -> dict[str, Any]:
    """Slack's answer to posting `blocks`, which it must refuse."""
    with pytest.raises(SlackApiError) as err:
        await client_of(slack).chat_postMessage(channel=CHANNEL, text="x", blocks=blocks, **args)
    return err.value.response.data


def assert_invalid_blocks(answer: dict[str, Any], *needles: str) -> None:
    assert answer["error"] == "invalid_blocks", answer
    messages = answer["response_metadata"]["messages"]
    assert all(m.startswith("[ERROR] ") and "[json-pointer:/" in m for m in messages)
    for needle in needles:
        assert any(needle in m for m in messages), messages


@pytest.mark.parametrize("blocks", [taken for taken, _ in RULES.values()], ids=list(RULES))
async def test_a_payload_within_the_rule_is_posted(slack: FakeSlack, blocks: list[Block]) -> None:
    posted = await client_of(slack).chat_postMessage(channel=CHANNEL, text="x", blocks=blocks)
    stored = slack.find_message(CHANNEL, posted["ts"])
    assert [b["type"] for b in stored["blocks"]] == [b["type"] for b in blocks]


@pytest.mark.parametrize("rule", list(RULES))
async def test_a_payload_past_the_rule_is_invalid_blocks(slack: FakeSlack, rule: str) -> None:
    answer = await refusal(slack, RULES[rule][1])
    assert_invalid_blocks(answer, f"[json-pointer:{WHERE[rule]}]")
    assert slack.bot_messages(CHANNEL) == []


async def test_problems_point_at_the_cell(slack: FakeSlack) -> None:
    answer = await refusal(slack, [pie(), data_table([[raw()], [raw(), raw("")]])])
    assert_invalid_blocks(answer, "[json-pointer:/blocks/1/rows/1]", "/blocks/1/rows/1/1/text]")


async def test_a_second_table_is_invalid_attachments(slack: FakeSlack) -> None:
    answer = await refusal(slack, [table(), table()])
    assert answer["error"] == "invalid_attachments"
    assert any("only_one_table_allowed" in m for m in answer["response_metadata"]["messages"])


async def test_a_table_in_attachments_counts_with_the_messages_own(slack: FakeSlack) -> None:
    client = client_of(slack)
    posted = await client.chat_postMessage(
        channel=CHANNEL, text="x", attachments=[{"blocks": [table()]}]
    )
    assert slack.find_message(CHANNEL, posted["ts"])["attachments"][0]["blocks"][0]["type"] == (
        "table"
    )
    with pytest.raises(SlackApiError) as err:
        await client.chat_postMessage(
            channel=CHANNEL, text="x", blocks=[table()], attachments=[{"blocks": [table()]}]
        )
    assert err.value.response["error"] == "invalid_attachments"
    with pytest.raises(SlackApiError) as err:
        await client.chat_postMessage(
            channel=CHANNEL, text="x", attachments=[{"blocks": [table(rows_of(101))]}]
        )
    assert "json-pointer:/attachments/0/blocks/0/rows" in str(
        err.value.response["response_metadata"]
    )


async def test_update_and_ephemeral_check_the_data_blocks(slack: FakeSlack) -> None:
    client = client_of(slack)
    posted = await client.chat_postMessage(channel=CHANNEL, text="x", blocks=[table()])
    with pytest.raises(SlackApiError) as err:
        await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="x", blocks=[pie(7)])
    assert err.value.response["error"] == "invalid_blocks"
    with pytest.raises(SlackApiError) as err:
        await client.chat_postEphemeral(
            channel=CHANNEL, user="U0HUMAN01", text="x", blocks=[data_table(caption="")]
        )
    assert err.value.response["error"] == "invalid_blocks"
    await client.chat_update(
        channel=CHANNEL, ts=posted["ts"], text="x", blocks=[data_table(), pie()]
    )


async def test_a_canvas_element_in_rich_text_is_taken(slack: FakeSlack) -> None:
    element = {"type": "canvas", "file_id": "F0CANVAS01"}
    block = {
        "type": "rich_text",
        "elements": [{"type": "rich_text_section", "elements": [element]}],
    }
    posted = await client_of(slack).chat_postMessage(channel=CHANNEL, text="x", blocks=[block])
    stored = slack.find_message(CHANNEL, posted["ts"])["blocks"][0]
    assert stored["elements"][0]["elements"] == [element]


# -- switches


@pytest.mark.parametrize(
    ("refused", "kind", "still_taken"),
    [
        ({"data_table"}, "data_table", [table(), line()]),
        ({"data_table", "table"}, "table", [line(), {"type": "divider"}]),
        ({"data_visualization"}, "data_visualization", [data_table()]),
    ],
)
async def test_a_workspace_without_a_block_type_refuses_it(
    refused: set[str], kind: str, still_taken: list[Block]
) -> None:
    samples = {"table": table(), "data_table": data_table(), "data_visualization": pie()}
    async with FakeSlack(refuse_blocks=refused) as slack:
        answer = await refusal(slack, [samples[kind]])
        assert_invalid_blocks(answer, kind, "[json-pointer:/blocks/0/type]")
        await client_of(slack).chat_postMessage(channel=CHANNEL, text="x", blocks=still_taken)


async def test_revision_b_takes_201_rows_and_20000_characters() -> None:
    async with FakeSlack(data_table_revision="B") as slack:
        client = client_of(slack)
        await client.chat_postMessage(channel=CHANNEL, text="x", blocks=[data_table(rows_of(201))])
        await client.chat_postMessage(
            channel=CHANNEL, text="x", blocks=[data_table(cells_of(20_000))]
        )
        assert_invalid_blocks(await refusal(slack, [data_table(rows_of(202))]), "/rows]")
        assert_invalid_blocks(await refusal(slack, [data_table(cells_of(20_001))]), "20000")


async def test_charts_of_12_series_behind_a_switch() -> None:
    async with FakeSlack(chart_max_series=12) as slack:
        await client_of(slack).chat_postMessage(
            channel=CHANNEL, text="x", blocks=[pie(12), line(12)]
        )
        assert_invalid_blocks(await refusal(slack, [line(13)]), "/chart/series]")


FINER: dict[str, tuple[SurfaceRules, list[Block]]] = {
    "raw_number in table off": (SurfaceRules(table_raw_number=False), [table([[num()]])]),
    "null column_settings off": (
        SurfaceRules(null_column_settings=False),
        [table(column_settings=[None])],
    ),
    "legacy tables": (SurfaceRules(legacy_tables=True), [table()]),
}
LOOSER: dict[str, tuple[SurfaceRules, list[Block]]] = {
    "table chars": (SurfaceRules(table_char_budget=False), [table(cells_of(10_001))]),
    "raw_number text": (
        SurfaceRules(raw_number_text_required=False),
        [data_table([[raw()], [{"type": "raw_number", "value": 3}]])],
    ),
    "table family": (SurfaceRules(one_table_family=False), [table(), data_table()]),
    "coverage": (SurfaceRules(full_coverage=False), [line_with(series("a", ["Mon"]))]),
}


@pytest.mark.parametrize(("rules", "blocks"), FINER.values(), ids=list(FINER))
async def test_stricter_switches_refuse(rules: SurfaceRules, blocks: list[Block]) -> None:
    async with FakeSlack() as slack:
        await client_of(slack).chat_postMessage(channel=CHANNEL, text="x", blocks=blocks)
    async with FakeSlack(surface_rules=rules) as slack:
        assert_invalid_blocks(await refusal(slack, blocks))


@pytest.mark.parametrize(("rules", "blocks"), LOOSER.values(), ids=list(LOOSER))
async def test_looser_switches_take(rules: SurfaceRules, blocks: list[Block]) -> None:
    async with FakeSlack() as slack:
        assert_invalid_blocks(await refusal(slack, blocks))
    async with FakeSlack(surface_rules=rules) as slack:
        await client_of(slack).chat_postMessage(channel=CHANNEL, text="x", blocks=blocks)


async def test_a_legacy_table_still_goes_in_attachments() -> None:
    async with FakeSlack(surface_rules=SurfaceRules(legacy_tables=True)) as slack:
        await client_of(slack).chat_postMessage(
            channel=CHANNEL, text="x", attachments=[{"blocks": [table()]}]
        )


async def test_markdown_blocks_share_a_budget_unless_switched() -> None:
    blocks = [{"type": "markdown", "text": "x" * 7_000}] * 2
    async with FakeSlack() as slack:
        answer = await refusal(slack, blocks)
        assert answer["error"] == "msg_blocks_too_long"
    async with FakeSlack(surface_rules=SurfaceRules(markdown_per_block=True)) as slack:
        await client_of(slack).chat_postMessage(channel=CHANNEL, text="x", blocks=blocks)


async def test_unfurl_flags_are_kept_on_the_message(slack: FakeSlack) -> None:
    client = client_of(slack)
    plain = await client.chat_postMessage(channel=CHANNEL, text="https://example.com")
    chosen = await client.chat_postMessage(
        channel=CHANNEL, text="https://example.com", unfurl_links=True, unfurl_media=False
    )
    first, second = (
        slack.find_message(CHANNEL, plain["ts"]),
        slack.find_message(CHANNEL, chosen["ts"]),
    )
    assert (first.unfurl_links, first.unfurl_media) == (False, True)
    assert (second.unfurl_links, second.unfurl_media) == (True, False)


@pytest.mark.parametrize("strict", [False, True])
async def test_block_mismatch_behind_a_switch(strict: bool) -> None:
    async with FakeSlack(block_mismatch=strict) as slack:
        client = client_of(slack)
        posted = await client.chat_postMessage(channel=CHANNEL, text="x", blocks=[rich()])
        await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="y", blocks=[rich("y")])
        update = client.chat_update(channel=CHANNEL, ts=posted["ts"], text="t", blocks=[table()])
        if not strict:
            await update
            return
        with pytest.raises(SlackApiError) as err:
            await update
        assert err.value.response["error"] == "block_mismatch"


# -- streams


async def start_stream(slack: FakeSlack, **args: Any) -> Any:
    client = client_of(slack)
    parent = await client.chat_postMessage(channel=CHANNEL, text="question")
    return await client.chat_startStream(
        channel=CHANNEL,
        thread_ts=parent["ts"],
        recipient_user_id="U0HUMAN01",
        recipient_team_id=slack.team_id,
        **args,
    )


@pytest.mark.parametrize("block", [table(), data_table(), pie()], ids=lambda b: b["type"])
async def test_streams_refuse_data_blocks_unless_switched_on(block: Block) -> None:
    chunk = {"type": "blocks", "blocks": [block]}
    async with FakeSlack() as slack:
        with pytest.raises(SlackApiError) as err:
            await start_stream(slack, chunks=[chunk])
        assert_invalid_blocks(err.value.response.data, block["type"])
        started = await start_stream(slack, markdown_text="hi")
        with pytest.raises(SlackApiError) as err:
            await client_of(slack).chat_stopStream(
                channel=CHANNEL, ts=started["ts"], blocks=[block]
            )
        assert_invalid_blocks(err.value.response.data, "streamed")
    async with FakeSlack(stream_data_blocks=True) as slack:
        started = await start_stream(slack, chunks=[chunk])
        await client_of(slack).chat_stopStream(channel=CHANNEL, ts=started["ts"], blocks=[block])
        types = [b["type"] for b in slack.find_message(CHANNEL, started["ts"])["blocks"]]
        assert types.count(block["type"]) == 2


async def test_streams_answer_msg_blocks_too_many() -> None:
    async with FakeSlack() as slack:
        started = await start_stream(slack, markdown_text="hi")
        client = client_of(slack)
        with pytest.raises(SlackApiError) as err:
            await client.chat_stopStream(
                channel=CHANNEL, ts=started["ts"], blocks=[{"type": "divider"}] * 51
            )
        assert err.value.response["error"] == "msg_blocks_too_many"
        await client.chat_stopStream(
            channel=CHANNEL, ts=started["ts"], blocks=[{"type": "divider"}] * 50
        )


# -- blocks.validate


async def test_blocks_validate_takes_what_posting_takes(slack: FakeSlack) -> None:
    client = client_of(slack)
    assert (await client.blocks_validate(blocks=[table(), pie(), line()]))["ok"] is True
    assert (await client.blocks_validate(message={"blocks": [data_table()]}))["ok"] is True
    assert slack.bot_messages(CHANNEL) == []


async def test_blocks_validate_answers_errors_with_pointers(slack: FakeSlack) -> None:
    client = client_of(slack)
    with pytest.raises(SlackApiError) as err:
        await client.blocks_validate(blocks=[pie(), line(7)])
    answer = err.value.response.data
    assert answer["error"] == "invalid_blocks"
    assert {"code": "failed_constraint", "pointer": "/1/chart/series"}.items() <= answer["errors"][
        0
    ].items()
    assert "6" in answer["errors"][0]["message"]
    with pytest.raises(SlackApiError) as err:
        await client.blocks_validate(message={"blocks": [data_table(caption="")]})
    assert err.value.response["error"] == "invalid_message"
    assert err.value.response["errors"][0]["pointer"] == "/blocks/0/caption"


@pytest.mark.parametrize(
    "args",
    [{}, {"blocks": [table()], "message": {"blocks": []}}, {"view": {"blocks": []}, "blocks": []}],
    ids=["none", "blocks and message", "view and blocks"],
)
async def test_blocks_validate_wants_exactly_one_argument(
    slack: FakeSlack, args: dict[str, Any]
) -> None:
    with pytest.raises(SlackApiError) as err:
        await client_of(slack).blocks_validate(**args)
    assert err.value.response["error"] == "invalid_arguments"
    assert "exactly one of" in err.value.response["response_metadata"]["messages"][0]


async def test_blocks_validate_uses_the_workspaces_switches() -> None:
    async with FakeSlack(refuse_blocks={"data_visualization"}) as slack:
        with pytest.raises(SlackApiError) as err:
            await client_of(slack).blocks_validate(blocks=[pie()])
        assert err.value.response["errors"][0]["pointer"] == "/0/type"
