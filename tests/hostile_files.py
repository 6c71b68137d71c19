"""Hostile data files, each next to a plain file of about the same size, and the ratio of
the time the data card takes for one to the other."""

from __future__ import annotations

import gzip
import io
import struct
import time
import zipfile
from collections.abc import Callable
from typing import Any

from bot.datacard import Profiler

PLAIN_FLOOR_S = 0.05  # a plain file's time is taken as at least this: timer noise aside
MAIN = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
WORKBOOK = {
    "[Content_Types].xml": "<Types/>",
    "xl/workbook.xml": f'<workbook {MAIN} xmlns:r="{_RELS}"><sheets>'
    '<sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>',
    "xl/_rels/workbook.xml.rels": '<Relationships xmlns="http://schemas.openxmlformats.org/'
    'package/2006/relationships"><Relationship Id="rId1" Target="worksheets/sheet1.xml" '
    f'Type="{_RELS}/worksheet"/></Relationships>',
}


def seconds(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def ratio(hostile: Callable[[], Any], plain: Callable[[], Any]) -> float:
    """How many times longer the hostile work takes than the plain one."""
    plain_s = min(seconds(plain), seconds(plain))
    return seconds(hostile) / max(plain_s, PLAIN_FLOOR_S)


def profiled(data: bytes, kind: str | None = None) -> Callable[[], Any]:
    def work() -> Any:
        profiler = Profiler("f", kind)
        for at in range(0, len(data), 65536):
            profiler.feed(data[at : at + 65536])
        return profiler.finish()

    return work


def plain_csv(size: int) -> bytes:
    row = b"Aruba,ABW,2000,90853\n"
    return b"name,code,year,value\n" + row * (size // len(row))


def plain_json(size: int) -> bytes:
    record = b'{"a":1,"b":"xyz","c":2.5,"d":"2020-01-01"}'
    return b"[" + b",".join([record] * (size // (len(record) + 1))) + b"]"


def stored_zip(entries: dict[str, str | bytes]) -> bytes:
    """Entries stored uncompressed: what passes any unpacked-per-packed ratio check."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return out.getvalue()


def sheet(rows: int = 20, pad: int = 0, dimension: bool = True) -> str:
    body = "".join(
        f'<row r="{r}"><c r="A{r}"><v>{r}</v></c>'
        f'<c r="B{r}" t="inlineStr"><is><t>x{r}</t></is></c></row>'
        for r in range(1, rows + 1)
    )
    size = f'<dimension ref="A1:B{rows}"/>' if dimension else ""
    return f"<worksheet {MAIN}>{size}<sheetData>{body}</sheetData></worksheet>" + " " * pad


def workbook(sheet_xml: str, **parts: str | bytes) -> bytes:
    return stored_zip({**WORKBOOK, "xl/worksheets/sheet1.xml": sheet_xml, **parts})


def plain_workbook(size: int) -> bytes:
    return workbook(sheet(pad=size))


def styles(format_chars: int, xfs: int) -> str:
    """One long custom number format (all literal characters) used by `xfs` cell styles."""
    code = "0" + "\\x" * (format_chars // 2)
    return (
        f'<styleSheet {MAIN}><numFmts count="1"><numFmt numFmtId="164" formatCode="{code}"/>'
        f'</numFmts><cellXfs count="{xfs}">' + '<xf numFmtId="164"/>' * xfs + "</cellXfs>"
        "</styleSheet>"
    )


def gzip_members(count: int) -> bytes:
    """`count` gzip members holding nothing, one after the other (20 bytes each)."""
    return gzip.compress(b"", mtime=0) * count


def parquet(footer: bytes) -> bytes:
    return b"PAR1" + footer + struct.pack("<I", len(footer)) + b"PAR1"


def thrift_list_of_empty_structs(count: int) -> bytes:
    """FileMetaData whose schema (field 2) is a list of `count` empty structs."""
    head = bytes([0x29, 0xFC]) + _varint(count)  # field 2, a list; size follows, of structs
    return head + b"\x00" * count + b"\x00"


def thrift_nested_lists(depth: int) -> bytes:
    """FileMetaData whose field 2 is a list of one list of one list ... `depth` deep."""
    return bytes([0x29]) + b"\x19" * depth + b"\x00"


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])
