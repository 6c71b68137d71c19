"""Output files that cost the sandbox nothing and the bot a lot: sparse files (`truncate -s`)
hold no disk blocks, so no disk quota sees them, yet each reads as its full size. The bot
streams what it attaches (never a whole file in memory), counts the bytes it reads against
a cap per file and a cap per answer, and says in the thread what it left out and why."""

from __future__ import annotations

import io
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.scrub import Scrubber
from bot.sessions.events import OutputsReady
from bot.sessions.outputs import LeftOut, OutputBudget, OutputCaps
from bot.terminal.render import TerminalView
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.slack_harness import CHANNEL, running_bot
from tests.support import Recorder, runtime_on

MB = 1 << 20
FILES, FILE_MB = 30, 4  # 120 MB as read, next to no disk
FILE_CAP, TOTAL_CAP = 6 * MB, 10 * MB  # two files fit in all; one over the cap for one
SPARSE = (
    "cd /buddy/work/out && "
    f"for i in $(seq -w 1 {FILES}); do truncate -s {FILE_MB}M f$i.bin; done && "
    "truncate -s 7M huge.bin && printf '# Report\\nsee the files\\n' > /buddy/work/report.md"
)


def sparse_writer(req) -> Reply:
    if not req.tool_results():
        return Reply([tool_use("run_code", {"language": "bash", "code": SPARSE})])
    return Reply([text("Done: the files are in out/.")])


async def test_sparse_outputs_are_streamed_and_capped(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    caps = {"output_file_max_bytes": FILE_CAP, "output_total_max_bytes": TOTAL_CAP}
    async with running_bot(backend, sparse_writer, sandbox_root, monkeypatch, **caps) as h:
        tracemalloc.start()
        try:
            message = await h.slack.post_user_message(CHANNEL, "make files", mention=True)
            thread = message["ts"]
            shared = lambda: [u for u in h.slack.uploads.values() if u.shared_ts]  # noqa: E731
            await h.slack.wait_for(lambda: any(u.filename == "report.md" for u in shared()), 60)
            await h.wait_for_text(thread, "Not attached", timeout=30)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        texts = h.texts(thread)

    sent = {u.filename: u for u in h.slack.uploads.values()}
    assert "report.md" in sent and b"# Report" in sent["report.md"].content
    assert sum(len(u.content) for u in sent.values()) <= TOTAL_CAP
    bins = sorted(n for n in sent if n.endswith(".bin"))
    assert bins == ["f01.bin", "f02.bin"]  # in name order, until the cap for the answer
    assert all(len(sent[n].content) == FILE_MB * MB for n in bins)
    # Growth far below the 127 MB the files read as: what was sent (the fake Slack keeps
    # it, in this process too) plus a few buffers.
    assert peak < TOTAL_CAP + 12 * MB, f"peak {peak / MB:.0f} MB"
    # The thread names what was left out, and why.
    assert "huge.bin" in texts and "over the 6.0 MB limit for one file" in texts
    assert "f03.bin" in texts and "10.0 MB in all" in texts
    assert "more" in texts  # 28 names are not listed one by one


async def test_the_terminal_saves_sparse_outputs_streamed_and_capped(
    backend: str, tmp_path: Path, sandbox_root: Path
) -> None:
    """`ask --out DIR`: the same caps, and the terminal says what was not saved."""
    caps = {"output_file_max_bytes": FILE_CAP, "output_total_max_bytes": TOTAL_CAP}
    out, dest = io.StringIO(), tmp_path / "out"
    async with (
        FakeAnthropic(sparse_writer) as fake,
        runtime_on(backend, fake.base_url, sandbox_root, **caps) as runtime,
    ):
        session = runtime.sessions.new("test-sparse")
        try:
            await session.ask("make files", Recorder())
            tracemalloc.start()
            try:
                view = TerminalView(out, color=False, save_to=dest)
                await view(OutputsReady(session.outputs))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        finally:
            await session.close()

    saved = sorted(p.name for p in dest.iterdir())
    assert saved == ["f01.bin", "f02.bin", "report.md"]  # no .part file left behind
    assert sum(p.stat().st_size for p in dest.iterdir()) <= TOTAL_CAP
    assert peak < 8 * MB, f"peak {peak / MB:.0f} MB"
    printed = out.getvalue()
    assert "Not saved: " in printed and "huge.bin (over the 6.0 MB limit for one file)" in printed
    assert "f03.bin" in printed and "and 18 more (the answer's files passed 10.0 MB" in printed


async def test_a_file_that_grows_past_its_listed_size_is_cut_off() -> None:
    """Listed small, then written on by a command still running: the bytes read count."""

    async def growing() -> AsyncIterator[bytes]:
        for _ in range(100):
            yield b"x" * 1000

    budget = OutputBudget(OutputCaps(file_bytes=5000, total_bytes=8000))
    assert budget.refusal(10) == ""
    with pytest.raises(LeftOut, match="limit for one file"):
        async for _ in budget.capped(growing()):
            pass
    assert budget.used == 0  # a file left out takes none of the answer's room
    async for _ in budget.capped(_chunks(b"y" * 4000)):
        pass
    with pytest.raises(LeftOut, match="in all"):
        async for _ in budget.capped(_chunks(b"z" * 4500)):
            pass
    assert budget.refusal(4001) != "" and budget.refusal(4000) == ""


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


def test_secrets_are_scrubbed_across_chunk_boundaries() -> None:
    scrubber = Scrubber(["s3cret-token-value", "another-secret"])
    data = b"a s3cret-token-value b another-secret c s3cret-token-valu" * 50
    for size in (1, 3, 7, 64):
        stream = scrubber.stream()
        out = b"".join(stream.feed(data[i : i + size]) for i in range(0, len(data), size))
        assert out + stream.end() == scrubber.bytes(data)
