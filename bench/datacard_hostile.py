"""Benchmark: what files written to be slow to card cost, against plain files of their size.

Run from the repository root: `.venv/bin/python -m bench.datacard_hostile`.

For each attack, the seconds the card of the hostile file takes (a refusal counts: it is
what the bot does with it), the best of two for a plain file of about the same size, and
the ratio (the plain time taken as at least 0.05 s, below which the timer is noise).
Wall time on a shared 2-core machine: read ratios within a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import random
from collections.abc import Callable
from typing import Any

from bot.datacard import CardError, card_parquet, card_xlsx, gunzip
from tests.hostile_files import (
    MAIN,
    PLAIN_FLOOR_S,
    gzip_members,
    parquet,
    plain_csv,
    plain_json,
    plain_workbook,
    profiled,
    seconds,
    sheet,
    styles,
    thrift_list_of_empty_structs,
    workbook,
)


def refused_or_carded(work: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> None:
        with contextlib.suppress(CardError):
            work()

    return run


def xlsx(data: bytes) -> Callable[[], Any]:
    return refused_or_carded(lambda: card_xlsx(data, "f.xlsx"))


def unpacked(data: bytes) -> Callable[[], Any]:
    async def chunks() -> Any:
        for at in range(0, len(data), 65536):
            yield data[at : at + 65536]

    async def drain() -> None:
        async for _ in gunzip(chunks(), "f.csv.gz"):
            pass

    return refused_or_carded(lambda: asyncio.run(drain()))


def cases() -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    long_format = workbook(sheet(), **{"xl/styles.xml": styles(256 << 10, 200)})
    ref = "A" * 50_000 + "1"
    huge_ref = workbook(
        f'<worksheet {MAIN}><dimension ref="A1:{ref}"/><sheetData><row r="1">'
        f'<c r="{ref}"><v>1</v></c></row></sheetData></worksheet>'
    )
    cells = "<c/>" * (2 << 20)
    wide = workbook(f"<worksheet {MAIN}><sheetData><row>{cells}</row></sheetData></worksheet>")
    open_rows = workbook(sheet(dimension=False) + "<!--" + "<row " * 50_000 + "-->")
    entries = workbook(sheet(), **{f"x/{i}": b"" for i in range(100_000)})  # type: ignore[arg-type]
    structs = parquet(thrift_list_of_empty_structs(4 << 20))
    padded = parquet(thrift_list_of_empty_structs(0)[:-1] + b"\x15\x00" + b"\x00" * (4 << 20))
    members = gzip_members(1 << 16)
    noise = gzip.compress(random.Random(0).randbytes(len(members)), mtime=0)
    header = b"," * (4 << 20) + b"\n" + b"," * 100 + b"\n"
    ragged = b"a,b\n" + b"x\n" * (2 << 20)
    values = b"[" + b"1," * (1 << 20) + b"1]"
    return [
        (
            "xlsx: 256 KB format x 200 styles",
            xlsx(long_format),
            xlsx(plain_workbook(len(long_format))),
        ),
        ("xlsx: 50,000-letter cell reference", xlsx(huge_ref), xlsx(plain_workbook(len(huge_ref)))),
        ("xlsx: 50,000 '<row' never closed", xlsx(open_rows), xlsx(plain_workbook(len(open_rows)))),
        ("xlsx: a row of 2M cells", xlsx(wide), xlsx(plain_workbook(len(wide)))),
        ("zip: 100,000 entries", xlsx(entries), xlsx(plain_workbook(len(entries)))),
        (
            "parquet: 4M empty structs",
            refused_or_carded(lambda: card_parquet(structs, "f.parquet")),
            refused_or_carded(lambda: card_parquet(padded, "f.parquet")),
        ),
        ("gzip: 65,536 empty members", unpacked(members), unpacked(noise)),
        ("csv: 4 MB header of commas", profiled(header), profiled(plain_csv(len(header)))),
        ("csv: 2M ragged lines", profiled(ragged), profiled(plain_csv(len(ragged)))),
        (
            "json: 1M tiny values",
            profiled(values, "json"),
            profiled(plain_json(len(values)), "json"),
        ),
    ]


def main() -> None:
    print(f"{'attack':40} {'hostile s':>10} {'plain s':>9} {'ratio':>7}")
    for label, hostile, plain in cases():
        plain_s = min(seconds(plain), seconds(plain))
        hostile_s = seconds(hostile)
        ratio = hostile_s / max(plain_s, PLAIN_FLOOR_S)
        print(f"{label:40} {hostile_s:10.3f} {plain_s:9.3f} {ratio:7.1f}", flush=True)


if __name__ == "__main__":
    main()
