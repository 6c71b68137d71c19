"""Cutting long text down for the model or a display, keeping the head and the tail."""


def clip(text: str, limit: int, *, what: str = "characters") -> str:
    """Keep about `limit` characters (two thirds head, one third tail), saying what was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[… {cut:,} {what} cut …]\n{text[-tail:]}"


def last_lines(text: str, lines: int, width: int) -> str:
    """The end of an output, for short progress excerpts."""
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join(line if len(line) <= width else line[: width - 1] + "…" for line in kept)
