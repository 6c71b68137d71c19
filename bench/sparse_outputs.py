"""Memory the bot spends on an answer's files when model code writes N sparse files of
49 MB each in out/ (`truncate -s`: no disk used, 49 MB each as read), local backend, the
default caps (OUTPUT_FILE_MAX_BYTES, OUTPUT_TOTAL_MAX_BYTES). Prints the traced peak of the
process, what the fake Slack holds of the uploads (in this process too), and the rest: the
bot's own, plus the fake's buffer while it reads one upload's body (up to twice a file).

Run from the repository root: `.venv/bin/python -m bench.sparse_outputs`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import tracemalloc
from pathlib import Path

from bench import sandbox_root
from tests.fakes.anthropic import Reply, text, tool_use
from tests.slack_harness import CHANNEL, running_bot

MB = 1 << 20
COUNTS = (6, 300)


def writer(count: int):
    code = f"cd /buddy/work/out && for i in $(seq 1 {count}); do truncate -s 49M f$i.bin; done"

    def script(req) -> Reply:
        if not req.tool_results():
            return Reply([tool_use("run_code", {"language": "bash", "code": code})])
        return Reply([text("Done.")])

    return script


async def one(root: Path, count: int) -> None:
    async with running_bot("local", writer(count), root, None) as h:
        tracemalloc.start()
        started = time.monotonic()
        message = await h.slack.post_user_message(CHANNEL, "make files", mention=True)
        thread = message["ts"]
        done = lambda: any(u.shared_ts for u in h.slack.uploads.values())  # noqa: E731
        await h.slack.wait_for(done, 600)
        if count * 49 * MB > h.settings.output_total_max_bytes:
            await h.wait_for_text(thread, "Not attached", 600)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        held = sum(len(u.content) for u in h.slack.uploads.values())
    print(
        f"{count:4d} sparse files, {count * 49:6,d} MB as read: peak {peak / MB:6.1f} MB traced, "
        f"{held / MB:6.1f} MB uploaded (held by the fake Slack), the rest "
        f"{(peak - held) / MB:5.1f} MB; {time.monotonic() - started:5.1f} s"
    )


async def main() -> None:
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    for count in COUNTS:
        with sandbox_root() as root:
            await one(root / "work", count)


if __name__ == "__main__":
    asyncio.run(main())
