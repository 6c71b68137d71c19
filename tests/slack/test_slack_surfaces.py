"""What a workspace refused, learnt from Slack's invalid_blocks and its per-block messages."""

from __future__ import annotations

import logging

from bot.slack.view.surfaces import Surfaces

TABLE = {"type": "data_table", "caption": "t", "rows": []}
CHART = {"type": "data_visualization", "title": "c", "chart": {}}


def pointer(i: int, rest: str = "") -> str:
    return f"[ERROR] unsupported block type [json-pointer:/blocks/{i}{rest}]"


def test_a_block_refused_as_a_whole_is_learnt_for_the_team_and_logged_once(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="bot.slack.view.surfaces")
    surfaces = Surfaces()
    shape = surfaces.shape("T1")
    assert surfaces.refused("T1", shape, [TABLE, CHART], [pointer(0, "/type")])
    assert (shape.table_kind, shape.charts) == ("table", True)
    assert surfaces.shape("T1").table_kind == "table"
    assert surfaces.shape("T2").table_kind == "data_table"  # another workspace
    again = surfaces.shape("T1")
    assert surfaces.refused("T1", again, [{"type": "table"}, CHART], [pointer(0)])
    assert surfaces.shape("T1").table_kind == "monospace"
    assert len(caplog.records) == 2


def test_a_rule_broken_inside_a_block_falls_back_for_that_message_only() -> None:
    surfaces = Surfaces()
    shape = surfaces.shape("T1")
    assert surfaces.refused("T1", shape, [TABLE, CHART], [pointer(1, "/chart/series/0/name")])
    assert not shape.charts
    assert surfaces.shape("T1").charts  # not learnt


def test_without_a_pointer_charts_go_first_then_the_table() -> None:
    surfaces = Surfaces()
    shape = surfaces.shape("T1")
    assert surfaces.refused("T1", shape, [TABLE, CHART], [])
    assert not shape.charts and shape.table_kind == "data_table"
    assert surfaces.refused("T1", shape, [TABLE], [])
    assert shape.table_kind == "table"


def test_nothing_left_to_fall_back_to_says_so() -> None:
    surfaces = Surfaces()
    shape = surfaces.shape("T1")
    shape.table_kind, shape.charts = "monospace", False
    assert not surfaces.refused("T1", shape, [{"type": "rich_text"}], [pointer(0)])
    assert not surfaces.refused("T1", shape, [{"type": "section"}], [])
