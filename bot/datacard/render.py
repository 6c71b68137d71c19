"""A card as text: for the model's system prompt (within a token budget) and for Slack."""

from __future__ import annotations

from bot.datacard.card import ColumnCard, DataCard

CHARS_PER_TOKEN = 4
SLACK_COLUMNS = 12
_KIND = {"csv": "CSV", "tsv": "TSV", "json": "JSON", "jsonl": "JSON Lines"}
_KIND |= {"xlsx": "Excel sheet", "parquet": "Parquet"}
_DELIM = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}


def for_model(card: DataCard, max_tokens: int = 600) -> str:
    """The card in about `max_tokens` tokens (4 characters each): column details first give
    way to a plain list of names and types, then that list is cut short."""
    budget = max(40, max_tokens * CHARS_PER_TOKEN)
    head = _headline(card)
    for detail in (2, 1):
        lines = [_column(c, detail) for c in card.columns]
        text = "\n".join([head, _columns_intro(card), *lines, *_tail(card, True)])
        if len(text) <= budget:
            return text
    tail = _tail(card, False)
    room = budget - len(head) - sum(len(t) + 1 for t in tail) - 20
    text = "\n".join([head, _inline(card, max(room, 60)), *tail])
    return text if len(text) <= budget else text[: budget - 1] + "…"


def cards_for_model(cards: list[DataCard], max_tokens: int = 2000) -> str:
    """Several cards sharing one budget: each gets an equal share, and a share one card
    leaves unused goes to the cards after it."""
    parts, left = [], max_tokens
    for i, card in enumerate(cards):
        text = for_model(card, left // (len(cards) - i))
        left -= len(text) // CHARS_PER_TOKEN + 1
        parts.append(text)
    return "\n\n".join(parts)


def for_slack(card: DataCard) -> str:
    """A short Slack message (mrkdwn): what the file is, its columns and what to watch."""
    size = f" · {_size(card.size)}" if card.size is not None else ""
    kind = _KIND.get(card.kind, card.kind)
    lines = [f"*{_esc(card.name)}* · {kind} · {_shape(card)}{size}"]
    cols = [f"`{_esc(c.name).replace('`', _TICK)}` {c.type}" for c in card.columns]
    more = card.columns_total - len(cols[:SLACK_COLUMNS])
    if cols:
        lines.append(" · ".join(cols[:SLACK_COLUMNS]) + (f" · _and {more:,} more_" if more else ""))
    if card.aggregates:
        a = card.aggregates
        examples = ", ".join(a.examples[:3]) + ("…" if len(a.examples) > 3 else "")
        what = f"{a.count:,} aggregate row{'s' if a.count != 1 else ''}"
        lines.append(f":warning: {what} in `{_esc(a.column)}` ({_esc(examples)})")
    if card.malformed.total:
        lines.append(f":warning: {_esc(_malformed(card))}")
    if not card.columns and card.notes:  # why there is nothing more to say
        lines.append(f"_{_esc(card.notes[0])}_")
    return "\n".join(lines)


_TICK = "ˋ"


def _headline(card: DataCard) -> str:
    parts = [_KIND.get(card.kind, card.kind)]
    if card.delimiter and card.kind in ("csv", "tsv") and card.delimiter != ",":
        parts.append(f"{_DELIM.get(card.delimiter, repr(card.delimiter))}-delimited")
    if card.encoding and card.encoding != "utf-8":
        parts.append(f"encoding {card.encoding}")
    if card.header is not None:
        parts.append("header row" if card.header else "no header row (columns numbered)")
    size = f", {_size(card.size)}" if card.size is not None else ""
    return f"{card.name}: {', '.join(parts)}; {_shape(card)}{size}."


def _shape(card: DataCard) -> str:
    rows = "? rows" if card.rows is None else _rows(card.rows)
    if card.rows is not None and not card.rows_exact:
        rows = f"at least {rows}"
    columns = "column" if card.columns_total == 1 else "columns"
    return f"{rows} × {card.columns_total:,} {columns}"


def _columns_intro(card: DataCard) -> str:
    if not card.columns:
        return "No columns." if not card.columns_total else ""
    shown = len(card.columns)
    which = (
        f"first {shown:,} of {card.columns_total:,} columns"
        if shown < card.columns_total
        else "columns"
    )
    if card.profiled_from == "stats":
        return f"The {which} (from the file's own statistics):"
    if card.profiled_from == "types":
        return f"The {which} (types as the file declares them):"
    if not card.sampled:
        return f"The {which} (all rows profiled):"
    if card.profiled_from == "top":
        return f"The {which} (from the top {card.profiled_rows:,} rows):"
    return f"The {which} ({card.profiled_rows:,} rows profiled, spread through the file):"


def _column(c: ColumnCard, detail: int) -> str:
    text = f"- {c.name}: {c.type}" + (f" ({c.declared})" if c.declared else "")
    if c.type in ("integer", "decimal") and c.low is not None:
        text += f", {_num(c.low)} to {_num(c.high)}"
        if detail > 1 and c.mean is not None:
            text += f", mean {_num(c.mean)}"
    elif c.type in ("date", "datetime") and c.low is not None:
        text += f", {c.low} to {c.high}"
    if c.empty:
        text += f", {c.empty / max(1, c.empty + c.count):.0%} empty"
    if detail > 1:
        text += _distinct(c)
    if c.odd:
        examples = ", ".join(repr(x) for x in c.odd_examples[:2])
        cells = "1 cell is" if c.odd == 1 else f"{c.odd:,} cells are"
        article = "an" if c.type[0] in "aeiou" else "a"
        text += f"; {cells} not {article} {c.type}" + (f" ({examples})" if examples else "")
    return text


def _distinct(c: ColumnCard) -> str:
    if c.type == "empty" or c.distinct is None:
        return ""
    if c.distinct >= c.count * (0.95 if c.distinct_estimated else 1):
        text = ", values unique" if c.count > 1 else ""
    else:
        text = f", {'~' if c.distinct_estimated else ''}{c.distinct:,} distinct"
    if not c.top:
        return text
    if c.distinct <= len(c.top):  # all of them
        return text + "; values: " + ", ".join(_clip(v) for v, _ in c.top)
    if c.top[0][1] * c.distinct > 1.5 * c.count:  # some values much more common
        return text + "; top: " + ", ".join(f"{_clip(v)} ({n:,})" for v, n in c.top[:3])
    return text + "; e.g. " + ", ".join(_clip(v) for v, _ in c.top[:3])


def _inline(card: DataCard, room: int) -> str:
    out: list[str] = []
    used = 0
    for i, c in enumerate(card.columns):
        item = f"{c.name} ({c.type})"
        if used + len(item) + 2 > room:
            return "Columns: " + ", ".join(out) + f", … and {card.columns_total - i:,} more"
        out.append(item)
        used += len(item) + 2
    more = card.columns_total - len(out)
    return "Columns: " + ", ".join(out) + (f", … and {more:,} more" if more else "")


def _tail(card: DataCard, full: bool) -> list[str]:
    lines = []
    if (a := card.aggregates) and full:
        count = f"{a.count:,} of the profiled rows" if card.sampled else _rows(a.count)
        lines.append(
            f"Aggregate rows: {count} where {a.column} names a group or a "
            f"total rather than one entity (e.g. {', '.join(a.examples[:4])}): leave them out "
            "of sums and averages."
        )
    elif a:
        lines.append(f"Aggregates: {_rows(a.count)} in {a.column} ({', '.join(a.examples[:2])}).")
    if card.malformed.total or card.malformed.blank:
        lines.append(_malformed(card) + ".")
    return lines + (card.notes if full else card.notes[:1])


def _rows(n: int) -> str:
    return f"{n:,} row" if n == 1 else f"{n:,} rows"


def _malformed(card: DataCard) -> str:
    m = card.malformed
    kinds = [("ragged", m.ragged), ("unclosed quote", m.quotes), ("overlong", m.overlong)]
    kinds += [("invalid", m.invalid), ("blank", m.blank)]
    counts = ", ".join(f"{n:,} {what}" for what, n in kinds if n)
    where = ", ".join(f"{row:,} ({why})" for row, why in m.first[:3])
    return f"Malformed rows: {counts}" + (f"; first at line {where}" if where else "")


def _num(x: float | int | str | None) -> str:
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    if isinstance(x, float):
        return f"{x:,.0f}" if abs(x) >= 10_000 else f"{x:.5g}"
    return str(x)


def _clip(value: str, width: int = 30) -> str:
    return repr(value if len(value) <= width else value[: width - 1] + "…")


def _size(size: int | None) -> str:
    n = float(size or 0)
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
